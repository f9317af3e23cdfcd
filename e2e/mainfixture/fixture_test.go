package mainfixture_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/testcontainers/testcontainers-go"

	"github.com/rightsize/rightsize-go/internal/probe"
	"github.com/rightsize/rightsize-go/internal/proctree"
	"github.com/rightsize/rightsize-go/sandboxtest"
)

const (
	envMode  = "RZ_MAIN_FIXTURE"
	envImage = "RZ_FIXTURE_IMAGE"
	envTag   = "RZ_FIXTURE_TAG"
)

// tagLabel marks what the early provider creates, for the test's cleanup.
const tagLabel = "dev.rightsize.test.mainfixture"

// early is what users write at package level: testcontainers-go reaches
// the engine here, before TestMain, and keeps the engine it found.
var early = func() *testcontainers.DockerProvider {
	if os.Getenv(envMode) != "early" {
		return nil
	}
	p, err := testcontainers.NewDockerProvider()
	if err != nil {
		panic(err)
	}
	return p
}()

func TestMain(m *testing.M) {
	switch os.Getenv(envMode) {
	case "":
		os.Exit(m.Run())
	case "early", "lookfails":
		sandboxtest.Main(m, sandboxtest.GuardAll())
	default:
		sandboxtest.Main(m)
	}
}

func TestFixture(t *testing.T) {
	switch os.Getenv(envMode) {
	case "":
		t.Skip(envMode + " is not set: this fixture is run by e2e")
	case "daemon":
		sess, err := probe.Session(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		fmt.Printf("fixture: run=%s\n", sess.RunID())
		// The command starts a child in a session of its own and ends:
		// the child is no longer the command's to end.
		p := sandboxtest.StartProcess(t, exec.Command("sh", "-c", "setsid sleep 1002 </dev/null >/dev/null 2>&1 & echo started"))
		if err := p.WaitForLog(t.Context(), "started"); err != nil {
			t.Fatal(err)
		}
		// Until setsid has run, the child is still in the command's
		// group, which the test's end ends: wait until it leads a
		// session of its own.
		deadline := time.Now().Add(time.Minute)
		for !daemonUp(sess.RunID()) {
			if time.Now().After(deadline) {
				t.Fatal("the command's child never left its session")
			}
			time.Sleep(10 * time.Millisecond)
		}
	case "tell":
	case "lookfails":
		// Made as users make them, in the test: through the guard, if
		// testcontainers-go took it.
		c, err := testcontainers.GenericContainer(t.Context(), testcontainers.GenericContainerRequest{
			ContainerRequest: testcontainers.ContainerRequest{
				Image:  os.Getenv(envImage),
				Cmd:    []string{"sleep", "300"},
				Labels: map[string]string{tagLabel: os.Getenv(envTag)},
			},
			Started: true,
		})
		if err != nil {
			t.Fatal(err)
		}
		fmt.Printf("fixture: container=%s\n", c.GetContainerID())
		if err := c.Terminate(context.Background()); err != nil {
			t.Error(err)
		}
	case "early":
		ctx := context.Background()
		c, err := early.CreateContainer(ctx, testcontainers.ContainerRequest{
			Image:  os.Getenv(envImage),
			Cmd:    []string{"sleep", "300"},
			Labels: map[string]string{tagLabel: os.Getenv(envTag)},
		})
		if err != nil {
			t.Fatal(err)
		}
		fmt.Printf("fixture: container=%s\n", c.GetContainerID())
		if err := c.Terminate(ctx); err != nil {
			t.Error(err)
		}
	}
}

// daemonUp reports whether a process of run leads a session of its own.
func daemonUp(run string) bool {
	for _, pid := range proctree.Live(proctree.OfRun(run)) {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp session …
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		if len(f) > 3 && f[3] == strconv.Itoa(pid) {
			return true
		}
	}
	return false
}
