package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/rightsize/rightsize-go/internal/ledger"
	"github.com/rightsize/rightsize-go/internal/pidns"
)

// openPty returns the two ends of a new pseudo-terminal.
func openPty(t *testing.T) (ctrl, tty *os.File) {
	t.Helper()
	ctrl, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal here: %v", err)
	}
	t.Cleanup(func() { ctrl.Close() })
	var unlock int32
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, ctrl.Fd(), unix.TIOCSPTLCK, uintptr(unsafe.Pointer(&unlock))); errno != 0 {
		t.Skipf("unlockpt: %v", errno)
	}
	n, err := unix.IoctlGetUint32(int(ctrl.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Skipf("ptsname: %v", err)
	}
	tty, err = os.OpenFile("/dev/pts/"+strconv.Itoa(int(n)), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("open the pty: %v", err)
	}
	t.Cleanup(func() { tty.Close() })
	return ctrl, tty
}

// TestColour: ls colours its STATUS column on a terminal, and only there,
// and never with NO_COLOR set; the colour does not break the alignment.
func TestColour(t *testing.T) {
	cache := t.TempDir()
	runs := filepath.Join(cache, "runs")
	if err := os.Mkdir(runs, 0o700); err != nil {
		t.Fatal(err)
	}
	// In this process's pid namespace, where the pid is not in use: dead
	// wherever the test runs.
	rec := string(ledger.Record{PID: 4194030, Backend: "docker", PidNamespace: pidns.Self()}.Marshal())
	if err := os.WriteFile(filepath.Join(runs, "dead0001.json"), []byte(rec), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(runs, "bad00001.json"), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TERM", "xterm")
	if testing.Short() {
		// ls asks the backend's engine what it can; -short has none to
		// ask: the docker backend (whatever RIGHTSIZE_BACKEND says), at
		// a socket no engine listens on.
		t.Setenv("RIGHTSIZE_BACKEND", "docker")
		t.Setenv("DOCKER_HOST", "unix://"+filepath.Join(t.TempDir(), "no-engine.sock"))
	}

	_, tty := openPty(t)
	if !isTerminal(tty.Fd()) {
		t.Fatal("isTerminal(a pty) = false")
	}
	if f, _ := os.CreateTemp(t.TempDir(), "out"); isTerminal(f.Fd()) {
		t.Error("isTerminal(a regular file) = true")
	}

	t.Setenv("NO_COLOR", "")
	if !colourWanted(tty) {
		t.Error("colourWanted(a terminal) = false with NO_COLOR unset")
	}
	var plain bytes.Buffer
	if colourWanted(&plain) {
		t.Error("colourWanted(a buffer) = true; want colour only on a terminal")
	}
	t.Setenv("NO_COLOR", "1")
	if colourWanted(tty) {
		t.Error("colourWanted(a terminal) = true with NO_COLOR=1")
	}

	// The table itself, coloured as on a terminal and plain.
	var coloured bytes.Buffer
	c := &cli{stdout: &coloured, stderr: &coloured, colour: true}
	if err := c.ls([]string{"--cache", cache}); err != nil {
		t.Fatal(err)
	}
	c = &cli{stdout: &plain, stderr: &plain}
	if err := c.ls([]string{"--cache", cache}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(coloured.String(), sgrRed+"dead"+sgrReset) || !strings.Contains(coloured.String(), sgrYellow+"unreadable"+sgrReset) {
		t.Errorf("coloured table has no coloured status:\n%q", coloured.String())
	}
	if strings.Contains(plain.String(), "\x1b") {
		t.Errorf("plain table holds escape sequences:\n%q", plain.String())
	}
	// Without its escapes, the coloured table is the plain one: the
	// columns after STATUS are where they would be without colour.
	// Every SGR sequence goes: the keep-alive table lists whatever the
	// engine runs (other packages' tests too), green when it runs.
	stripped := regexp.MustCompile("\x1b\\[[0-9;]*m").ReplaceAllString(coloured.String(), "")
	if stripped != plain.String() {
		t.Errorf("coloured table, escapes removed:\n%s\ndiffers from the plain one:\n%s", stripped, plain.String())
	}
}
