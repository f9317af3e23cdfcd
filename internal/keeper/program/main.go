// Command keeper is rightsize's engine-side lease keeper. One runs per
// run, as a container on the engine the run uses, with that engine's
// socket mounted into it. Its lease is held by a process of the run's
// machine, its watchdog, through the engine's exec API: the holder runs
// "keeper hold" in the keeper's container (docker exec -i), whose stdin is
// that exec's own, private to the holder's connection, and writes a byte
// every second or so. The exec says hello to the keeper over an abstract
// unix socket of the container's own network namespace, with the lease's
// secret (whose hash the keeper was started with), and relays the bytes.
// When the holder's connection closes (the holder exited, or its machine
// went: the engine closes the exec's stdin) or no byte comes for the lease
// timeout (the holder froze, or its machine vanished without a FIN or an
// RST), the keeper removes, through the socket, every container and then
// every network carrying the run's label, then itself.
//
// Nothing else ends the lease: the keeper's own stdin is not open (a
// docker attach by anyone, its input at its end, reaches nothing), a
// connection without the secret is refused, and so is a second holder
// while one holds it.
//
// Package internal/keeper builds it from this folder's files alone, as a
// module of its own, static, into an image FROM scratch: it imports the
// standard library only, and must never import anything else.
//
// What it says on stdout, one line each, is for its starter and holder:
//
//	ready run=<id> lease=<timeout>  it reached its own engine through the socket
//	error: <why>                    it could not; it then removes nothing
//	held                            a holder with the secret took the lease
//
// What it does goes to stderr (the engine's log of it).
//
// Environment: RIGHTSIZE_KEEPER_RUN (the run id), RIGHTSIZE_LEASE_TIMEOUT,
// RIGHTSIZE_KEEPER_FIRST_HOLD (the wait for the first holder; the lease
// timeout when unset) and RIGHTSIZE_KEEPER_SETTLE (Go durations),
// RIGHTSIZE_KEEPER_NONCE (how it recognises itself on the engine),
// RIGHTSIZE_KEEPER_LEASE (the hex SHA-256 of the lease's secret),
// RIGHTSIZE_KEEPER_SOCKET (the socket's path inside the container;
// /var/run/docker.sock by default).
//
// SIGTERM (`docker stop`, the engine shutting down) ends it at once and
// removes nothing, itself included: a stopped keeper is no evidence that
// its run is dead, and the stopped container tells a sweep when it
// stopped; its holder starts it again. SIGINT, SIGHUP and SIGQUIT (what a
// docker attach passes on from a person's terminal) are ignored.
//
// Exit status: 0 when the run's containers and networks are gone, or on
// SIGTERM; 1 when some were left; 2 for a bad environment; 3 when the
// engine could not be reached through the socket. "keeper hold" exits 0
// when its stdin or the keeper's end of the lease closed, 1 when the
// keeper refused it, 2 when it could not say hello.
package main

import (
	"fmt"
	"log"
	"net/url"
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
	envFirst   = "RIGHTSIZE_KEEPER_FIRST_HOLD"
	envNonce   = "RIGHTSIZE_KEEPER_NONCE"
	envLease   = "RIGHTSIZE_KEEPER_LEASE"
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
	if len(os.Args) > 1 && os.Args[1] == "hold" {
		log.SetPrefix("rightsize keeper hold: ")
		os.Exit(hold(os.Stdin, os.Stdout, holdDial))
	}
	log.SetPrefix("rightsize keeper: ")

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM)
	// What a docker attach passes on from a terminal: never an end.
	ignored := make(chan os.Signal, 4)
	signal.Notify(ignored, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT)
	os.Exit(run(os.Stdout, stop, ignored))
}

// config is what the environment says.
type config struct {
	run     string
	timeout time.Duration
	first   time.Duration // the wait for the first holder; 0: timeout
	settle  time.Duration
	nonce   string
	lease   string // the hex SHA-256 of the lease's secret
	socket  string
}

func readConfig(getenv func(string) string) (config, error) {
	c := config{run: getenv(envRun), nonce: getenv(envNonce), lease: getenv(envLease), socket: getenv(envSocket), settle: defaultSettle}
	if c.run == "" {
		return c, fmt.Errorf("%s is empty", envRun)
	}
	if c.nonce == "" {
		return c, fmt.Errorf("%s is empty", envNonce)
	}
	if !validHash(c.lease) {
		return c, fmt.Errorf("%s is not a SHA-256 in hex", envLease)
	}
	if c.socket == "" {
		c.socket = defaultSocket
	}
	var err error
	if c.timeout, err = time.ParseDuration(getenv(envTimeout)); err != nil || c.timeout <= 0 {
		return c, fmt.Errorf("%s=%q is not a positive duration", envTimeout, getenv(envTimeout))
	}
	if v := getenv(envFirst); v != "" {
		if c.first, err = time.ParseDuration(v); err != nil || c.first <= 0 {
			return c, fmt.Errorf("%s=%q is not a positive duration", envFirst, v)
		}
	}
	if v := getenv(envSettle); v != "" {
		if c.settle, err = time.ParseDuration(v); err != nil || c.settle < 0 {
			return c, fmt.Errorf("%s=%q is not a duration", envSettle, v)
		}
	}
	return c, nil
}

func run(out *os.File, stop, ignored <-chan os.Signal) int {
	c, err := readConfig(os.Getenv)
	if err != nil {
		fmt.Fprintf(out, "error: %v\n", err)
		log.Print(err)
		return exitConfig
	}
	// Listening comes first: a holder that says hello while the engine is
	// checked waits in the backlog.
	ln, err := listenLease()
	if err != nil {
		fmt.Fprintf(out, "error: %v\n", err)
		log.Print(err)
		return exitConfig
	}
	defer ln.Close()
	lc := leaseConfig{timeout: c.timeout, first: c.first, hash: c.lease}
	eng := &engine{socket: c.socket, timeout: callTimeout}
	found, err := eng.check(c.run, c.nonce)
	if err != nil {
		// Nothing can be removed through this socket: say why to the
		// starter (and to any holder), then wait for the starter to
		// remove this keeper, or for the lease to end, whichever comes
		// first.
		fmt.Fprintf(out, "error: %v\n", err)
		log.Printf("run %s: %v", c.run, err)
		lc.refuse = err
		lease(ln, out, lc, stop, ignored)
		return exitNoEngine
	}
	fmt.Fprintf(out, "ready run=%s lease=%s\n", c.run, c.timeout)
	log.Printf("run %s: ready; lease timeout %s, engine at %s", c.run, c.timeout, c.socket)
	// What start-up allocated goes back to the system for the wait.
	debug.FreeOSMemory()

	why, reap := lease(ln, out, lc, stop, ignored)
	if !reap {
		// Left as it is, stopped: its stop is what a sweep judges the
		// run by, until its holder starts it again.
		log.Printf("run %s: %s: ending without removing anything", c.run, why)
		return exitClean
	}
	ln.Close()
	log.Printf("run %s: %s: removing what carries its label", c.run, why)
	r := &reaper{eng: eng, run: c.run, parallel: found.parallel, settle: c.settle, budget: reapBudget}
	status := exitClean
	if !r.reap() {
		status = exitLeft
	}
	// Its work is done: what is left, if anything, is a sweep's, which a
	// keeper still on the engine would hold off. The removal kills this
	// process; an engine that stops it first sends the stop signal, which
	// ends it at once.
	select {
	case <-stop: // a stop that came while it removed the run: done now
	default:
	}
	go func() {
		<-stop
		os.Exit(status)
	}()
	log.Printf("run %s: removing itself", c.run)
	path := "/containers/" + url.PathEscape(found.self) + "?force=1&v=1"
	if found.podman {
		// As the run's containers are removed there: no stop first.
		path = "/v4.0.0/libpod/containers/" + url.PathEscape(found.self) + "?force=true&timeout=0&volumes=true"
	}
	if err := eng.call("DELETE", path, nil); err != nil && codeOf(err) != 404 {
		log.Printf("run %s: removing itself: %v", c.run, err)
	}
	return status
}
