package memory_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/rightsize/rightsize-go/internal/backend"
	"github.com/rightsize/rightsize-go/internal/backend/memory"
)

// driver is what the memory backend offers beside backend.Driver.
type driver interface {
	backend.Driver
	backend.RunLister
	backend.OwnershipChecker
	backend.KeepAliver
}

func open(t *testing.T, dir string) driver {
	t.Helper()
	d, err := memory.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	return d.(driver)
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func TestRemoveDecides(t *testing.T) {
	dir := t.TempDir()
	d := open(t, dir)
	c := ctx(t)
	net, err := d.CreateNetwork(c, "rz-net-aaaa0001", "run1")
	if err != nil || net == "" {
		t.Fatalf("CreateNetwork: %q, %v", net, err)
	}
	if _, err := d.CreateNetwork(c, "rz-net-aaaa0002", "run1"); err != nil {
		t.Fatal(err)
	}
	for _, s := range []struct {
		name string
		spec backend.Spec
	}{
		{"mine", backend.Spec{Image: "i", RunID: "run1", Networks: map[string][]string{"rz-net-aaaa0001": {"db"}}}},
		{"theirs", backend.Spec{Image: "i", RunID: "run2"}},
		{"unmarked", backend.Spec{Image: "i"}},
		{"rz-reuse-0123456789ab", backend.Spec{Image: "i", KeepAlive: "0123456789ab"}},
		{"rz-reuse-aaaaaaaaaaaa", backend.Spec{Image: "i", RunID: "run1"}},
	} {
		if _, err := d.Create(c, s.name, s.spec); err != nil {
			t.Fatalf("Create %s: %v", s.name, err)
		}
	}
	// A second opener of the folder is another process's view of it.
	other := open(t, dir)
	for _, row := range []struct {
		kind   backend.Kind
		name   string
		want   error
		also   error
		stays  bool
		reason string
	}{
		{backend.NetworkKind, "rz-net-aaaa0001", backend.ErrInUse, nil, true, "sandbox mine is joined to it"},
		{backend.SandboxKind, "mine", nil, nil, false, "run1's own"},
		{backend.NetworkKind, "rz-net-aaaa0001", nil, nil, false, "once mine is gone, nothing is joined"},
		{backend.SandboxKind, "theirs", backend.ErrNotOwned, nil, true, "run2's"},
		{backend.SandboxKind, "unmarked", backend.ErrNotOwned, backend.ErrUnlabelled, true, "no run's mark"},
		{backend.SandboxKind, "rz-reuse-0123456789ab", backend.ErrNotOwned, nil, true, "keep-alive mark"},
		{backend.SandboxKind, "rz-reuse-aaaaaaaaaaaa", backend.ErrNotOwned, nil, true, "keep-alive name, whatever its marks"},
		{backend.SandboxKind, "never", backend.ErrNotFound, nil, false, "nothing of that name"},
		{backend.SandboxKind, "../../etc/passwd", backend.ErrNotFound, nil, false, "not a name: never a path"},
	} {
		dry := other.CheckOwned(c, row.kind, "run1", []string{row.name})[0]
		if row.want == backend.ErrInUse {
			if dry != nil {
				t.Errorf("CheckOwned %s %s = %v, want nil (%s: Remove may yet find it in use)", row.kind, row.name, dry, row.reason)
			}
		} else if !errors.Is(dry, row.want) && !(row.want == nil && dry == nil) {
			t.Errorf("CheckOwned %s %s = %v, want %v (%s)", row.kind, row.name, dry, row.want, row.reason)
		}
		got := other.Remove(c, row.kind, "run1", []string{row.name})[0]
		if row.want == nil && got != nil || row.want != nil && !errors.Is(got, row.want) || row.also != nil && !errors.Is(got, row.also) {
			t.Errorf("Remove %s %s = %v, want %v %v (%s)", row.kind, row.name, got, row.want, row.also, row.reason)
		}
		_, statErr := os.Stat(filepath.Join(dir, row.kind.String()+"."+row.name+".json"))
		if stays := statErr == nil; stays != row.stays {
			t.Errorf("after Remove, %s %s there: %v, want %v (%s)", row.kind, row.name, stays, row.stays, row.reason)
		}
	}
	ids, err := d.ListRun(c, backend.NetworkKind, "run1")
	if err != nil || len(ids) != 1 {
		t.Fatalf("ListRun networks of run1 = %q, %v; want the one left", ids, err)
	}
	if errs := d.RemoveIDs(c, backend.NetworkKind, append(ids, "ffffffffffffffff")); errs[0] != nil || !errors.Is(errs[1], backend.ErrNotFound) {
		t.Errorf("RemoveIDs = %v, want [nil, not found]", errs)
	}
	if ids, err := d.ListRun(c, backend.SandboxKind, "run1"); err != nil || len(ids) != 0 {
		t.Errorf("ListRun sandboxes of run1 = %q, %v; want none (a keep-alive name is never listed)", ids, err)
	}
}

func TestCreateRefuses(t *testing.T) {
	d := open(t, t.TempDir())
	c := ctx(t)
	if _, err := d.Create(c, "box", backend.Spec{Image: "i", RunID: "r"}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Create(c, "box", backend.Spec{Image: "i", RunID: "r"}); !errors.Is(err, backend.ErrNameTaken) {
		t.Errorf("a second Create of box = %v, want ErrNameTaken", err)
	}
	if _, err := d.Create(c, "box2", backend.Spec{Image: "i", RunID: "r", Networks: map[string][]string{"rz-net-00000000": nil}}); !errors.Is(err, backend.ErrNotFound) {
		t.Errorf("Create joining a network that does not exist = %v, want ErrNotFound", err)
	}
	for _, bad := range []string{"", "../x", "a/b", "-rf", "a b"} {
		if _, err := d.Create(c, bad, backend.Spec{Image: "i", RunID: "r"}); err == nil {
			t.Errorf("Create %q made a sandbox", bad)
		}
	}
	s, err := d.Adopt(c, "box")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.MappedPort(c, "80/tcp"); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("MappedPort = %v, want ErrUnsupported: nothing listens", err)
	}
	if err := s.Stop(c, 0); err != nil {
		t.Fatal(err)
	}
	if err := s.Stop(c, 0); err != nil {
		t.Errorf("a second Stop = %v, want nil (already gone counts)", err)
	}
	if _, err := d.Adopt(c, "box"); !errors.Is(err, backend.ErrNotFound) {
		t.Errorf("Adopt after Stop = %v, want ErrNotFound", err)
	}
}

// TestBadFiles: what is not a file this backend wrote is never an object,
// never removed, and never a wait.
func TestBadFiles(t *testing.T) {
	dir := t.TempDir()
	d := open(t, dir)
	c := ctx(t)
	if err := os.WriteFile(filepath.Join(dir, "sandbox.junk.json"), []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := d.Remove(c, backend.SandboxKind, "r", []string{"junk"})[0]; got == nil || errors.Is(got, backend.ErrNotFound) {
		t.Errorf("Remove of a corrupt file = %v, want an error that keeps it listed", got)
	}
	if _, err := os.Stat(filepath.Join(dir, "sandbox.junk.json")); err != nil {
		t.Errorf("the corrupt file went: %v", err)
	}
	if ids, err := d.ListRun(c, backend.SandboxKind, "r"); err != nil || len(ids) != 0 {
		t.Errorf("ListRun over a corrupt file = %q, %v", ids, err)
	}
}

func TestFolderMustBePrivate(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("the mode bits of CheckPrivate are Unix's")
	}
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if _, err := memory.Open(dir); err == nil {
		t.Errorf("Open of a folder anyone can write = nil error: anyone could make the reaper remove what they choose")
	}
}

// Open makes its folder, parents too; the watchdog's opener (by
// endpoint) makes nothing: the watchdog of a test whose temporary folder is
// gone must not make it again.
func TestWatchdogNeverMakesTheFolder(t *testing.T) {
	base := t.TempDir()
	if _, err := memory.Open(filepath.Join(base, "new", "memory")); err != nil {
		t.Fatalf("Open of a new folder in a new one: %v", err)
	}
	gone := filepath.Join(base, "removed", "memory")
	t.Setenv(memory.EnvDir, gone)
	if _, err := backend.OpenEndpoint(backend.Memory, ""); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the watchdog's open of a folder that is gone = %v, want an error wrapping fs.ErrNotExist", err)
	}
	if _, err := os.Lstat(filepath.Dir(gone)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the watchdog's open made the folder's parent again (%v)", err)
	}
	t.Setenv(memory.EnvDir, filepath.Join(base, "new", "memory"))
	if _, err := backend.OpenEndpoint(backend.Memory, ""); err != nil {
		t.Errorf("the watchdog's open of its owner's folder: %v", err)
	}
}

// TestJournal: with RIGHTSIZE_MEMORY_JOURNAL set, every create and every
// removal (Remove, RemoveIDs, CloseRun, RemoveKeepAlive, Stop) is a line
// naming the process, the object and its marks; a removal that cannot
// write its line removes nothing.
func TestJournal(t *testing.T) {
	dir := t.TempDir()
	journal := filepath.Join(t.TempDir(), "journal")
	t.Setenv(memory.EnvJournal, journal)
	d := open(t, dir)
	c := ctx(t)
	if _, err := d.CreateNetwork(c, "rz-net-aaaa0001", "run1"); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"box-a", "box-b", "box-c"} {
		if _, err := d.Create(c, n, backend.Spec{Image: "i", RunID: "run1"}); err != nil {
			t.Fatal(err)
		}
	}
	ka, err := d.Create(c, "rz-reuse-0123456789ab", backend.Spec{Image: "i", KeepAlive: "0123456789ab"})
	if err != nil {
		t.Fatal(err)
	}
	s, err := d.Adopt(c, "box-c")
	if err != nil {
		t.Fatal(err)
	}
	if errs := d.Remove(c, backend.SandboxKind, "run1", []string{"box-a", "never"}); errs[0] != nil || !errors.Is(errs[1], backend.ErrNotFound) {
		t.Fatalf("Remove = %v", errs)
	}
	if err := s.Stop(c, 0); err != nil {
		t.Fatal(err)
	}
	if err := d.RemoveKeepAlive(c, ka.Name(), "0123456789ab"); err != nil {
		t.Fatal(err)
	}
	if _, err := d.(backend.RunCloser).CloseRun(c, "run1"); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(journal)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	n, err := memory.ReadJournal(f, func(e memory.Entry) {
		if e.PID != os.Getpid() || e.ID == "" || time.Since(e.At) > time.Minute {
			t.Errorf("entry %+v: want this process's pid, an id and a time", e)
		}
		got = append(got, e.Op+" "+e.Kind+" "+e.Name+" "+e.Run+e.KeepAlive)
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"create network rz-net-aaaa0001 run1",
		"create sandbox box-a run1", "create sandbox box-b run1", "create sandbox box-c run1",
		"create sandbox rz-reuse-0123456789ab 0123456789ab",
		"remove sandbox box-a run1", "remove sandbox box-c run1", "remove sandbox rz-reuse-0123456789ab 0123456789ab",
		"remove sandbox box-b run1", "remove network rz-net-aaaa0001 run1",
	}
	if fi, _ := f.Stat(); n != fi.Size() || strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("journal (%d of %d bytes read):\n%s\nwant:\n%s", n, fi.Size(), strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// Closed before the file is removed below: Windows refuses to remove
	// a file that is open (a sharing violation).
	f.Close()

	// A journal that cannot be written: the removal fails, the object stays.
	if _, err := d.Create(c, "box-d", backend.Spec{Image: "i", RunID: "run1"}); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(journal); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(journal, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := open(t, dir).Remove(c, backend.SandboxKind, "run1", []string{"box-d"})[0]; err == nil || errors.Is(err, backend.ErrNotFound) {
		t.Errorf("Remove with no journal to write = %v, want an error that keeps it listed", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "sandbox.box-d.json")); err != nil {
		t.Errorf("a removal whose line could not be written removed it: %v", err)
	}
}

// TestReadJournalPartial: a line not yet ended is left for the next read;
// a line that is no entry is an error.
func TestReadJournalPartial(t *testing.T) {
	whole := `{"op":"remove","at":"2026-12-01T10:00:00Z","pid":7,"kind":"sandbox","name":"a","id":"1","run":"r"}` + "\n"
	var seen int
	n, err := memory.ReadJournal(strings.NewReader(whole+`{"op":"cre`), func(memory.Entry) { seen++ })
	if err != nil || seen != 1 || n != int64(len(whole)) {
		t.Errorf("ReadJournal = %d bytes, %d entries, %v; want %d, 1, nil", n, seen, err, len(whole))
	}
	if _, err := memory.ReadJournal(strings.NewReader("not json\n"), func(memory.Entry) {}); err == nil {
		t.Error("ReadJournal of a line that is no entry: nil error")
	}
}

// TestReadJournalTorn: a writer SIGKILLed in the middle of its line (the
// chaos harness saw one at a page boundary of the file) leaves a piece,
// and the next writer's whole line follows it on the same line: the piece
// is skipped, the whole entry after it read, and the rest goes on.
func TestReadJournalTorn(t *testing.T) {
	torn := `{"op":"remove","at":"2026-12-04T14:32:27.05775986Z","pid":1711,"kind":"sandbox","name":"rz-2ac3f1c7-1","id":"234395e92952`
	next := `{"op":"create","at":"2026-12-04T14:32:27.14939404Z","pid":1696,"kind":"network","name":"rz-net-49465c4e","id":"47fd87b4ede21570ac4ee5f170c091e8","run":"504555ac"}` + "\n"
	last := `{"op":"remove","at":"2026-12-04T14:32:28Z","pid":1696,"kind":"network","name":"rz-net-49465c4e","id":"47fd87b4ede21570ac4ee5f170c091e8","run":"504555ac"}` + "\n"
	var got []memory.Entry
	n, err := memory.ReadJournal(strings.NewReader(torn+next+last), func(e memory.Entry) { got = append(got, e) })
	if err != nil || n != int64(len(torn+next+last)) || len(got) != 2 {
		t.Fatalf("ReadJournal = %d bytes, %d entries, %v; want %d, 2, nil", n, len(got), err, len(torn+next+last))
	}
	if got[0].Name != "rz-net-49465c4e" || got[0].Removal() || got[0].PID != 1696 || !got[1].Removal() {
		t.Errorf("read %+v; want the network's create, then its removal", got)
	}
	if _, err := memory.ReadJournal(strings.NewReader(torn+"garbage\n"), func(memory.Entry) {}); err == nil {
		t.Error("ReadJournal of a piece followed by no entry: nil error")
	}
}
