package main

import (
	"bufio"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"strings"
	"syscall"
	"time"
)

const (
	// leaseSocket is where the keeper listens for its holder: an abstract
	// unix socket, which lives in the container's own network namespace
	// (the keeper has no network but its loopback), so that only a
	// process in the container (an exec of "keeper hold") can reach it,
	// and which needs no file in the read-only root.
	leaseSocket = "@rightsize-keeper-lease"
	// helloTimeout bounds a holder's hello, and its wait for the answer.
	helloTimeout = 10 * time.Second
	// maxHello bounds a hello line: "hold " and the secret.
	maxHello = 256
)

// The lease's words. A holder says hello with the secret; the keeper
// answers held, or why not.
const (
	helloWord = "hold"
	heldWord  = "held"
)

func listenLease() (net.Listener, error) {
	ln, err := net.Listen("unix", leaseSocket)
	if err != nil {
		return nil, fmt.Errorf("listening for its holder on %s: %w", leaseSocket, err)
	}
	return ln, nil
}

// validHash reports whether h is a SHA-256 in lower-case hex.
func validHash(h string) bool {
	if len(h) != 2*sha256.Size {
		return false
	}
	_, err := hex.DecodeString(h)
	return err == nil && strings.ToLower(h) == h
}

// secretMatches reports whether secret hashes to hash (hex), in a time
// that does not depend on where they differ.
func secretMatches(secret, hash string) bool {
	sum := sha256.Sum256([]byte(secret))
	want, err := hex.DecodeString(hash)
	return err == nil && subtle.ConstantTimeCompare(sum[:], want) == 1
}

// leaseConfig is what the lease loop needs.
type leaseConfig struct {
	timeout time.Duration
	// first is how long to wait for the first holder; 0 is timeout.
	first time.Duration
	hash  string // the hex SHA-256 of the lease's secret
	// refuse, when set, is why no holder may take the lease: the keeper
	// cannot reach its engine. Holders are told it.
	refuse error
}

// leaseEvent is what a connection to the lease socket did.
type leaseEvent struct {
	conn  net.Conn
	hello bool   // it said hello: secret says whether with the secret
	ok    bool   // with the secret
	why   string // what was wrong with its hello
	beat  bool   // the holder wrote something
	end   error  // the holder's connection ended (io.EOF: closed)
}

// lease waits for the lease to end and says why: the holder's connection
// closed, or no byte came from it for timeout (or no holder came in the
// first wait: a keeper nobody ever holds ends as one whose holder died),
// or SIGTERM came, which must not remove anything (reap false). Only a
// connection that said hello with the secret, while no other holds the
// lease, takes it; any other is answered and closed, and changes nothing.
// Each holder taken is said on out ("held"). A signal on ignored is logged
// and ignored.
func lease(ln net.Listener, out io.Writer, lc leaseConfig, stop, ignored <-chan os.Signal) (why string, reap bool) {
	events := make(chan leaseEvent)
	done := make(chan struct{})
	defer close(done)
	send := func(e leaseEvent) bool {
		select {
		case events <- e:
			return true
		case <-done:
			return false
		}
	}
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				if errors.Is(err, net.ErrClosed) {
					return
				}
				log.Printf("accepting a holder: %v", err)
				time.Sleep(50 * time.Millisecond)
				continue
			}
			go readHello(conn, lc.hash, send)
		}
	}()

	first := lc.first
	if first <= 0 {
		first = lc.timeout
	}
	timer := time.NewTimer(first)
	defer timer.Stop()
	var holder net.Conn
	defer func() {
		if holder != nil {
			holder.Close()
		}
	}()
	for {
		select {
		case e := <-events:
			switch {
			case e.hello:
				answer := ""
				switch {
				case !e.ok:
					answer = "refused: " + e.why
				case lc.refuse != nil:
					answer = "error: " + lc.refuse.Error()
				case holder != nil:
					answer = "refused: another holder holds the lease"
				}
				if answer != "" {
					log.Printf("a connection to the lease: %s", answer)
					e.conn.SetWriteDeadline(time.Now().Add(helloTimeout))
					fmt.Fprintln(e.conn, answer)
					e.conn.Close()
					continue
				}
				holder = e.conn
				holder.SetWriteDeadline(time.Now().Add(helloTimeout))
				if _, err := fmt.Fprintln(holder, heldWord); err != nil {
					return fmt.Sprintf("answering its holder: %v", err), true
				}
				fmt.Fprintln(out, heldWord)
				log.Printf("held; lease timeout %s", lc.timeout)
				timer.Reset(lc.timeout)
				go readBeats(holder, send)
			case e.conn != holder:
				// What a refused or replaced connection still sends.
			case e.beat:
				timer.Reset(lc.timeout)
			case errors.Is(e.end, io.EOF):
				return "its holder's connection closed", true
			default:
				return fmt.Sprintf("reading its holder: %v", e.end), true
			}
		case <-timer.C:
			if holder == nil {
				return fmt.Sprintf("nobody held the lease within %s", first), true
			}
			return fmt.Sprintf("no heartbeat for %s", lc.timeout), true
		case s := <-stop:
			return "signal " + s.String(), false
		case s := <-ignored:
			log.Printf("signal %s ignored: only SIGTERM stops a keeper, and only its holder ends its lease", s)
		}
	}
}

// readHello reads a connection's hello, "hold <secret>", and says what
// it was.
func readHello(conn net.Conn, hash string, send func(leaseEvent) bool) {
	conn.SetReadDeadline(time.Now().Add(helloTimeout))
	line, err := readLine(bufio.NewReaderSize(io.LimitReader(conn, maxHello), maxHello))
	e := leaseEvent{conn: conn, hello: true}
	word, secret, _ := strings.Cut(line, " ")
	switch {
	case err != nil:
		e.why = fmt.Sprintf("no hello (%v)", err)
	case word != helloWord:
		e.why = "not a hello"
	case !secretMatches(secret, hash):
		e.why = "not this lease's secret"
	default:
		e.ok = true
	}
	if !e.ok {
		// Told, but never read again: the loop answers and closes it.
		send(e)
		return
	}
	conn.SetReadDeadline(time.Time{})
	if !send(e) {
		conn.Close()
	}
}

// readBeats reads the holder's heartbeats until its connection ends.
func readBeats(conn net.Conn, send func(leaseEvent) bool) {
	buf := make([]byte, 512)
	for {
		n, err := conn.Read(buf)
		if n > 0 && !send(leaseEvent{conn: conn, beat: true}) {
			return
		}
		if err != nil {
			send(leaseEvent{conn: conn, end: err})
			return
		}
	}
}

// holdDial connects to the keeper's lease socket, waiting while the
// keeper is not listening yet (a keeper just started again).
func holdDial() (net.Conn, error) {
	deadline := time.Now().Add(helloTimeout)
	for {
		conn, err := net.DialTimeout("unix", leaseSocket, helloTimeout)
		if err == nil || !errors.Is(err, syscall.ECONNREFUSED) || time.Now().After(deadline) {
			return conn, err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// hold is "keeper hold", what a holder runs in the keeper's container
// (docker exec -i): it reads the lease's secret, the first line of its
// stdin, says hello with it to the keeper, writes the keeper's answer to
// out, and, once held, passes every byte of its stdin on as a heartbeat.
// It ends when its stdin ends (the holder let go, or its connection to the
// engine closed), which ends the lease, or when the keeper's end closes.
func hold(in io.Reader, out io.Writer, dial func() (net.Conn, error)) int {
	br := bufio.NewReaderSize(in, maxHello)
	secret, err := readLine(br)
	if err != nil {
		fmt.Fprintf(out, "error: reading the lease's secret: %v\n", err)
		return exitConfig
	}
	conn, err := dial()
	if err != nil {
		fmt.Fprintf(out, "error: reaching the keeper: %v\n", err)
		return exitConfig
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(helloTimeout))
	if _, err := fmt.Fprintf(conn, "%s %s\n", helloWord, secret); err != nil {
		fmt.Fprintf(out, "error: saying hello: %v\n", err)
		return exitConfig
	}
	answer, err := readLine(bufio.NewReaderSize(io.LimitReader(conn, maxHello), maxHello))
	if err != nil {
		fmt.Fprintf(out, "error: the keeper's answer: %v\n", err)
		return exitConfig
	}
	fmt.Fprintln(out, answer)
	if answer != heldWord {
		return exitLeft
	}
	conn.SetDeadline(time.Time{})
	ended := make(chan struct{}, 2)
	go func() {
		// The keeper says nothing more: its end is the read's.
		_, _ = io.Copy(io.Discard, conn)
		ended <- struct{}{}
	}()
	go func() {
		_, _ = io.Copy(conn, br)
		ended <- struct{}{}
	}()
	<-ended
	return exitClean
}
