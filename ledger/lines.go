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

// ReadLines reads a line file: every valid name, in order, and every line
// that is not one. A missing file is an empty list. A symbolic link is not
// followed: it is an error, as is a file that cannot be read. Lines of any
// length are handled without holding them in memory.
func ReadLines(path string) (names []string, rejected []Rejected, err error) {
	f, err := openNoFollow(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil {
		return nil, nil, fmt.Errorf("line file %s: %w", path, err)
	} else if !fi.Mode().IsRegular() {
		return nil, nil, fmt.Errorf("line file %s is not a regular file (%s): not read", path, fi.Mode().Type())
	}
	names, rejected, err = readLines(f, baseName(path))
	if err != nil {
		return names, rejected, fmt.Errorf("line file %s: %w", path, err)
	}
	return names, rejected, nil
}

// readLines is ReadLines on an open file; base names it in reports.
func readLines(r io.Reader, base string) (names []string, rejected []Rejected, err error) {
	err = scanLines(r, func(n int, l *line) {
		name, blank := l.trimmed()
		switch {
		case blank:
		case name != "" && ValidName(name):
			names = append(names, name)
		default:
			q := strconv.Quote(string(l.head))
			if l.total > len(l.head) {
				q += "…"
			}
			rejected = append(rejected, Rejected{File: base, Line: n, Excerpt: q, Length: l.total})
		}
	})
	return names, rejected, err
}

// line is what scanLines keeps of a line: never the whole of it, so a
// hostile line of any length costs a few hundred bytes.
type line struct {
	total int    // length in bytes, without the '\n'
	head  []byte // the first excerptLen bytes, for a report
	// core is the line from its first non-space byte on, up to coreLen
	// bytes; over is set when a non-space byte comes after that, i.e. when
	// the trimmed line is longer than any name.
	core []byte
	over bool
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

// scanLines calls fn for every line of r, split at '\n' (a last line
// without one included). Lines of any length are read in buffer-sized
// pieces and never held whole: the trim and the name check only need the
// first MaxNameLen+1 bytes after the leading space, and whether anything
// but space follows them.
func scanLines(r io.Reader, fn func(n int, l *line)) error {
	br := bufio.NewReaderSize(r, 4096)
	var l line
	l.head = make([]byte, 0, excerptLen)
	l.core = make([]byte, 0, coreLen)
	for n := 1; ; n++ {
		l.total, l.head, l.core, l.over = 0, l.head[:0], l.core[:0], false
		for {
			chunk, err := br.ReadSlice('\n')
			if len(chunk) > 0 && chunk[len(chunk)-1] == '\n' {
				l.feed(chunk[:len(chunk)-1])
				break
			}
			l.feed(chunk)
			if err == bufio.ErrBufferFull {
				continue
			}
			if err == io.EOF {
				if l.total > 0 {
					fn(n, &l)
				}
				return nil
			}
			return err
		}
		fn(n, &l)
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
