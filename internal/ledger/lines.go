package ledger

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
)

// Rejected is a line of a line file that is not a valid name. It is
// reported, and never handed to anything that runs a command.
type Rejected struct {
	File string // base name of the line file
	Line int    // 1-based line number
	// Excerpt is the start of the line, quoted with strconv.Quote so that
	// control characters and invalid UTF-8 cannot reach a terminal raw.
	Excerpt string
	Length  int // length of the whole line in bytes
}

func (r Rejected) String() string {
	return fmt.Sprintf("%s:%d: rejected %d-byte line %s", r.File, r.Line, r.Length, r.Excerpt)
}

const excerptLen = 40

// Bounds of a line file. A real one lists a few dozen names; a file past
// either bound was not written by a member of the family, or not for one
// run: its run is kept and reported as oversized, never parsed into
// thousands of names to remove.
const (
	MaxLineFileSize = 1 << 20
	MaxLines        = 10_000
	// MaxRejectedKept is how many rejected lines a read keeps, for a
	// report; the rest are only counted.
	MaxRejectedKept = 10
)

// ErrOversized is what reading a line file past MaxLineFileSize or
// MaxLines wraps.
var ErrOversized = errors.New("oversized")

// LineFile is what a line file holds.
type LineFile struct {
	// Names are the valid names, in order.
	Names []string
	// Rejected are the first MaxRejectedKept lines that are not valid
	// names; RejectedCount counts them all.
	Rejected      []Rejected
	RejectedCount int
}

// ReadLines reads a line file: every valid name, in order, and the lines
// that are not one. A missing file is an empty list. A symbolic link is not
// followed: it is an error, as is a file that cannot be read, and one past
// MaxLineFileSize or MaxLines (ErrOversized). Lines of any length are
// handled without holding them in memory.
func ReadLines(path string) (LineFile, error) {
	f, err := openNoFollow(path)
	if errors.Is(err, fs.ErrNotExist) {
		return LineFile{}, nil
	}
	if err != nil {
		return LineFile{}, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil {
		return LineFile{}, fmt.Errorf("line file %s: %w", path, err)
	} else if fi.Size() > MaxLineFileSize {
		return LineFile{}, fmt.Errorf("line file %s is %d bytes, more than the %d a run's list can be: %w, not read", path, fi.Size(), MaxLineFileSize, ErrOversized)
	}
	lf, err := readLines(io.LimitReader(f, MaxLineFileSize+1), baseName(path))
	if err != nil {
		return LineFile{}, fmt.Errorf("line file %s: %w", path, err)
	}
	return lf, nil
}

// readLines is ReadLines on an open file; base names it in reports.
func readLines(r io.Reader, base string) (lf LineFile, err error) {
	size := 0
	err = scanLines(r, func(n int, l *line) error {
		size += l.total + 1
		if n > MaxLines || size > MaxLineFileSize+1 {
			return fmt.Errorf("more than %d lines or %d bytes: %w", MaxLines, MaxLineFileSize, ErrOversized)
		}
		if !l.ended {
			// Every member of the family ends each line with '\n' in the
			// same write, and writes a name before it asks for the thing:
			// a last line without one is an append (or a rewrite) caught
			// in the middle, or left by a writer killed in one. It may be
			// only the start of a name, and nothing was created under it.
			return nil
		}
		name, blank := l.trimmed()
		switch {
		case blank:
		case name != "" && ValidName(name):
			lf.Names = append(lf.Names, name)
		default:
			lf.RejectedCount++
			if len(lf.Rejected) >= MaxRejectedKept {
				return nil
			}
			q := strconv.Quote(string(l.head))
			if l.total > len(l.head) {
				q += "…"
			}
			lf.Rejected = append(lf.Rejected, Rejected{File: base, Line: n, Excerpt: q, Length: l.total})
		}
		return nil
	})
	if err != nil {
		return LineFile{}, err
	}
	return lf, nil
}

// line is what scanLines keeps of a line: never the whole of it, so a
// hostile line of any length costs a few hundred bytes.
type line struct {
	total int    // length in bytes, without the '\n'
	head  []byte // the first excerptLen bytes, for a report
	// core is the line from its first non-space byte on, up to coreLen
	// bytes; over is set when a non-space byte comes after that, i.e. when
	// the trimmed line is longer than any name.
	core  []byte
	over  bool
	ended bool // the line ends in '\n'
}

// coreLen is enough for the longest name plus one byte, so that a name
// followed by any amount of trailing space still trims to the name.
const coreLen = MaxNameLen + 1

func (l *line) feed(b []byte) {
	l.total += len(b)
	if room := excerptLen - len(l.head); room > 0 {
		l.head = append(l.head, b[:min(room, len(b))]...)
	}
	if l.over {
		return
	}
	if len(l.core) == 0 {
		b = bytes.TrimLeft(b, lineSpace)
	}
	if room := coreLen - len(l.core); len(b) > room {
		if len(bytes.TrimLeft(b[room:], lineSpace)) > 0 {
			l.over = true
			return
		}
		b = b[:room]
	}
	l.core = append(l.core, b...)
}

// trimmed returns the line without lineSpace at either end, when that is
// short enough to be a name, and whether the line is blank.
func (l *line) trimmed() (s string, blank bool) {
	if l.over {
		return "", false
	}
	core := bytes.TrimRight(l.core, lineSpace)
	return string(core), len(core) == 0
}

// scanLines calls fn for every line of r, until fn returns an error, split at '\n' (a last line
// without one included, with l.ended false). Lines of any length are read in buffer-sized
// pieces and never held whole: the trim and the name check only need the
// first MaxNameLen+1 bytes after the leading space, and whether anything
// but space follows them.
func scanLines(r io.Reader, fn func(n int, l *line) error) error {
	br := bufio.NewReaderSize(r, 4096)
	var l line
	l.head = make([]byte, 0, excerptLen)
	l.core = make([]byte, 0, coreLen)
	for n := 1; ; n++ {
		l.total, l.head, l.core, l.over, l.ended = 0, l.head[:0], l.core[:0], false, false
		for {
			chunk, err := br.ReadSlice('\n')
			if len(chunk) > 0 && chunk[len(chunk)-1] == '\n' {
				l.feed(chunk[:len(chunk)-1])
				l.ended = true
				break
			}
			l.feed(chunk)
			if err == bufio.ErrBufferFull {
				continue
			}
			if err == io.EOF {
				if l.total > 0 {
					return fn(n, &l)
				}
				return nil
			}
			return err
		}
		if err := fn(n, &l); err != nil {
			return err
		}
	}
}

func baseName(p string) string {
	for i := len(p) - 1; i >= 0; i-- {
		if os.IsPathSeparator(p[i]) {
			return p[i+1:]
		}
	}
	return p
}
