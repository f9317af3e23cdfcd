package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/rightsize/rightsize-go/internal/names"
	"github.com/rightsize/rightsize-go/internal/probe"
	"github.com/rightsize/rightsize-go/sandboxtest"
)

const (
	// demoLabel marks the containers a demo's test processes start, with
	// the demo's id. Their networks carry only their run's labels: the
	// demo finds those through the run ids its test processes announce.
	demoLabel = "dev.rightsize.demo"
	// demoContainers is how many containers a test process starts.
	demoContainers = 2
	// demoStopGrace is how long a test process that ends normally waits
	// after SIGTERM: busybox sleep as PID 1 ignores it, so waiting longer
	// would only delay the removal.
	demoStopGrace = time.Millisecond
)

// demoOwner is the test process of `rightsize demo` (the hidden command
// __demo-owner): a program on sandboxtest.Main, as any user's would be.
// Main sweeps and opens this process's run; setup starts a network and two
// guarded containers on it (the watchdog before the first creation, unless
// RIGHTSIZE_REAPER says otherwise); the body waits to be killed. The demo
// shows the product, not a copy of it.
//
// Protocol, one line each on stdout: "run ID" (before anything is
// created), "watchdog PID" (when there is one), "ready". Errors go to
// stderr (sandboxtest's one line), exit 1. Ctrl-C is ignored: the demo
// decides when this process dies. When its stdin reaches end of file (the
// demo is gone, killed itself) the body returns, and Main removes what was
// started, as at the end of a test binary, and exits.
func demoOwner(args []string, stdout io.Writer) error {
	// Ctrl-C is the demo's to handle. A write to the demo's pipe once the
	// demo is gone must fail, not kill this process (Go's default for a
	// broken stdout): it has sandboxes to remove first.
	signal.Ignore(os.Interrupt, syscall.SIGPIPE)
	fs := newFlags(demoOwnerCommand)
	ref := fs.String("image", "", "")
	demoID := fs.String("demo", "", "")
	if err := fs.Parse(args); err != nil || *ref == "" || !validDemoID(*demoID) || fs.NArg() > 0 {
		return &usageError{msg: demoOwnerCommand + " is internal to `rightsize demo` (it wants --image REF --demo ID)"}
	}
	demoGone := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(demoGone)
	}()
	setup := func(s *sandboxtest.Suite) {
		sess, err := probe.Session(context.Background())
		if err != nil {
			s.Fatalf("%v", err)
		}
		fmt.Fprintln(stdout, "run", sess.RunID())
		net := s.NewNetwork()
		if wd := sess.Watchdog(); wd != nil {
			fmt.Fprintln(stdout, "watchdog", wd.PID)
		}
		for i := range demoContainers {
			select {
			case <-demoGone:
				return // no one to show them to: stop starting things
			default:
			}
			s.Start(sandboxtest.Spec{
				Image:     *ref,
				Cmd:       []string{"sleep", "3600"},
				Labels:    map[string]string{demoLabel: *demoID},
				Networks:  []*sandboxtest.Network{net},
				Aliases:   []string{"sandbox-" + strconv.Itoa(i+1)},
				StopGrace: demoStopGrace,
			})
		}
	}
	// Main exits with the body's code, or 1 after saying why on stderr.
	sandboxtest.Main(body(func() int {
		fmt.Fprintln(stdout, "ready")
		<-demoGone
		return 0
	}), sandboxtest.Setup(setup))
	return nil
}

// body is a program's body as sandboxtest.Main runs it.
type body func() int

func (b body) Run() int { return b() }

// validDemoID: the demo's id is 8 lowercase hex digits (demo.go makes it),
// in a label value and in the name of its cache dir.
func validDemoID(s string) bool {
	return len(s) == 8 && names.LowerHex(s)
}
