package testimage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/moby/moby/api/types/events"
	"github.com/moby/moby/client"
)

// ContainerEvents returns what the engine reported about container id
// between since and until (kill, die, destroy, …), in order; it fails the
// test when they cannot be read. Tests use it to learn which signals a
// stop sent and when.
func ContainerEvents(tb testing.TB, cli *client.Client, id string, since, until time.Time) []events.Message {
	tb.Helper()
	ts := func(t time.Time) string { return fmt.Sprintf("%d.%09d", t.Unix(), t.Nanosecond()) }
	res := cli.Events(context.Background(), client.EventsListOptions{
		Since:   ts(since),
		Until:   ts(until),
		Filters: client.Filters{}.Add("container", id),
	})
	var out []events.Message
	for {
		select {
		case m := <-res.Messages:
			out = append(out, m)
		case err := <-res.Err:
			if err != nil && !errors.Is(err, io.EOF) {
				tb.Fatalf("events of %s: %v", id, err)
			}
			return out
		}
	}
}
