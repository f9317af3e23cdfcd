//go:build linux

package e2e_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/rightsize/rightsize-go/internal/ledger"
	"github.com/rightsize/rightsize-go/internal/proctest"
	"github.com/rightsize/rightsize-go/internal/usermod"
)

// Row keep-alive: keep-alive sandboxes that expire (RIGHTSIZE_REUSE_TTL),
// with test binaries built as a user builds them. A user's test makes
// three keep-alives and is SIGKILLed: they outlive it and its watchdog,
// as keep-alives do. Another holds one through the row; a third makes one
// and passes. Once all are idle past the time-to-live, a user's test with
// RIGHTSIZE_REUSE_TTL set starts, and its first use sweeps; frozen
// (SIGSTOP) the moment its sweep first reads the use record of the
// passed one, it resumes once a fourth user's test has adopted that one
// and let it go. The sweep removes the three expired keep-alives, keeps
// the one held (in use) and the one adopted during the sweep, and the
// adopter had the very sandbox it adopted.
func TestRowKeepAliveTTL(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	bin := usermod.Build(t, usermod.Store)
	tmp := t.TempDir() // the use dir of these processes alone: their sweeps judge their keep-alives only
	// The adopter lets its keep-alive go, then the frozen sweep resumes
	// and judges it: that must take less than the time-to-live. 3 s was
	// too little for Podman beside make test's other gates (the sweep
	// judged the adopted one idle past it, and removed it, rightly).
	const ttl = 10 * time.Second
	words := func(n int) []string {
		var out []string
		for range n {
			out = append(out, rand.Text()[:12])
		}
		return out
	}
	expired, held, adopted := words(3), words(1), words(1)
	name := func(word string) string {
		n := ledger.ReuseName(ledger.ReuseIdentity{Image: r.img, Env: map[string]string{"USER_KEEPALIVE": word}, Command: []string{"/server"}}.Hash())
		t.Cleanup(func() { r.eng.Remove(context.Background(), n) })
		return n
	}
	user := func(what string, kas []string, env ...string) (*proctest.Proc, string) {
		t.Helper()
		info := filepath.Join(t.TempDir(), "info")
		env = append([]string{usermod.EnvImage + "=" + r.img, usermod.EnvInfo + "=" + info, "TMPDIR=" + tmp,
			"RIGHTSIZE_REUSE=true", usermod.EnvKeepAlives + "=" + strings.Join(kas, " ")}, env...)
		test := "^TestKeepAlive$"
		if len(kas) == 0 {
			test = "^TestHolds$"
		}
		p, err := proctest.Start(proctest.Spec{
			Name: "user's test (" + what + ")",
			Argv: []string{bin, "-test.run=" + test, "-test.count=1", "-test.timeout=10m"},
			Env:  r.userEnv(env...),
			Dir:  filepath.Dir(bin),
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = p.Signal(syscall.SIGCONT)
			if err := p.EnsureDead(); err != nil {
				t.Errorf("%s: %v", what, err)
			}
		})
		return p, info
	}
	blocked := func(p *proctest.Proc, info string) usermod.Info {
		t.Helper()
		done := make(chan struct{})
		go func() { p.Wait(readyWithin + exitWithin); close(done) }()
		in, err := usermod.WaitBlocked(info, done, readyWithin)
		if err != nil {
			t.Fatalf("%v\n%s", err, p.Output())
		}
		return in
	}
	passes := func(p *proctest.Proc) {
		t.Helper()
		_ = p.CloseStdin()
		if !p.Wait(exitWithin) {
			t.Fatalf("%s did not end", p.Name)
		}
		if _, err := p.Exited(); err != nil {
			t.Fatalf("%s: %v\n%s", p.Name, err, p.Output())
		}
	}
	running := func(n string) (bool, string) {
		ok, run, err := r.eng.ContainerState(context.Background(), n)
		if err != nil {
			t.Fatal(err)
		}
		id, _ := r.eng.ContainerID(context.Background(), n)
		return ok && run, id
	}

	m, info := user("makes three, SIGKILLed", expired)
	made := blocked(m, info)
	if err := m.Kill(); err != nil || !m.Wait(exitWithin) {
		t.Fatalf("SIGKILL of %s: %v", m.Name, err)
	}
	ids := map[string]string{}
	for _, w := range expired {
		n := name(w)
		if ids[n] = made.KeepAlives[n]; ids[n] == "" {
			t.Fatalf("the user's test did not make %s: %+v", n, made)
		}
	}
	p, info := user("makes one and passes", adopted, usermod.EnvPass+"=1")
	adoptedName := name(adopted[0])
	adoptedID := blocked(p, info).KeepAlives[adoptedName]
	passes(p)
	h, info := user("holds one", held, usermod.EnvPass+"=1")
	heldName := name(held[0])
	heldID := blocked(h, info).KeepAlives[heldName]
	for _, n := range append([]string{adoptedName, heldName}, mapKeys(ids)...) {
		if ok, _ := running(n); !ok {
			t.Fatalf("keep-alive %s is not running before the sweep", n)
		}
	}
	time.Sleep(ttl + 200*time.Millisecond) // idle past the time-to-live: this row is about time

	a, ainfo := user("adopts during the sweep", adopted, usermod.EnvGo+"=1", usermod.EnvPass+"=1")
	proctest.WaitUntil(t, readyWithin, "the adopter to wait for its go", func() bool {
		waiting, _ := proctest.WaitingOnStdin(a.Pid())
		return waiting
	})
	use, err := ledger.UseDir(tmp)
	if err != nil {
		t.Fatal(err)
	}
	in, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		t.Skipf("inotify: %v", err)
	}
	defer unix.Close(in)
	if _, err := unix.InotifyAddWatch(in, use, unix.IN_CLOSE_NOWRITE); err != nil {
		t.Fatal(err)
	}
	s, sinfo := user("sweeps with RIGHTSIZE_REUSE_TTL", nil, "RIGHTSIZE_REUSE_TTL="+ttl.String(),
		usermod.EnvSandboxes+"=1", usermod.EnvNetwork+"=0", usermod.EnvPass+"=1")
	if !waitRead(in, adoptedName, readyWithin) {
		t.Fatalf("the sweeping test never read the use record of %s\n%s", adoptedName, s.Output())
	}
	if err := s.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if ok, id := running(adoptedName); !ok || id != adoptedID {
		t.Fatalf("%s went before the sweep was frozen: the row tests nothing", adoptedName)
	}
	if err := a.Send("go"); err != nil {
		t.Fatal(err)
	}
	if got := blocked(a, ainfo).KeepAlives[adoptedName]; got != adoptedID {
		t.Errorf("the adopter got %s, want the keep-alive %s (%s) adopted", got, adoptedName, adoptedID)
	}
	passes(a)
	if err := s.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	blocked(s, sinfo)
	out := s.Output()

	for n, id := range ids {
		if ok, _ := running(n); ok {
			t.Errorf("the expired keep-alive %s (%s) is still there", n, id)
		}
		if !strings.Contains(out, "rightsize: keep-alive sandbox "+n+": removed (idle since") {
			t.Errorf("the sweeping test did not tell the removal of %s", n)
		}
	}
	if ok, id := running(heldName); !ok || id != heldID {
		t.Errorf("the keep-alive %s a live test holds was not kept (running %v, %s)", heldName, ok, id)
	}
	if ok, id := running(adoptedName); !ok || id != adoptedID {
		t.Errorf("the keep-alive %s adopted during the sweep was not kept (running %v, %s)", adoptedName, ok, id)
	}
	if strings.Contains(out, adoptedName+": removed") || strings.Contains(out, heldName+": removed") {
		t.Errorf("the sweep says it removed a keep-alive in use:\n%s", out)
	}
	if t.Failed() {
		t.Logf("the sweeping test's output:\n%s", out)
	}
	passes(s)
	passes(h)
}

// waitRead waits until the watched use dir reports a read (closed, not
// written) of a use record of keep-alive name.
func waitRead(fd int, name string, within time.Duration) bool {
	buf := make([]byte, 64<<10)
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		if _, err := unix.Poll(fds, 100); err != nil && err != unix.EINTR {
			return false
		}
		n, err := unix.Read(fd, buf)
		if err != nil {
			continue
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			file := string(bytes.TrimRight(buf[off+unix.SizeofInotifyEvent:off+unix.SizeofInotifyEvent+int(ev.Len)], "\x00"))
			off += unix.SizeofInotifyEvent + int(ev.Len)
			if strings.HasPrefix(file, name+".") && strings.HasSuffix(file, ".used") {
				return true
			}
		}
	}
	return false
}

func mapKeys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
