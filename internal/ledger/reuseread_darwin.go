package ledger

import (
	"os"
	"syscall"
	"time"
)

// readTime is fi's last read time.
func readTime(fi os.FileInfo) (time.Time, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return time.Time{}, false
	}
	return time.Unix(st.Atimespec.Unix()), true
}

// openNoATime: macOS has no way to read a file without recording the
// read; rightsize-go's own reads of an entry count as uses there.
func openNoATime(path string) (*os.File, error) { return openNoFollow(path) }

// armFile sets the read time of the file open at path to its write time
// (futimes: to the microsecond, the write time's too).
func armFile(path string) error {
	f, err := openNoFollow(path)
	if err != nil {
		return err
	}
	defer f.Close()
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		return &os.PathError{Op: "fstat", Path: path, Err: err}
	}
	mt := syscall.NsecToTimeval(st.Mtimespec.Nano())
	if err := syscall.Futimes(int(f.Fd()), []syscall.Timeval{mt, mt}); err != nil {
		return &os.PathError{Op: "futimes", Path: path, Err: err}
	}
	return nil
}
