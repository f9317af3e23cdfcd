package ledger

import (
	"errors"
	"os"
	"syscall"
	"time"
)

// readRecordFast is readRecordFile in plain system calls: an open, a
// stat, the reads, a close, without what an *os.File adds to each (its
// registration with the poller, a finalizer), which a sweep of 200,000
// records pays for 200,000 times. It gives up (ok false) before touching
// anything when the file cannot be opened, so that readRecordFile says why
// as it always has; past the open, its errors are those readRecordFile
// would give.
func readRecordFast(path string) (data []byte, mt time.Time, ok bool, err error) {
	var fd int
	for {
		fd, err = syscall.Open(path, syscall.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		return nil, time.Time{}, false, nil
	}
	defer syscall.Close(fd)
	var st syscall.Stat_t
	for {
		err = syscall.Fstat(fd, &st)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		return nil, time.Time{}, true, &os.PathError{Op: "stat", Path: path, Err: err}
	}
	mt = time.Unix(st.Mtim.Unix())
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return nil, mt, true, notRegular(path)
	}
	if st.Size > MaxRecordSize {
		return nil, mt, true, recordTooBig(st.Size)
	}
	// Room for the whole file and one byte more, so that the read that
	// finds the end needs no larger buffer; never more than the most a
	// record is read to (the file may grow meanwhile).
	data = make([]byte, 0, min(max(st.Size+1, 512), MaxRecordSize+1))
	for len(data) < MaxRecordSize+1 {
		if len(data) == cap(data) {
			data = append(data, 0)[:len(data)]
		}
		n, err := syscall.Read(fd, data[len(data):min(cap(data), MaxRecordSize+1)])
		switch {
		case errors.Is(err, syscall.EINTR):
			continue
		case err != nil:
			return nil, mt, true, &os.PathError{Op: "read", Path: path, Err: err}
		case n <= 0:
			return data, mt, true, nil
		}
		data = data[:len(data)+n]
	}
	return data, mt, true, nil
}
