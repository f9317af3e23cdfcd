package sandboxtest

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rightsize/rightsize-go/internal/backend"
	"github.com/rightsize/rightsize-go/internal/proctree"
	"github.com/rightsize/rightsize-go/internal/termtext"
)

// LeakCheck makes Main fail the package when its tests leave anything of
// this run behind: once the tests and the suite's own cleanups have run,
// every sandbox and network on the engine carrying the run's label, and
// every local process of the run still alive, is listed on stderr and the
// exit code becomes 1. Main then removes them as always. A container on its
// way out (stopped with auto-remove, or being removed) is waited for, up to
// leavingWait, and listed only if it is still there. In the manner of
// goleak's VerifyTestMain:
//
//	func TestMain(m *testing.M) {
//		sandboxtest.Main(m, sandboxtest.GuardAll(), sandboxtest.LeakCheck())
//	}
//
// It is most useful with GuardAll, where the tests' own code (plain
// testcontainers-go, a Docker client) must stop what it starts; a Start
// guard is stopped by its test's Cleanup, and a Suite's sandboxes are
// Main's to stop, so neither is a leak. It needs a backend that lists a
// run's sandboxes by label (docker); with another, it checks processes
// alone and says so.
func LeakCheck() Option {
	return mainOption(func(c *mainConfig) { c.leakCheck = true })
}

// maxLeaksListed bounds the list, by kind; the rest are counted.
const maxLeaksListed = 20

// leavingWait bounds how long the check waits for sandboxes on their way
// out (stopped with auto-remove, being removed) to be gone: the engine's
// removal of a `--rm` container the test just stopped is still under way
// when the tests end. One still there after it is listed.
var leavingWait = 10 * time.Second

// findSettled is f.FindRun, once what is on its way out has gone, or
// leavingWait has passed.
func findSettled(ctx context.Context, f backend.RunFinder, k backend.Kind, run string) ([]backend.Found, error) {
	deadline := time.Now().Add(leavingWait)
	for {
		found, err := f.FindRun(ctx, k, run)
		if err != nil || !slices.ContainsFunc(found, func(x backend.Found) bool { return x.Leaving }) || time.Now().After(deadline) {
			return found, err
		}
		select {
		case <-ctx.Done():
			return found, nil
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// leaks lists what the run still has, one line each for stderr; none when
// there is no run or nothing is left.
func leaks(ctx context.Context) []string {
	s := openedSession()
	if s == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, stopTimeout)
	defer cancel()
	var out []string
	if f, ok := s.Driver().(backend.RunFinder); ok {
		for _, k := range []backend.Kind{sandboxKind, networkKind} {
			found, err := findSettled(ctx, f, k, s.RunID())
			if err != nil {
				out = append(out, fmt.Sprintf("the %s of run %s cannot be listed: %s", k.Plural(), s.RunID(), oneLine(err.Error())))
				continue
			}
			for i, x := range found {
				if i == maxLeaksListed {
					out = append(out, fmt.Sprintf("and %d more %s", len(found)-i, k.Plural()))
					break
				}
				line := fmt.Sprintf("%s %s (%s)", k, termtext.Clean(x.Name), termtext.Clean(shortEngineID(x.ID)))
				og := x.Origin
				if og.IsZero() {
					og = s.Origin(k, x.Name)
				}
				if og := og.String(); og != "" {
					line += ", left by " + termtext.Clean(og)
				}
				if x.Leaving {
					line += fmt.Sprintf(": stopped, and the engine's own removal of it did not finish within %s", leavingWait)
				}
				out = append(out, line)
			}
		}
	} else {
		warnf("sandboxtest: leak check: the %s backend cannot list a run's sandboxes; only its local processes are checked", s.Driver().Name())
	}
	pids := proctree.Live(proctree.OfRun(s.RunID()))
	for i, pid := range pids {
		if i == maxLeaksListed {
			out = append(out, fmt.Sprintf("and %d more processes", len(pids)-i))
			break
		}
		out = append(out, "process "+strconv.Itoa(pid))
	}
	return out
}

// reportLeaks prints what leaks found; false when it found anything.
func reportLeaks(ctx context.Context) bool {
	l := leaks(ctx)
	if len(l) == 0 {
		return true
	}
	fmt.Fprintf(stderr(), "sandboxtest: leak check: the tests left these of run %s without stopping them (Main removes them now):\n    %s\n",
		runIDOf(), strings.Join(l, "\n    "))
	return false
}

func runIDOf() string {
	if s := openedSession(); s != nil {
		return s.RunID()
	}
	return ""
}

func shortEngineID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
