package reaper_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/rightsize/rightsize-go/internal/backend"
	"github.com/rightsize/rightsize-go/internal/backend/docker"
	"github.com/rightsize/rightsize-go/internal/reaper"
)

// TestSweepPrintsOnlyWhenAsked: without WithLogger a sweep writes nothing
// to the process's stdout or stderr (file descriptors 1 and 2, whoever
// writes them); with it, one line per run and one warning per name kept.
func TestSweepPrintsOnlyWhenAsked(t *testing.T) {
	dead, err := docker.OpenHost(deadHost)
	must(t, err)
	t.Cleanup(func() { dead.Close() })
	f := &fixture{me: self(t), dead: deadProcess(t)}
	setup := func() string {
		cache := t.TempDir()
		runs := runsDir(t, cache)
		writeRun(t, runs, "0000dd01", recordOf(f.dead, backend.Docker, dead.Endpoint()).Marshal(), []string{"rz-rtkept-1"}, nil)
		writeRun(t, runs, "0000dd02", recordOf(f.me, backend.Docker, dead.Endpoint()).Marshal(), []string{"rz-rtlive-1"}, nil)
		return cache
	}

	cache := setup()
	out := captureFds(t, func() {
		rep, err := reaper.Sweep(context.Background(), dead, reaper.WithCacheDir(cache))
		if err != nil || rep.Count(reaper.Kept) != 1 || rep.Count(reaper.LeftAlone) != 1 {
			t.Errorf("sweep: %v, %+v", err, rep)
		}
	})
	if out != "" {
		t.Errorf("a sweep without a logger printed %q", out)
	}

	var buf bytes.Buffer
	_, err = reaper.Sweep(context.Background(), dead, reaper.WithCacheDir(setup()),
		reaper.WithLogger(slog.New(slog.NewTextHandler(&buf, nil))))
	must(t, err)
	logged := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(logged) != 3 {
		t.Fatalf("logged %d lines, want 3 (a line per run, a warning per name kept):\n%s", len(logged), buf.String())
	}
	// Runs are decided side by side, so either may be logged first; a
	// run's warnings follow its own line.
	wants := [][]string{
		{"level=INFO", "run=0000dd01", `decision=kept`, "kept=1"},
		{"level=WARN", "run=0000dd01", "kind=sandbox", "name=rz-rtkept-1", "engine unreachable"},
		{"level=INFO", "run=0000dd02", `decision="left alone"`, "alive"},
	}
	if strings.Contains(logged[0], "run=0000dd02") {
		wants = [][]string{wants[2], wants[0], wants[1]}
	}
	for i, want := range wants {
		for _, w := range want {
			if !strings.Contains(logged[i], w) {
				t.Errorf("line %d %q does not say %q", i+1, logged[i], w)
			}
		}
	}
}

// captureFds runs fn with file descriptors 1 and 2 pointing to a pipe, and
// returns what was written to them.
func captureFds(t *testing.T, fn func()) string {
	t.Helper()
	r, w, err := os.Pipe()
	must(t, err)
	var saved [3]int
	for _, fd := range []int{1, 2} {
		saved[fd], err = syscall.Dup(fd)
		must(t, err)
		must(t, syscall.Dup3(int(w.Fd()), fd, 0))
	}
	done := make(chan string)
	go func() {
		b, _ := io.ReadAll(r)
		done <- string(b)
	}()
	func() {
		defer func() {
			for _, fd := range []int{1, 2} {
				syscall.Dup3(saved[fd], fd, 0)
				syscall.Close(saved[fd])
			}
			w.Close()
		}()
		fn()
	}()
	return <-done
}
