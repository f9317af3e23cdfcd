// Command server is the /server program of the test images built by package
// testimage: a tiny HTTP server whose lifecycle a test can steer with flags.
//
//	/server [-ignore-term] [-exit-after d] [-exit-code n] [-alloc] [-alloc-max bytes] [port ...]
//
// It listens on every TCP port given (8080 when none is), answers every
// request on port p with 200 and the body "rightsize-test-server port=p\n",
// and prints "ready" on stdout once all ports listen. On SIGTERM or SIGINT it
// exits 0, unless -ignore-term is set, in which case it ignores SIGTERM the
// way a busybox sleep as PID 1 does and only SIGKILL ends it. -exit-after
// makes it exit by itself with -exit-code. -alloc makes it allocate and touch
// memory, 1 MiB at a time, until the kernel kills it (a memory limit gives a
// real OOM-kill); -alloc-max stops the growth there, so that a forgotten
// limit does not take the host down with it.
//
// It is built with CGO_ENABLED=0 so that it runs in an image built FROM
// scratch, and it uses nothing but the standard library.
package main

import (
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is main without the exit, so that a test can call it. It returns when
// the server should exit, with the exit code.
func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("server", flag.ContinueOnError)
	fs.SetOutput(stderr)
	ignoreTerm := fs.Bool("ignore-term", false, "ignore SIGTERM (only SIGKILL ends the server)")
	exitAfter := fs.Duration("exit-after", 0, "exit by itself after this long (0: never)")
	exitCode := fs.Int("exit-code", 0, "the exit code of -exit-after")
	alloc := fs.Bool("alloc", false, "allocate and touch memory until killed")
	allocMax := fs.Int64("alloc-max", 1<<30, "stop -alloc growing at this many bytes")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	ports := fs.Args()
	if len(ports) == 0 {
		ports = []string{"8080"}
	}

	for _, port := range ports {
		if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
			fmt.Fprintf(stderr, "server: %q is not a TCP port\n", port)
			return 2
		}
	}

	// Decide about signals before listening, so that there is no moment
	// after "ready" in which SIGTERM has its default effect.
	sigs := make(chan os.Signal, 1)
	if *ignoreTerm {
		signal.Ignore(syscall.SIGTERM)
		signal.Notify(sigs, syscall.SIGINT)
	} else {
		signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	}

	for _, port := range ports {
		ln, err := net.Listen("tcp", ":"+port)
		if err != nil {
			fmt.Fprintf(stderr, "server: %v\n", err)
			return 1
		}
		go serve(ln, port, stderr)
	}
	fmt.Fprintln(stdout, "ready")

	if *alloc {
		go allocate(*allocMax)
	}
	var deadline <-chan time.Time
	if *exitAfter > 0 {
		deadline = time.After(*exitAfter)
	}
	select {
	case <-sigs:
		return 0
	case <-deadline:
		return *exitCode
	}
}

func serve(ln net.Listener, port string, stderr io.Writer) {
	body := "rightsize-test-server port=" + port + "\n"
	h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, body)
	})
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	if err := srv.Serve(ln); err != nil {
		fmt.Fprintf(stderr, "server: port %s: %v\n", port, err)
	}
}

// allocated keeps every chunk reachable, so that none of it is collected.
var allocated [][]byte

func allocate(limit int64) {
	const chunk = 1 << 20
	for total := int64(0); total+chunk <= limit; total += chunk {
		b := make([]byte, chunk)
		// Touch every page: untouched pages are never charged to the cgroup.
		for i := 0; i < len(b); i += 4096 {
			b[i] = 1
		}
		allocated = append(allocated, b)
	}
}
