// Package leakfixture_test is a test binary that e2e's leak check row
// builds and runs: Main with GuardAll and LeakCheck over plain
// testcontainers-go code that stops, or forgets to stop, what it starts.
package leakfixture_test

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/network"

	"github.com/rightsize/rightsize-go/internal/probe"
	"github.com/rightsize/rightsize-go/sandboxtest"
)

// envLeak: "leak" leaves a container and a network running; "clean"
// terminates them; "autoremove" stops an auto-remove container as its
// last step (the engine removes it after); unset, the tests skip and Main
// is not used.
const (
	envLeak  = "RZ_LEAK_FIXTURE"
	envImage = "RZ_FIXTURE_IMAGE"
)

func TestMain(m *testing.M) {
	if os.Getenv(envLeak) == "" {
		os.Exit(m.Run())
	}
	sandboxtest.Main(m, sandboxtest.GuardAll(), sandboxtest.LeakCheck())
}

// TestPlainTestcontainers is what a suite without rightsize in its tests
// looks like: testcontainers-go alone.
func TestPlainTestcontainers(t *testing.T) {
	mode := os.Getenv(envLeak)
	if mode == "" {
		t.Skip("run by e2e's leak check row")
	}
	sess, err := probe.Session(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("fixture: run=%s\n", sess.RunID())
	if mode == "autoremove" {
		ctr, err := testcontainers.Run(t.Context(), os.Getenv(envImage),
			testcontainers.WithCmd("sleep", "300"),
			testcontainers.WithHostConfigModifier(func(hc *container.HostConfig) { hc.AutoRemove = true }),
		)
		if err != nil {
			t.Fatal(err)
		}
		stop := time.Duration(0)
		if err := ctr.Stop(t.Context(), &stop); err != nil {
			t.Fatal(err)
		}
		return // the engine's removal of it is under way
	}
	nw, err := network.New(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	ctr, err := testcontainers.Run(t.Context(), os.Getenv(envImage),
		testcontainers.WithCmd("sleep", "300"),
		network.WithNetwork(nil, nw),
	)
	if err != nil {
		t.Fatal(err)
	}
	if mode == "leak" {
		return // neither is stopped
	}
	if err := testcontainers.TerminateContainer(ctr, testcontainers.StopTimeout(0)); err != nil {
		t.Error(err)
	}
	if err := nw.Remove(t.Context()); err != nil {
		t.Error(err)
	}
}
