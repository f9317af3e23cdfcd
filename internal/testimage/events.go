package testimage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/types/events"
	"github.com/moby/moby/client"
)

// ContainerEvents returns what the engine reported about container id
// between since and until (kill, die, destroy, …), in order; it fails the
// test when they cannot be read. Tests use it to learn which signals a
// stop sent and when.
//
// Podman 4.3 answers a query bounded by until with no events at all, and
// names a death's exit code containerExitCode on every event of the
// container (Docker: exitCode, on die only). When the bounded query gives
// nothing, the events are read again from since alone, keeping those up to
// until, for as long as the engine keeps sending what it has stored.
func ContainerEvents(tb testing.TB, cli *client.Client, id string, since, until time.Time) []events.Message {
	tb.Helper()
	out, err := containerEvents(cli, id, since, until, true)
	if err == nil && len(out) == 0 {
		out, err = containerEvents(cli, id, since, until, false)
	}
	if err != nil {
		tb.Fatalf("events of %s: %v", id, err)
	}
	return out
}

// replayQuiet is how long a read without until waits for the next stored
// event before it takes the replay to be over.
const replayQuiet = 500 * time.Millisecond

func containerEvents(cli *client.Client, id string, since, until time.Time, bounded bool) ([]events.Message, error) {
	ts := func(t time.Time) string { return fmt.Sprintf("%d.%09d", t.Unix(), t.Nanosecond()) }
	opts := client.EventsListOptions{Since: ts(since), Filters: client.Filters{}.Add("container", id)}
	if bounded {
		opts.Until = ts(until)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res := cli.Events(ctx, opts)
	var out []events.Message
	// Bounded, the engine ends the stream; otherwise a pause in the
	// replay ends the read.
	var quiet <-chan time.Time
	var timer *time.Timer
	if !bounded {
		timer = time.NewTimer(replayQuiet)
		defer timer.Stop()
		quiet = timer.C
	}
	for {
		select {
		case m := <-res.Messages:
			if !bounded && m.TimeNano > until.UnixNano() {
				return out, nil
			}
			out = append(out, m)
			if timer != nil {
				timer.Reset(replayQuiet)
			}
		case err := <-res.Err:
			if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, context.Canceled) {
				return out, err
			}
			return out, nil
		case <-quiet:
			return out, nil
		}
	}
}

// ExitCode is the exit code an event of a container's death carries, as
// either engine spells it; "" when it carries none.
func ExitCode(m events.Message) string {
	if c, ok := m.Actor.Attributes["exitCode"]; ok {
		return c
	}
	return m.Actor.Attributes["containerExitCode"]
}

// Processes lists the live processes of container id as [pid, command
// line] pairs; zombies are left out. Docker runs ps on the host and
// answers one column a field; Podman runs the container's own ps
// (busybox's, in the test images) and answers each line whole: both are
// read here. Under Podman an exec's orphans are reparented to the
// container's PID 1, which in the test images never reaps them: they stay
// zombies, and are no longer running.
func Processes(ctx context.Context, cli *client.Client, id string) ([][2]string, error) {
	res, err := cli.ContainerTop(ctx, id, client.ContainerTopOptions{Arguments: []string{"-o", "pid,stat,args"}})
	if err != nil {
		return nil, fmt.Errorf("top of %s: %w", id, err)
	}
	var out [][2]string
	for _, p := range res.Processes {
		line := strings.TrimSpace(strings.Join(p, " "))
		pid, rest, _ := strings.Cut(line, " ")
		stat, args, _ := strings.Cut(strings.TrimSpace(rest), " ")
		args = strings.TrimSpace(args)
		// Busybox's ps (Podman runs the image's own) shows a process
		// whose name is not its argv[0], such as an applet a shell runs
		// without exec, as "{name} argv": the args are what follows.
		if strings.HasPrefix(args, "{") {
			if _, after, ok := strings.Cut(args, "} "); ok {
				args = after
			}
		}
		if pid == "" || strings.HasPrefix(stat, "Z") || args == "ps -o pid,stat,args" {
			continue
		}
		out = append(out, [2]string{pid, args})
	}
	return out, nil
}
