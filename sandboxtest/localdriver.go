package sandboxtest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rightsize/rightsize-go/internal/backend"
	"github.com/rightsize/rightsize-go/internal/reaper"
)

// localDriver is the backend of a run of local processes only, for a
// process in which no engine answers: it creates nothing, and its sweep
// reaps the dead runs of its own kind (their processes).
type localDriver struct{}

var errNoEngine = errors.New("no container engine in this process: only local processes")

func (localDriver) Name() string          { return backend.Local }
func (localDriver) Endpoint() string      { return "" }
func (localDriver) DefaultEndpoint() bool { return true }
func (localDriver) Host() string          { return "" }
func (localDriver) Close() error          { return nil }
func (localDriver) Watchdog(string) (backend.WatchdogPlan, error) {
	return backend.WatchdogPlan{}, errNoEngine
}
func (localDriver) Remove(_ context.Context, _ backend.Kind, _ string, names []string) []error {
	errs := make([]error, len(names))
	for i := range errs {
		errs[i] = errNoEngine
	}
	return errs
}
func (localDriver) Create(context.Context, string, backend.Spec) (backend.Sandbox, error) {
	return nil, errNoEngine
}
func (localDriver) Adopt(context.Context, string) (backend.Sandbox, error) { return nil, errNoEngine }
func (localDriver) CreateNetwork(context.Context, string, string) (string, error) {
	return "", errNoEngine
}

var (
	localMu   sync.Mutex
	localSess *reaper.Session
	localErr  error
)

// processSession is the session local processes are started in: the
// process's session, or, when no engine answers, one of local processes
// only (its run is recorded as the local backend's).
func processSession(ctx context.Context) (*reaper.Session, error) {
	s, err := getSession(ctx)
	if err == nil || !errors.Is(err, backend.ErrUnreachable) || backend.Requested() != "" {
		return s, err
	}
	localMu.Lock()
	defer localMu.Unlock()
	if localSess != nil || localErr != nil {
		return localSess, localErr
	}
	octx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	localSess, localErr = reaper.Open(octx, localDriver{})
	if localErr != nil {
		localErr = fmt.Errorf("local processes: %w", localErr)
	} else {
		tellSweep(localSess)
	}
	return localSess, localErr
}
