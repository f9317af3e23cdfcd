//go:build unix

package sandboxtest

import (
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A killed GuardAll binary's proxy folder is removed by the next start,
// and nothing that could still be in use, or is not such a folder of this
// user's, is.
func TestRemoveStaleGuardDirs(t *testing.T) {
	tmp := t.TempDir()
	mk := func(name string, mode os.FileMode) string {
		t.Helper()
		d := filepath.Join(tmp, name)
		if err := os.Mkdir(d, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(d, mode); err != nil {
			t.Fatal(err)
		}
		return d
	}
	listen := func(dir string) *net.UnixListener {
		t.Helper()
		l, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(dir, "docker.sock"), Net: "unix"})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}

	live := mk(guardDirPrefix+"live", 0o700)
	l := listen(live)
	defer l.Close()

	dead := mk(guardDirPrefix+"dead", 0o700)
	dl := listen(dead)
	dl.SetUnlinkOnClose(false) // as a SIGKILL leaves it: the file, no listener
	dl.Close()

	deadOther := mk(guardDirPrefix+"dead-with-more", 0o700)
	ol := listen(deadOther)
	ol.SetUnlinkOnClose(false)
	ol.Close()
	if err := os.WriteFile(filepath.Join(deadOther, "notes"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}

	openDead := mk(guardDirPrefix+"dead-open", 0o755)
	pl := listen(openDead)
	pl.SetUnlinkOnClose(false)
	pl.Close()

	young := mk(guardDirPrefix+"dead-but-young", 0o700)
	yl := listen(young)
	yl.SetUnlinkOnClose(false) // as between a proxy's bind and its listen
	yl.Close()

	emptyNew := mk(guardDirPrefix+"empty-new", 0o700)
	emptyOld := mk(guardDirPrefix+"empty-old", 0o700)
	old := time.Now().Add(-2 * time.Hour)
	if err := os.Chtimes(emptyOld, old, old); err != nil {
		t.Fatal(err)
	}
	unrelated := mk("unrelated", 0o700)
	ul := listen(unrelated)
	ul.SetUnlinkOnClose(false)
	ul.Close()
	if err := os.Symlink(dead, filepath.Join(tmp, guardDirPrefix+"link")); err != nil {
		t.Fatal(err)
	}

	// The cleanup runs as if two minutes from now: every socket made
	// above is past its minute but young's, dated then too.
	later := time.Now().Add(2 * time.Minute)
	if err := os.Chtimes(filepath.Join(young, "docker.sock"), later, later); err != nil {
		t.Fatal(err)
	}
	if n := removeStaleGuardDirs(tmp, later); n != 2 {
		t.Errorf("removed %d folders, want 2 (the dead proxy's and the old empty one)", n)
	}
	for _, d := range []string{dead, emptyOld} {
		if _, err := os.Lstat(d); !os.IsNotExist(err) {
			t.Errorf("%s is still there (%v)", filepath.Base(d), err)
		}
	}
	for _, d := range []string{live, deadOther, openDead, young, emptyNew, unrelated, filepath.Join(tmp, guardDirPrefix+"link")} {
		if _, err := os.Lstat(d); err != nil {
			t.Errorf("%s was removed: %v", filepath.Base(d), err)
		}
	}
	if _, err := os.Lstat(filepath.Join(live, "docker.sock")); err != nil {
		t.Errorf("the live proxy's socket was removed: %v", err)
	}
	if c, err := net.Dial("unix", filepath.Join(live, "docker.sock")); err != nil {
		t.Errorf("the live proxy no longer answers: %v", err)
	} else {
		c.Close()
	}
}
