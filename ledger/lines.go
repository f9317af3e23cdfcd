package ledger

import (
	"bufio"
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
	base := baseName(path)
	err = scanLines(f, func(n int, line []byte, total int) {
		s := trimLine(string(line))
		if total == len(line) && s == "" {
			return
		}
		if total == len(line) && ValidName(s) {
			names = append(names, s)
			return
		}
		ex := line
		if len(ex) > excerptLen {
			ex = ex[:excerptLen]
		}
		q := strconv.Quote(string(ex))
		if total > len(ex) {
			q += "…"
		}
		rejected = append(rejected, Rejected{File: base, Line: n, Excerpt: q, Length: total})
	})
	if err != nil {
		return names, rejected, fmt.Errorf("line file %s: %w", path, err)
	}
	return names, rejected, nil
}

// scanLines calls fn for every line of r (without its '\n'). A line longer
// than the reader's buffer is cut: fn gets its start and its total length.
// A name is never that long, so only rejected lines are cut.
func scanLines(r io.Reader, fn func(n int, head []byte, total int)) error {
	br := bufio.NewReaderSize(r, 4096)
	n := 0
	for {
		chunk, err := br.ReadSlice('\n')
		if len(chunk) == 0 && err == io.EOF {
			return nil
		}
		n++
		total := len(chunk)
		var head []byte
		if err == bufio.ErrBufferFull {
			head = append([]byte(nil), chunk[:excerptLen]...)
			for err == bufio.ErrBufferFull {
				chunk, err = br.ReadSlice('\n')
				total += len(chunk)
			}
		} else {
			head = chunk
		}
		if err != nil && err != io.EOF {
			return err
		}
		if total > 0 && len(chunk) > 0 && chunk[len(chunk)-1] == '\n' {
			total--
			if len(head) == total+1 {
				head = head[:total]
			}
		}
		fn(n, head, total)
		if err == io.EOF {
			return nil
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
