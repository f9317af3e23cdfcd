package ledger_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/rightsize/rightsize-go/internal/ledger"
)

// rej is the part of a Rejected a table row pins: which line, how long.
type rej struct{ line, length int }

func rejs(rs []ledger.Rejected) []rej {
	var out []rej
	for _, r := range rs {
		out = append(out, rej{r.Line, r.Length})
	}
	return out
}

// readLines3 reads a line file as names, the kept rejected lines, and the
// error.
func readLines3(p string) ([]string, []ledger.Rejected, error) {
	lf, err := ledger.ReadLines(p)
	return lf.Names, lf.Rejected, err
}

func writeFile(tb testing.TB, path string, data []byte) string {
	tb.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		tb.Fatal(err)
	}
	return path
}

func TestReadLines(t *testing.T) {
	pad := strings.Repeat(" ", 5000)
	tests := []struct {
		name     string
		content  string
		names    []string
		rejected []rej
		reason   string
	}{
		{"plain", "rz-a-1\nrz-a-2\n", []string{"rz-a-1", "rz-a-2"}, nil, "one name per line, each ending in \\n"},
		{"no final newline", "rz-a-1\nrz-a-2", []string{"rz-a-1"}, nil,
			"a last line without \\n is an append caught in the middle: rz-a-2 may be the start of rz-a-23, and nothing was created under it yet"},
		{"torn name", "rz-a-1\nrz-a-", []string{"rz-a-1"}, nil, "half a name is neither a name nor a rejected line: it is not finished"},
		{"torn junk", "rz-a-1\n$(re", []string{"rz-a-1"}, nil, "nor is the start of a line that will be rejected once whole"},
		{"empty file", "", nil, nil, "no lines, no names"},
		{"blank lines", "\n\nrz-a-1\n\n \t\n\nrz-a-2\n\n", []string{"rz-a-1", "rz-a-2"}, nil, "blank and whitespace-only lines are skipped, not rejected"},
		{"CRLF", "rz-a-1\r\nrz-a-2\r\n\r\n", []string{"rz-a-1", "rz-a-2"}, nil, "a file written on Windows: \\r is trimmed"},
		{"trimmed set", " \t\v\frz-a-1\r \t\v\f\n", []string{"rz-a-1"}, nil, `exactly " \t\r\v\f" is trimmed from both ends`},
		{"no-break space", "\u00a0rz-a-1\nrz-a-2\u00a0\nrz-a-3\n", []string{"rz-a-3"}, []rej{{1, 8}, {2, 8}},
			"U+00A0 is not trimmed (the watchdog trims bytes, not Unicode spaces): those lines are rejected"},
		{"inner space", "rz a\n", nil, []rej{{1, 4}}, "an inner space is kept by the trim, so the line is not a name"},
		{"NUL", "rz-a-1\x00\nrz-\x00a\n\x00\nrz-a-2\n", []string{"rz-a-2"}, []rej{{1, 7}, {2, 5}, {3, 1}},
			"NUL is not whitespace: rz-a-1<NUL> is not rz-a-1"},
		{"shell", "$(reboot)\n`id`\na;b\n-rf\nrz-ok\n", []string{"rz-ok"}, []rej{{1, 9}, {2, 4}, {3, 3}, {4, 3}},
			"lines that would be shell syntax or an option are rejected, the valid one kept"},
		{"too long", strings.Repeat("a", 129) + "\n" + strings.Repeat("b", 128) + "\n", []string{strings.Repeat("b", 128)}, []rej{{1, 129}},
			"128 characters is a name, 129 is not"},
		{"long padding around a name", pad + "rz-a-1" + pad + "\nrz-a-2\n", []string{"rz-a-1", "rz-a-2"}, nil,
			"a name padded past the read buffer is still that name once trimmed: the watchdog script reads it so, and the two readers must agree"},
		{"long blank line", pad + pad + "\nrz-a-1\n", []string{"rz-a-1"}, nil,
			"a whitespace-only line longer than the read buffer is blank, like a short one"},
		{"long padding then junk", "rz-a-1" + pad + "x\nrz-a-2\n", []string{"rz-a-2"}, []rej{{1, 5007}},
			"a name, a long gap and more text is not a name"},
		{"invalid UTF-8", "\xff\xfe\nrz-a-1\n", []string{"rz-a-1"}, []rej{{1, 2}}, "bytes that are not UTF-8 are rejected, not decoded"},
		{"duplicates kept", "rz-a-1\nrz-a-1\n", []string{"rz-a-1", "rz-a-1"}, nil, "the reader reports what is there; de-duplication is the caller's"},
	}
	dir := t.TempDir()
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := writeFile(t, filepath.Join(dir, "r"+strconv.Itoa(i)+ledger.SandboxesExt), []byte(tc.content))
			names, rejected, err := readLines3(p)
			if err != nil {
				t.Fatalf("ReadLines: %v (%s)", err, tc.reason)
			}
			if !slices.Equal(names, tc.names) {
				t.Errorf("names = %q, want %q (%s)", names, tc.names, tc.reason)
			}
			if got := rejs(rejected); !slices.Equal(got, tc.rejected) {
				t.Errorf("rejected = %v, want %v (%s)", got, tc.rejected, tc.reason)
			}
			for _, r := range rejected {
				if r.File != filepath.Base(p) {
					t.Errorf("rejected.File = %q, want %q", r.File, filepath.Base(p))
				}
				if _, err := strconv.Unquote(strings.TrimSuffix(r.Excerpt, "…")); err != nil {
					t.Errorf("excerpt %s is not a Go-quoted string: control bytes could reach a terminal", r.Excerpt)
				}
			}
		})
	}
}

func TestReadLinesMissingFile(t *testing.T) {
	names, rejected, err := readLines3(filepath.Join(t.TempDir(), "nope.sandboxes"))
	if err != nil || names != nil || rejected != nil {
		t.Errorf("ReadLines(missing) = %q, %v, %v; want nothing and no error: a run whose list was pruned has no names", names, rejected, err)
	}
}

func TestReadLinesDirectory(t *testing.T) {
	p := filepath.Join(t.TempDir(), "d.sandboxes")
	if err := os.Mkdir(p, 0o700); err != nil {
		t.Fatal(err)
	}
	if _, _, err := readLines3(p); err == nil {
		t.Error("ReadLines(directory) returned no error: a list that cannot be read must be reported, its run kept")
	}
}

// A line of almost the whole allowed size between two names: rejected with
// its whole length, the names around it still read, and the line never held
// in memory.
func TestReadLinesHugeLine(t *testing.T) {
	const huge = ledger.MaxLineFileSize - 100
	p := filepath.Join(t.TempDir(), "huge.sandboxes")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("rz-before\n"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(bytes.Repeat([]byte("A"), huge)); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("\nrz-after\n"); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	names, rejected, err := readLines3(p)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"rz-before", "rz-after"}; !slices.Equal(names, want) {
		t.Errorf("names = %q, want %q: the names around a hostile line are still read", names, want)
	}
	if got, want := rejs(rejected), []rej{{2, huge}}; !slices.Equal(got, want) {
		t.Errorf("rejected = %v, want %v: the line is reported with its full length", got, want)
	} else if ex := rejected[0].Excerpt; len(ex) > 64 || !strings.HasSuffix(ex, "…") {
		t.Errorf("excerpt %q: want a short, marked excerpt, not the line", ex)
	}
	// The whole process's allocations, so nothing else may run now (this
	// test is not parallel): the reader may allocate its buffer, not the line.
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 256<<10 {
		t.Errorf("ReadLines allocated %d bytes for a %d-byte line: it holds the line in memory", alloc, huge)
	}
}

// A file past either bound is not parsed at all: its run is kept and
// reported, never turned into thousands of names to remove.
func TestReadLinesOversized(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name    string
		content func() []byte
		reason  string
	}{
		{"bytes", func() []byte { return bytes.Repeat([]byte("rz-abc-1\n"), ledger.MaxLineFileSize/9+1) }, "past MaxLineFileSize"},
		{"lines", func() []byte { return bytes.Repeat([]byte("\n"), ledger.MaxLines+1) }, "past MaxLines, though small"},
		{"random bytes", func() []byte {
			b := make([]byte, 4<<20)
			for i := range b {
				b[i] = byte(i*7919 + i/3)
			}
			return b
		}, "100 MB of random bytes once gave 382 'names'; 4 MiB is enough to show it is not read"},
	} {
		p := writeFile(t, filepath.Join(dir, tc.name+".sandboxes"), tc.content())
		lf, err := ledger.ReadLines(p)
		if !errors.Is(err, ledger.ErrOversized) {
			t.Errorf("%s: ReadLines = %d names, %v; want ErrOversized (%s)", tc.name, len(lf.Names), err, tc.reason)
		}
		if len(lf.Names) > 0 {
			t.Errorf("%s: %d names returned from an oversized file", tc.name, len(lf.Names))
		}
	}
	// Exactly at the bounds is still read.
	p := writeFile(t, filepath.Join(dir, "max.sandboxes"), bytes.Repeat([]byte("\n"), ledger.MaxLines))
	if _, err := ledger.ReadLines(p); err != nil {
		t.Errorf("%d blank lines: %v; want them read", ledger.MaxLines, err)
	}
}

// Garbage lines are counted; only a few are kept for a report.
func TestReadLinesRejectedCounted(t *testing.T) {
	content := strings.Repeat("$(x)\n", 5000) + "rz-a-1\n"
	p := writeFile(t, filepath.Join(t.TempDir(), "g.sandboxes"), []byte(content))
	lf, err := ledger.ReadLines(p)
	if err != nil {
		t.Fatal(err)
	}
	if lf.RejectedCount != 5000 || len(lf.Rejected) != ledger.MaxRejectedKept || !slices.Equal(lf.Names, []string{"rz-a-1"}) {
		t.Errorf("got %d names, %d rejected kept of %d counted; want 1, %d of 5000", len(lf.Names), len(lf.Rejected), lf.RejectedCount, ledger.MaxRejectedKept)
	}
}

func TestReadLinesSymlinkNotFollowed(t *testing.T) {
	outside := t.TempDir()
	target := writeFile(t, filepath.Join(outside, "valid.sandboxes"), []byte("rz-outside-1\n"))
	link := filepath.Join(t.TempDir(), "run.sandboxes")
	symlinkOrSkip(t, target, link)
	names, _, err := readLines3(link)
	if err == nil {
		t.Fatalf("ReadLines(symlink) = %q, nil error; want an error: a link is never followed, even to a valid file", names)
	}
	if len(names) != 0 {
		t.Errorf("ReadLines(symlink) returned names %q from the link's target", names)
	}
	if !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("error %q does not say the file is a symbolic link", err)
	}
}

func symlinkOrSkip(tb testing.TB, target, link string) {
	tb.Helper()
	if err := os.Symlink(target, link); err != nil {
		if runtime.GOOS == "windows" {
			tb.Skipf("cannot create a symbolic link here (Windows needs developer mode or a privilege): %v", err)
		}
		tb.Fatal(err)
	}
}

func FuzzReadLines(f *testing.F) {
	for _, s := range []string{
		"", "\n", "rz-a-1\n", "rz-a-1", "rz-a-1\r\n\r\n", " \t\v\frz-a-1\r\n", "\u00a0rz\n", "a\x00\n", "\x00",
		"$(x)\n`y`\n;\n-rf\n", strings.Repeat("a", 129) + "\n", strings.Repeat("a", 128),
		strings.Repeat(" ", 4100) + "rz\n", strings.Repeat("x", 4096) + "\nrz\n", strings.Repeat("x", 4095) + "\n",
		"\xff\xfe\n", "a\rb\n", "\n\n\n", "rz-a-1\nrz-a-1\n",
	} {
		f.Add([]byte(s))
	}
	// In memory: a file per input made the fuzzer disk-bound (~400
	// inputs/s). ReadLines is this reader behind an open that the table
	// tests cover.
	f.Fuzz(func(t *testing.T, data []byte) {
		lf, err := ledger.ReadLinesFrom(bytes.NewReader(data), "f.sandboxes")
		if errors.Is(err, ledger.ErrOversized) {
			if len(data) <= ledger.MaxLineFileSize && strings.Count(string(data), "\n") < ledger.MaxLines {
				t.Fatalf("ReadLines: %v for %d bytes, %d lines", err, len(data), strings.Count(string(data), "\n"))
			}
			return
		}
		if err != nil {
			t.Fatalf("ReadLines: %v", err)
		}
		names, rejected := lf.Names, lf.Rejected
		for _, n := range names {
			if !ledger.ValidName(n) {
				t.Errorf("returned %q, which is not a valid name", n)
			}
		}
		// Independent model: split on \n, trim, classify every line.
		// The piece after the last \n is not a line yet.
		lines := strings.Split(string(data), "\n")
		lines = lines[:len(lines)-1]
		var wantNames []string
		var wantRej []rej
		for i, l := range lines {
			s := strings.Trim(l, " \t\r\v\f")
			switch {
			case s == "":
			case refValidName(s):
				wantNames = append(wantNames, s)
			default:
				wantRej = append(wantRej, rej{i + 1, len(l)})
			}
		}
		if !slices.Equal(names, wantNames) {
			t.Errorf("names = %q, want %q", names, wantNames)
		}
		if lf.RejectedCount != len(wantRej) {
			t.Errorf("RejectedCount = %d, want %d", lf.RejectedCount, len(wantRej))
		}
		if len(wantRej) > ledger.MaxRejectedKept {
			wantRej = wantRej[:ledger.MaxRejectedKept]
		}
		if got := rejs(rejected); !slices.Equal(got, wantRej) {
			t.Errorf("rejected = %v, want %v", got, wantRej)
		}
		for _, r := range rejected {
			if _, err := strconv.Unquote(strings.TrimSuffix(r.Excerpt, "…")); err != nil {
				t.Errorf("excerpt %s is not quoted", r.Excerpt)
			}
		}
	})
}
