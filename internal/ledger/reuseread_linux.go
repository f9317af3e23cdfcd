package ledger

import (
	"errors"
	"os"
	"strconv"
	"syscall"
	"time"
)

// readTime is fi's last read time.
func readTime(fi os.FileInfo) (time.Time, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return time.Time{}, false
	}
	return time.Unix(st.Atim.Unix()), true
}

// openNoATime opens path to read without recording the read (O_NOATIME),
// where the kernel lets this process (the file's owner, or privileged);
// otherwise as openNoFollow does.
func openNoATime(path string) (*os.File, error) {
	f, err := OpenFile(path, os.O_RDONLY|syscall.O_NOATIME, 0)
	if errors.Is(err, syscall.EPERM) {
		return openNoFollow(path)
	}
	return f, err
}

// armFile sets the read time of the file open at path to its write time,
// through /proc/self/fd so that it is that file's, to the nanosecond.
func armFile(path string) error {
	f, err := openNoATime(path)
	if err != nil {
		return err
	}
	defer f.Close()
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		return &os.PathError{Op: "fstat", Path: path, Err: err}
	}
	ts := []syscall.Timespec{st.Mtim, st.Mtim}
	if err := syscall.UtimesNano("/proc/self/fd/"+strconv.Itoa(int(f.Fd())), ts); err != nil {
		return &os.PathError{Op: "utimensat", Path: path, Err: err}
	}
	return nil
}
