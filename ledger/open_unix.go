//go:build unix

package ledger

import (
	"errors"
	"io/fs"
	"os"
	"syscall"
)

// OpenFile opens a file of the cache dir (flag and perm as os.OpenFile's).
// Every file rightsize opens there goes through it: the open never follows
// a symbolic link in the last element of path (decided by the kernel, so
// there is no window between a check and the open), never blocks (a FIFO
// squatting a file's name would hold open(2) for ever, past any signal but
// SIGKILL), and anything that is not a regular file is refused with an
// error wrapping ErrNotRegular. The file it returns is in blocking mode.
func OpenFile(path string, flag int, perm os.FileMode) (*os.File, error) {
	fd, _, err := openFD(path, flag, perm)
	if err != nil {
		return nil, err
	}
	// O_NONBLOCK changes nothing for a regular file's reads and writes,
	// but Go's poller takes a non-blocking descriptor for one to register
	// (kqueue, on the BSDs, mis-reports regular files).
	if err := syscall.SetNonblock(fd, false); err != nil {
		syscall.Close(fd)
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	return os.NewFile(uintptr(fd), path), nil
}

// openFD is OpenFile as a bare descriptor, still non-blocking (for reads
// of a regular file that is no matter), with the file's stat; the stat is
// also set when the file was opened and then refused.
func openFD(path string, flag int, perm os.FileMode) (int, syscall.Stat_t, error) {
	var st syscall.Stat_t
	var fd int
	var err error
	for {
		fd, err = syscall.Open(path, flag|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, uint32(perm.Perm()))
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return -1, st, symlinkError(path)
		}
		// A FIFO without a reader, opened to write, fails (ENXIO) rather
		// than block: say what is there.
		if fi, lerr := os.Lstat(path); lerr == nil && fi.Mode().Type() != 0 && fi.Mode()&fs.ModeSymlink == 0 {
			return -1, st, notRegularError(path, fi.Mode().Type())
		}
		return -1, st, &os.PathError{Op: "open", Path: path, Err: err}
	}
	for {
		err = syscall.Fstat(fd, &st)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		syscall.Close(fd)
		return -1, st, &os.PathError{Op: "stat", Path: path, Err: err}
	}
	if uint32(st.Mode)&syscall.S_IFMT != syscall.S_IFREG {
		syscall.Close(fd)
		return -1, st, notRegularError(path, modeType(uint32(st.Mode)))
	}
	return fd, st, nil
}

// modeType is the fs.FileMode type bits of a stat's mode.
func modeType(m uint32) fs.FileMode {
	switch m & syscall.S_IFMT {
	case syscall.S_IFREG:
		return 0
	case syscall.S_IFDIR:
		return fs.ModeDir
	case syscall.S_IFLNK:
		return fs.ModeSymlink
	case syscall.S_IFIFO:
		return fs.ModeNamedPipe
	case syscall.S_IFSOCK:
		return fs.ModeSocket
	case syscall.S_IFCHR:
		return fs.ModeDevice | fs.ModeCharDevice
	case syscall.S_IFBLK:
		return fs.ModeDevice
	}
	return fs.ModeIrregular
}
