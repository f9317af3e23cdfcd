package ledger

import (
	"errors"
	"os"
	"syscall"
	"time"
)

// readRecordFast is readRecordFile in plain system calls: an open and a
// stat (openFD), the reads, a close, without what an *os.File adds to each (its
// registration with the poller, a finalizer), which a sweep of 200,000
// records pays for 200,000 times. It gives up (ok false) before touching
// anything when the file cannot be opened, so that readRecordFile says why
// as it always has; past the open, its errors are those readRecordFile
// would give.
func readRecordFast(path string) (data []byte, mt time.Time, ok bool, err error) {
	fd, st, err := openFD(path, syscall.O_RDONLY, 0)
	if err != nil {
		if errors.Is(err, ErrNotRegular) {
			return nil, time.Unix(st.Mtim.Unix()), true, err
		}
		return nil, time.Time{}, false, nil
	}
	defer syscall.Close(fd)
	mt = time.Unix(st.Mtim.Unix())
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
