// Package reaper is what a program other than a test calls to remove what
// dead runs left: [Sweep], from code, as `rightsize sweep` does from a
// shell, and its [Report], which says what it decided for each run and
// why.
//
// A test needs neither: sandboxtest sweeps at its first backend use, and
// its watchdog removes what the test leaves when it dies, however it dies.
// A program that is not a test and starts sandboxes through package
// sandboxtest gets the same watchdog: sandboxtest makes any program that
// imports it able to serve as its own watchdog, from its init. The sweep
// never removes anything of a run whose owner is, or may be, alive
// (package ledger says how that is judged), and never removes a name the
// engine does not show as the run's.
package reaper

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/rightsize/rightsize-go/internal/backend"
	_ "github.com/rightsize/rightsize-go/internal/backend/docker" // links the docker backend
	_ "github.com/rightsize/rightsize-go/internal/backend/memory" // links the memory backend
	_ "github.com/rightsize/rightsize-go/internal/backend/msb"    // links the msb backend
	"github.com/rightsize/rightsize-go/internal/reaper"
)

// Sweep reaps every dead run of the cache folder (RIGHTSIZE_CACHE_DIR, or
// the user's cache folder) that was recorded on the backend this process
// resolves: RIGHTSIZE_BACKEND (docker by default, at DOCKER_HOST; msb;
// memory, files of this host that need no engine), opened
// within 15 s. Each reapable run has what it lists, and what carries its
// label, removed, then its files deleted; a run left alone is left
// untouched, with the reason in the report. Keep-alive sandboxes idle
// past their time-to-live (RIGHTSIZE_REUSE_TTL, sandboxtest's
// Spec.ReuseTTL) are removed too, unless a process uses them
// (Report.KeepAlives). The report is returned even with an error, for
// what was done before it.
func Sweep(ctx context.Context, opts ...Option) (*Report, error) {
	var in []reaper.Option
	for _, o := range opts {
		if o, ok := o.(option); ok {
			in = append(in, o.o)
		}
	}
	drv, err := backend.Resolve(ctx)
	if err != nil {
		return nil, fmt.Errorf("reaper: %w", err)
	}
	defer drv.Close()
	rep, err := reaper.Sweep(ctx, drv, in...)
	return fromInternal(rep), err
}

// An Option changes a [Sweep]. Only this package makes them.
type Option interface{ sweepOption() }

// option carries one of the machinery's options.
type option struct{ o reaper.Option }

func (option) sweepOption() {}

// WithCacheDir sweeps the ledger of cache folder dir.
func WithCacheDir(dir string) Option { return option{reaper.WithCacheDir(dir)} }

// DryRun decides as a sweep decides and touches nothing: the report says
// what would be reaped ([WouldReap]).
func DryRun() Option { return option{reaper.DryRun()} }

// WithLogger logs a line per run decided and a warning per name kept.
func WithLogger(l *slog.Logger) Option { return option{reaper.WithLogger(l)} }

// WithBudget bounds the sweep: what it has not reached by then stays for a
// later one ([Report].Unfinished says so).
func WithBudget(d time.Duration) Option { return option{reaper.WithBudget(d)} }

// OnlyRun sweeps run id alone, as a person who knows it is dead: a run
// whose owner cannot be judged is reaped too, never one judged alive.
func OnlyRun(id string) Option { return option{reaper.OnlyRun(id)} }
