package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"strings"

	tclog "github.com/testcontainers/testcontainers-go/log"

	_ "github.com/rightsize/rightsize-go/internal/backend/docker" // registers the docker backend
	_ "github.com/rightsize/rightsize-go/internal/backend/memory" // registers the memory backend
	_ "github.com/rightsize/rightsize-go/internal/backend/msb"    // registers the msb backend
	"github.com/rightsize/rightsize-go/internal/ledger"
	"github.com/rightsize/rightsize-go/internal/reaper"
	"github.com/rightsize/rightsize-go/internal/termtext"
)

// Exit codes.
const (
	exitOK          = 0
	exitFailure     = 1 // something could not be done, or was kept back
	exitUsage       = 2
	exitInterrupted = 130 // 128 + SIGINT, as a shell reports it
)

// demoOwnerCommand is the hidden subcommand `rightsize demo` re-executes
// this binary with: the test process whose sandboxes the demo kills.
const demoOwnerCommand = "__demo-owner"

func main() {
	// The demo's test processes may need this program as their native
	// watchdog (where the engine's command line is missing).
	reaper.WatchdogMain()
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// cli is one invocation: where it writes, and how.
type cli struct {
	stdout, stderr io.Writer
	// colour: stdout is a terminal and NO_COLOR is not set.
	colour bool
}

// usageError is a mistake in the command line: exit 2, with a hint.
type usageError struct {
	cmd string // "" for the top level
	msg string
}

func (e *usageError) Error() string { return e.msg }

// exitError carries an exit code other than 1 with its message; an empty
// message prints nothing more.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

func run(args []string, stdout, stderr io.Writer) (code int) {
	// testcontainers-go prints a banner and every request to the standard
	// logger unless told otherwise; the command's output is its own.
	tclog.SetDefault(tclog.NewNoopLogger())
	ledger.TellEmptyCacheDir(stderr)
	c := &cli{stdout: stdout, stderr: stderr, colour: colourWanted(stdout)}
	defer func() {
		// One line, never a stack trace: a panic here is a bug to report,
		// not something a user should have to read.
		if r := recover(); r != nil {
			fmt.Fprintf(stderr, "rightsize: internal error: %s (please report it)\n", termtext.CleanText(fmt.Sprint(r)))
			code = exitFailure
		}
	}()
	err := c.dispatch(args)
	return c.report(err)
}

func (c *cli) dispatch(args []string) error {
	if len(args) == 0 {
		c.usage(c.stderr)
		return &exitError{code: exitUsage}
	}
	name, rest := args[0], args[1:]
	switch name {
	case "ls":
		return c.ls(rest)
	case "sweep":
		return c.sweep(rest)
	case "reuse":
		return c.reuse(rest)
	case "demo":
		return c.demo(rest)
	case "version":
		return c.version(rest)
	case "help", "-h", "-help", "--help":
		return c.help(rest)
	case demoOwnerCommand:
		return demoOwner(rest, c.stdout)
	}
	if strings.HasPrefix(name, "-") {
		return &usageError{msg: fmt.Sprintf("unknown flag %s (flags come after the command)", termtext.Clean(name))}
	}
	return &usageError{msg: fmt.Sprintf("unknown command %s", termtext.Quote(name))}
}

// report prints err as one line and returns the exit code.
func (c *cli) report(err error) int {
	var ue *usageError
	var ee *exitError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ue):
		hint := "rightsize help"
		prefix := "rightsize"
		if ue.cmd != "" {
			hint += " " + ue.cmd
			prefix += " " + ue.cmd
		}
		fmt.Fprintf(c.stderr, "%s: %s; run '%s' for usage\n", prefix, termtext.CleanText(ue.msg), hint)
		return exitUsage
	case errors.As(err, &ee):
		if ee.msg != "" {
			fmt.Fprintf(c.stderr, "rightsize: %s\n", oneLine(ee.msg))
		}
		return ee.code
	default:
		fmt.Fprintf(c.stderr, "rightsize: %s\n", oneLine(err.Error()))
		return exitFailure
	}
}

// oneLine makes an error message a single, terminal-safe line.
func oneLine(s string) string {
	s = strings.TrimSpace(s)
	s = strings.ReplaceAll(s, "\r\n", "; ")
	s = strings.ReplaceAll(s, "\n", "; ")
	return termtext.CleanText(s)
}

// newFlags returns a flag set for a subcommand whose errors come back as
// values (never printed by the flag package).
func newFlags(cmd string) *flag.FlagSet {
	fs := flag.NewFlagSet("rightsize "+cmd, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// parse parses a subcommand's flags; -h and --help print its help and
// stop it with exit code 0. positional is how many arguments it takes.
func (c *cli) parse(cmd string, fs *flag.FlagSet, args []string, positional int) (stop bool, err error) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			c.commandHelp(c.stdout, cmd)
			return true, nil
		}
		return true, &usageError{cmd: cmd, msg: err.Error()}
	}
	if fs.NArg() > positional {
		return true, &usageError{cmd: cmd, msg: fmt.Sprintf("unexpected argument %s", termtext.Quote(fs.Arg(positional)))}
	}
	return false, nil
}

func (c *cli) version(args []string) error {
	fs := newFlags("version")
	if stop, err := c.parse("version", fs, args, 0); stop {
		return err
	}
	fmt.Fprintf(c.stdout, "rightsize %s %s %s/%s\n", moduleVersion(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return nil
}

// moduleVersion is the version `go install …@version` recorded in the
// binary, with the VCS revision when it was built from a checkout.
func moduleVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok || bi.Main.Version == "" {
		return "(devel)"
	}
	v := bi.Main.Version
	if v == "(devel)" {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				v += " " + s.Value[:12]
			}
		}
	}
	return v
}
