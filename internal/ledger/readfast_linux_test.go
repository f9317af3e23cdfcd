package ledger

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// readRecordFast must give what readRecordSlow gives, for every kind of
// file a runs folder may hold where a record should be.
func TestReadRecordFastMatchesSlow(t *testing.T) {
	dir := t.TempDir()
	put := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	big := bytes.Repeat([]byte(" "), MaxRecordSize)
	paths := map[string]string{
		"a record":           put("rec.json", goRecordBytes()),
		"an empty file":      put("empty.json", nil),
		"511 bytes":          put("511.json", bytes.Repeat([]byte("x"), 511)),
		"512 bytes":          put("512.json", bytes.Repeat([]byte("x"), 512)),
		"the largest record": put("max.json", big),
		"one byte too many":  put("over.json", append(big, ' ')),
		"missing":            filepath.Join(dir, "missing.json"),
		"a directory":        filepath.Join(dir, "dir.json"),
		"a symbolic link":    filepath.Join(dir, "link.json"),
		"a FIFO":             filepath.Join(dir, "fifo.json"),
	}
	if err := os.Mkdir(paths["a directory"], 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(paths["a record"], paths["a symbolic link"]); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(paths["a FIFO"], 0o600); err != nil {
		t.Fatal(err)
	}
	for what, p := range paths {
		data, mt, ok, err := readRecordFast(p)
		if !ok {
			data, mt, err = readRecordSlow(p)
		}
		wdata, wmt, werr := readRecordSlow(p)
		if !bytes.Equal(data, wdata) || !mt.Equal(wmt) || fmt.Sprint(err) != fmt.Sprint(werr) {
			t.Errorf("%s: read %d bytes, %s, %v; want %d bytes, %s, %v", what, len(data), mt.Format(time.RFC3339Nano), err,
				len(wdata), wmt.Format(time.RFC3339Nano), werr)
		}
	}
}

func goRecordBytes() []byte {
	return Record{PID: 4242, StartedISO: "2026-11-29T20:30:38.120Z", Backend: "docker", StartTicks: 6394612, Writer: "go"}.Marshal()
}
