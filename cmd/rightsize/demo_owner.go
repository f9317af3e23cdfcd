package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/rightsize/rightsize-go/backend"
	"github.com/rightsize/rightsize-go/backend/docker"
	"github.com/rightsize/rightsize-go/ledger"
	"github.com/rightsize/rightsize-go/reaper"
)

// demoLabel marks everything a demo's test processes create, with the
// demo's id: what the demo removes when it is interrupted, and what its
// tests look for afterwards.
const demoLabel = "dev.rightsize.demo"

// demoOwner is the test process of `rightsize demo` (the hidden command
// __demo-owner): it starts two guarded containers and a network the way
// package sandboxtest does for a test — the sweep, this process's run, a
// ledger line before each creation, the watchdog before the first one
// (unless RIGHTSIZE_REAPER says otherwise) — then says so on stdout and
// waits to be killed.
//
// It is built from the packages sandboxtest is built on (ledger, reaper,
// backend/docker) rather than from sandboxtest itself, whose guards belong
// to a testing.TB: the order of the steps is the contract's, and this is
// the whole of it.
//
// Protocol, one line each on stdout: "run ID", "watchdog PID" (when there
// is one), "ready". Errors go to stderr, exit 1. Ctrl-C is ignored: the
// demo decides when this process dies. When its stdin reaches end of file
// (the demo is gone, killed itself) it removes what it started and exits.
func demoOwner(args []string, stdout, stderr io.Writer) error {
	// Ctrl-C is the demo's to handle. A write to the demo's pipe once the
	// demo is gone must fail, not kill this process (Go's default for a
	// broken stdout): it has sandboxes to remove first.
	signal.Ignore(os.Interrupt, syscall.SIGPIPE)
	fs := newFlags(demoOwnerCommand)
	ref := fs.String("image", "", "")
	demoID := fs.String("demo", "", "")
	count := fs.Int("containers", 2, "")
	if err := fs.Parse(args); err != nil || *ref == "" || !ledger.ValidName(*demoID) || *count < 0 {
		return &usageError{msg: demoOwnerCommand + " is internal to `rightsize demo` (it wants --image REF --demo ID)"}
	}
	// Stdin reaches end of file when the demo is gone without killing this
	// process: stop starting things, remove what was started, as a test
	// that ends normally would.
	demoGone := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(demoGone)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	go func() {
		select {
		case <-demoGone:
			cancel()
		case <-ctx.Done():
		}
	}()
	o, err := startOwner(ctx, stdout, *ref, *demoID, *count)
	if err != nil {
		if o != nil {
			// A creation cut short may still complete in the engine.
			err = errors.Join(err, o.close(ctx.Err() != nil))
		}
		return err
	}
	fmt.Fprintln(stdout, "ready")
	<-demoGone
	return o.close(false)
}

type owner struct {
	drv *docker.Driver
	run *ledger.Run
}

func startOwner(ctx context.Context, stdout io.Writer, ref, demoID string, count int) (*owner, error) {
	mode := reaper.ModeFromEnv()
	if !mode.Ledger() {
		return nil, errors.New("RIGHTSIZE_REAPER=off: the demo needs the ledger")
	}
	cache, err := ledger.Dir()
	if err != nil {
		return nil, err
	}
	drv, err := docker.Open(ctx)
	if err != nil {
		return nil, err
	}
	// First use of the backend: sweep what dead runs left, before this
	// process's own record exists.
	if _, err := reaper.Sweep(ctx, drv, reaper.WithCacheDir(cache)); err != nil {
		drv.Close()
		return nil, fmt.Errorf("sweep: %w", err)
	}
	run, err := ledger.NewRun(cache, ledger.Owner{Backend: drv.Name(), Endpoint: drv.Endpoint()})
	if err != nil {
		drv.Close()
		return nil, err
	}
	o := &owner{drv: drv, run: run}
	fmt.Fprintln(stdout, "run", run.ID())
	labels := map[string]string{docker.LabelRunID: run.ID(), docker.LabelRunIDAlt: run.ID(), demoLabel: demoID}

	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		return o, err
	}
	network := "rz-net-" + hex.EncodeToString(b[:])
	if err := run.AddNetwork(network); err != nil {
		return o, err
	}
	if mode.Watchdog() {
		plan, err := drv.WatchdogPlan()
		if err != nil {
			return o, fmt.Errorf("no watchdog: %w", err)
		}
		wd, err := reaper.StartWatchdog(cache, run.RunsDir(), run.ID(), plan)
		if err != nil {
			return o, err
		}
		fmt.Fprintln(stdout, "watchdog", wd.PID)
	}
	if err := drv.CreateNetwork(ctx, network, labels); err != nil {
		return o, fmt.Errorf("create network %s: %w", network, err)
	}
	// Every line is written before any creation, as for a test's guards;
	// the containers are then created at once, as parallel tests would.
	names := make([]string, count)
	for i := range names {
		names[i] = "rz-" + run.ID() + "-" + strconv.Itoa(i+1)
		if err := run.AddSandbox(names[i]); err != nil {
			return o, err
		}
	}
	errs := make([]error, count)
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Go(func() {
			spec := backend.Spec{
				Image:    ref,
				Cmd:      []string{"sleep", "3600"},
				Labels:   labels,
				Networks: map[string][]string{network: {"sandbox-" + strconv.Itoa(i+1)}},
			}
			_, errs[i] = drv.Create(ctx, name, spec)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return o, err
	}
	return o, nil
}

// close removes what the run lists, as a test's cleanup would, and forgets
// each name once it is gone. again: a creation was cut short, and the
// engine may finish it after a first removal; look once more.
func (o *owner) close(again bool) error {
	defer o.drv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sandboxes, networks := o.run.Sandboxes(), o.run.Networks()
	if again {
		o.drv.RemoveSandboxes(ctx, sandboxes)
		time.Sleep(500 * time.Millisecond)
	}
	var errs []error
	for i, err := range o.drv.RemoveSandboxes(ctx, sandboxes) {
		if err == nil || errors.Is(err, backend.ErrNotFound) {
			errs = append(errs, o.run.RemoveSandbox(sandboxes[i]))
		} else {
			errs = append(errs, err)
		}
	}
	for i, err := range o.drv.RemoveNetworks(ctx, networks) {
		if err == nil || errors.Is(err, backend.ErrNotFound) {
			errs = append(errs, o.run.RemoveNetwork(networks[i]))
		} else {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
