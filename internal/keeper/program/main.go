// Command keeper is rightsize's engine-side lease keeper. One runs per
// run, as a container on the engine the run uses, with that engine's
// socket mounted into it. Its lease is its stdin, which a process of the
// run's machine holds through the engine's attach API, writing a byte
// every second or so. When stdin ends (the holder's connection closed:
// the holder exited, or its machine went) or no byte comes for the lease
// timeout (the holder froze, or its machine vanished without a FIN or an
// RST), it removes, through the socket, every container and then every
// network carrying the run's label, and exits; the engine's AutoRemove
// removes the keeper.
//
// Package internal/keeper builds it from this folder's files alone, as a
// module of its own, static, into an image FROM scratch: it imports the
// standard library only, and must never import anything else.
//
// What it says on stdout, one line each, is for its starter and holder:
//
//	ready run=<id> lease=<timeout>  it reached its own engine through the socket
//	error: <why>                    it could not; it then removes nothing
//	held                            a holder said hello (H) on stdin
//
// What it does goes to stderr (the engine's log of it).
//
// Environment: RIGHTSIZE_KEEPER_RUN (the run id), RIGHTSIZE_LEASE_TIMEOUT
// and RIGHTSIZE_KEEPER_SETTLE (Go durations), RIGHTSIZE_KEEPER_NONCE (how
// it recognises itself on the engine), RIGHTSIZE_KEEPER_SOCKET (the
// socket's path inside the container; /var/run/docker.sock by default).
//
// SIGTERM or SIGINT (`docker stop`, the engine shutting down) ends it at
// once and removes nothing: a stopped keeper is no evidence that its run
// is dead.
//
// Exit status: 0 when the run's containers and networks are gone, or on
// SIGTERM; 1 when some were left; 2 for a bad environment; 3 when the
// engine could not be reached through the socket.
package main

import (
	"bytes"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"syscall"
	"time"
)

// The environment the keeper is started with.
const (
	envRun     = "RIGHTSIZE_KEEPER_RUN"
	envTimeout = "RIGHTSIZE_LEASE_TIMEOUT"
	envSettle  = "RIGHTSIZE_KEEPER_SETTLE"
	envNonce   = "RIGHTSIZE_KEEPER_NONCE"
	envSocket  = "RIGHTSIZE_KEEPER_SOCKET"

	defaultSocket = "/var/run/docker.sock"
	defaultSettle = 2 * time.Second
)

// Exit statuses.
const (
	exitClean    = 0
	exitLeft     = 1
	exitConfig   = 2
	exitNoEngine = 3
)

func main() {
	// It waits, nearly all of its life: one thread, a small heap.
	runtime.GOMAXPROCS(1)
	debug.SetGCPercent(20)
	log.SetFlags(log.Ldate | log.Ltime | log.Lmicroseconds | log.LUTC)
	log.SetOutput(os.Stderr)
	log.SetPrefix("rightsize keeper: ")

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	os.Exit(run(os.Stdin, os.Stdout, stop))
}

// config is what the environment says.
type config struct {
	run     string
	timeout time.Duration
	settle  time.Duration
	nonce   string
	socket  string
}

func readConfig(getenv func(string) string) (config, error) {
	c := config{run: getenv(envRun), nonce: getenv(envNonce), socket: getenv(envSocket), settle: defaultSettle}
	if c.run == "" {
		return c, fmt.Errorf("%s is empty", envRun)
	}
	if c.nonce == "" {
		return c, fmt.Errorf("%s is empty", envNonce)
	}
	if c.socket == "" {
		c.socket = defaultSocket
	}
	var err error
	if c.timeout, err = time.ParseDuration(getenv(envTimeout)); err != nil || c.timeout <= 0 {
		return c, fmt.Errorf("%s=%q is not a positive duration", envTimeout, getenv(envTimeout))
	}
	if v := getenv(envSettle); v != "" {
		if c.settle, err = time.ParseDuration(v); err != nil || c.settle < 0 {
			return c, fmt.Errorf("%s=%q is not a duration", envSettle, v)
		}
	}
	return c, nil
}

func run(in io.Reader, out io.Writer, stop <-chan os.Signal) int {
	c, err := readConfig(os.Getenv)
	if err != nil {
		fmt.Fprintf(out, "error: %v\n", err)
		log.Print(err)
		return exitConfig
	}
	eng := &engine{socket: c.socket, timeout: callTimeout}
	parallel, err := eng.check(c.run, c.nonce)
	if err != nil {
		// Nothing can be removed through this socket: say why to the
		// starter, then wait for it to remove this keeper, or for the
		// lease to end, whichever comes first.
		fmt.Fprintf(out, "error: %v\n", err)
		log.Printf("run %s: %v", c.run, err)
		lease(in, out, c.timeout, stop)
		return exitNoEngine
	}
	fmt.Fprintf(out, "ready run=%s lease=%s\n", c.run, c.timeout)
	log.Printf("run %s: ready; lease timeout %s, engine at %s", c.run, c.timeout, c.socket)
	// What start-up allocated goes back to the system for the wait.
	debug.FreeOSMemory()

	why, reap := lease(in, out, c.timeout, stop)
	if !reap {
		log.Printf("run %s: %s: ending without removing anything", c.run, why)
		return exitClean
	}
	log.Printf("run %s: %s: removing what carries its label", c.run, why)
	r := &reaper{eng: eng, run: c.run, parallel: parallel, settle: c.settle, budget: reapBudget}
	if !r.reap() {
		return exitLeft
	}
	return exitClean
}

// The bytes of the lease: a holder says hello once it is attached, and the
// keeper answers "held"; then any byte is a heartbeat.
const hello = 'H'

// lease waits for the lease to end and says why: stdin ended, or no byte
// came for timeout (from the start too: a keeper nobody ever holds ends
// as one whose holder died), or a signal came, which must not remove
// anything (reap false). It answers each hello with "held".
func lease(in io.Reader, out io.Writer, timeout time.Duration, stop <-chan os.Signal) (why string, reap bool) {
	type chunk struct {
		hellos int
		err    error
	}
	chunks := make(chan chunk)
	go func() {
		buf := make([]byte, 512)
		for {
			n, err := in.Read(buf)
			if n > 0 {
				chunks <- chunk{hellos: bytes.Count(buf[:n], []byte{hello})}
			}
			if err != nil {
				chunks <- chunk{err: err}
				return
			}
		}
	}()
	timer := time.NewTimer(timeout)
	held := false
	for {
		select {
		case c := <-chunks:
			if c.err == io.EOF {
				return "the lease's stdin ended", true
			}
			if c.err != nil {
				return fmt.Sprintf("reading the lease: %v", c.err), true
			}
			held = true
			for range c.hellos {
				fmt.Fprintln(out, "held")
			}
			timer.Reset(timeout)
		case <-timer.C:
			if !held {
				return fmt.Sprintf("nobody held the lease within %s", timeout), true
			}
			return fmt.Sprintf("no heartbeat for %s", timeout), true
		case s := <-stop:
			return "signal " + s.String(), false
		}
	}
}
