package proctest

import (
	"time"
)

// TB is the part of testing.TB a Helper uses.
type TB interface {
	Helper()
	Cleanup(func())
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
}

// Helper is a Proc bound to a test: where a Proc returns an error, its
// methods fail the test. Call them from the test's goroutine.
type Helper struct {
	*Proc
	tb TB
	// Within bounds each wait of Expect, Finish and KillAndWait; a minute
	// unless changed.
	Within time.Duration
}

// StartHelper starts s for the test tb: a process that cannot start fails
// the test, and one still running when the test ends is killed then (with
// Setpgid, its whole process group).
func StartHelper(tb TB, s Spec) *Helper {
	tb.Helper()
	p, err := Start(s)
	if err != nil {
		tb.Fatalf("%v", err)
		return nil
	}
	tb.Cleanup(func() {
		if err := p.EnsureDead(); err != nil {
			tb.Errorf("%v", err)
		}
	})
	return &Helper{Proc: p, tb: tb, Within: time.Minute}
}

// Expect waits for the process to say key and returns the value; it fails
// the test, with what the process printed, when the process ends first or
// Within passes.
func (h *Helper) Expect(key string) string {
	h.tb.Helper()
	v, err := h.Get(key, h.Within)
	if err != nil {
		h.tb.Fatalf("%v", err)
	}
	return v
}

// Tell writes line to the process's stdin, or fails the test.
func (h *Helper) Tell(line string) {
	h.tb.Helper()
	if err := h.Send(line); err != nil {
		h.tb.Fatalf("%v", err)
	}
}

// Finish closes the process's stdin, waits for it to end, and checks that
// it ended with exit 0.
func (h *Helper) Finish() {
	h.tb.Helper()
	_ = h.CloseStdin()
	if !h.Wait(h.Within) {
		h.tb.Fatalf("%s did not end within %s of its stdin closing", h.Name, h.Within)
	}
	if _, err := h.Exited(); err != nil {
		h.tb.Errorf("%s: %v\n%s", h.Name, err, h.Output())
	}
}

// KillAndWait SIGKILLs the process and waits until it has ended.
func (h *Helper) KillAndWait() {
	h.tb.Helper()
	if err := h.Kill(); err != nil {
		h.tb.Fatalf("kill %s: %v", h.Name, err)
	}
	if !h.Wait(h.Within) {
		h.tb.Fatalf("%s did not end within %s of SIGKILL (%s)", h.Name, h.Within, h.Status())
	}
}
