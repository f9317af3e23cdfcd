package reaper

import (
	"context"
	"io"
	"os"
	"slices"
	"time"

	"github.com/rightsize/rightsize-go/internal/backend"
	"github.com/rightsize/rightsize-go/internal/ledger"
)

// ReleaseWatchdog closes w's end of its stdin, as this process's exit
// would: the watchdog reaps its run and exits. Tests and benchmarks spawn
// many watchdogs and must end each; real use never does (the lease lives
// as long as the process).
func ReleaseWatchdog(w *Watchdog) error {
	leasesMu.Lock()
	defer leasesMu.Unlock()
	leases = slices.DeleteFunc(leases, func(f *os.File) bool { return f == w.lease })
	return w.lease.Close()
}

// WithOwnRun names this process's own run, which a sweep never touches.
func WithOwnRun(id string) Option { return optionFunc(func(c *config) { c.own = id }) }

// WithLiveness judges owners with f instead of ledger.Judge.
func WithLiveness(f func(ledger.Record) ledger.Liveness) Option {
	return optionFunc(func(c *config) { c.liveness = f })
}

// WithNow makes the sweep's clock say now.
func WithNow(now time.Time) Option {
	return optionFunc(func(c *config) { c.now = func() time.Time { return now } })
}

// Exited is closed when the watchdog process ends.
func (w *Watchdog) Exited() <-chan struct{} { return w.exited }

// ChoosesNative is choosesNative, for its table test.
var ChoosesNative = choosesNative

// RunScriptWatchdog is the work the script watchdog hands its told lines
// to at the owner's death, in this process.
func RunScriptWatchdog(in io.Reader, runsDir, runID, backendName, endpoint string) int {
	return runNative(in, runsDir, runID, backendName, endpoint, engineOnly)
}

// TellFates returns the lines that tell the fates of cache no process has
// told yet (FateLines), and marks them told, as a caller whose lines are
// surely seen does.
func TellFates(cache, own string) []string {
	return FateLines(MarkTold(UntoldFates(cache, own)))
}

// Reap is the sweep's reaping of one run that Sweep judged dead, as rf
// shows it: rf may have been read before the run's files changed, as a
// sweep's listing of the folder is.
func Reap(ctx context.Context, b backend.Backend, cache string, rf ledger.RunFiles) RunReport {
	c := config{cache: cache, now: time.Now, liveness: ledger.Judge}
	return c.reap(ctx, b, rf, RunReport{ID: rf.ID, Decision: Reaped})
}

// WriteShareFate writes f as a watchdog does its share of its run's
// reaping: joined to the fate the run's other watchdog wrote of the same
// death.
func WriteShareFate(cache string, f ledger.Fate, now time.Time) (string, error) {
	return ledger.JoinFate(cache, f, now, joinShare(f))
}

// SetBeforeKeepAliveLock makes f run between the judgement that a
// keep-alive expired and the taking of its use lock (nil: nothing).
func SetBeforeKeepAliveLock(f func(name string)) { hookBeforeLock = f }
