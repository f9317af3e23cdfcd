package ledger

import (
	"context"
	"io/fs"
	"os"
	"runtime"
	"sync"
	"time"
)

// A FileLock is an advisory lock on one file of the cache dir, shared or
// exclusive: flock(2), or LockFileEx on Windows. Its file is opened by
// OpenFile, created with mode 0600 when missing, at the first lock and
// closed by Unlock: a FIFO, a link or a directory at its path is an error
// (ErrNotRegular), never a wait.
//
// Like flock's, a lock belongs to the open file, not to the process: two
// FileLocks on one path in one process exclude each other.
//
// It is the module's own, not gofrs/flock: that one opens its path with
// os.OpenFile (following a link, waiting on a FIFO), and does not take
// the lock anew when a holder deleted the file (Remove), as a run's claim
// needs.
type FileLock struct {
	path string
	mu   sync.Mutex
	f    *os.File
	held int // 0, lockShared or lockExclusive
}

const (
	lockShared = 1 + iota
	lockExclusive
)

// NewFileLock returns the lock of the file at path; nothing is opened yet.
func NewFileLock(path string) *FileLock { return &FileLock{path: path} }

// Held reports whether the lock is held, shared or exclusively.
func (l *FileLock) Held() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.held != 0
}

// Path is the lock file's path.
func (l *FileLock) Path() string { return l.path }

// TryLock takes the lock exclusively unless another holder has it: false,
// with no error, when one has.
func (l *FileLock) TryLock() (bool, error) { return l.try(lockExclusive) }

// TryLockContext tries TryLock every retry until it succeeds, fails, or
// ctx ends (then false and ctx's error).
func (l *FileLock) TryLockContext(ctx context.Context, retry time.Duration) (bool, error) {
	return l.tryContext(ctx, retry, lockExclusive)
}

// TryRLockContext is TryLockContext for the shared lock.
func (l *FileLock) TryRLockContext(ctx context.Context, retry time.Duration) (bool, error) {
	return l.tryContext(ctx, retry, lockShared)
}

func (l *FileLock) tryContext(ctx context.Context, retry time.Duration, how int) (bool, error) {
	for {
		ok, err := l.try(how)
		if ok || err != nil {
			return ok, err
		}
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-time.After(retry):
		}
	}
}

// try takes the lock in mode how. Changing the mode of a lock held is
// not atomic (flock(2) drops the old lock first): when it fails, the lock
// is no longer held at all.
//
// A holder may delete the lock file before it unlocks it (Remove): a lock
// then taken on the file opened before that deletion guards nothing, so a
// fresh lock is only taken on the file still at the path.
func (l *FileLock) try(how int) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.held == how {
		return true, nil
	}
	for attempt := 0; ; attempt++ {
		if l.f == nil {
			f, err := OpenFile(l.path, os.O_RDWR|os.O_CREATE, 0o600)
			if err != nil {
				return false, err
			}
			l.f = f
		}
		ok, err := lockFile(l.f, how == lockExclusive)
		if err != nil || !ok {
			l.close()
			return false, err
		}
		if l.held == 0 && !l.current() {
			l.close()
			if attempt < 10 {
				continue
			}
			return false, nil // holders keep replacing it: as if held
		}
		l.held = how
		return true, nil
	}
}

// current reports whether the file open is the one at the path.
func (l *FileLock) current() bool {
	held, err := l.f.Stat()
	if err != nil {
		return false
	}
	now, err := os.Lstat(l.path)
	return err == nil && os.SameFile(held, now)
}

// close releases the lock, if held, and closes its file.
func (l *FileLock) close() error {
	if l.f == nil {
		return nil
	}
	err := unlockFile(l.f)
	if cerr := l.f.Close(); err == nil {
		err = cerr
	}
	l.f, l.held = nil, 0
	return err
}

// Unlock releases the lock and closes its file; a lock not held is no
// error.
func (l *FileLock) Unlock() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.close()
}

// Remove deletes the lock file, then releases the lock: whoever opened
// the file meanwhile finds it gone once it holds it, and locks the next
// one. (Windows deletes no file that is open: there the lock is released
// first, and a process that opens the file in between makes the deletion
// fail, which is no error: the file is that process's now.)
func (l *FileLock) Remove() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if runtime.GOOS == "windows" {
		err := l.close()
		os.Remove(l.path)
		return err
	}
	if l.f != nil && l.current() {
		os.Remove(l.path)
	}
	return l.close()
}

// Stat is the lock file's, as opened: with os.SameFile, whether the file
// now at its path is the one locked.
func (l *FileLock) Stat() (fs.FileInfo, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return nil, &fs.PathError{Op: "stat", Path: l.path, Err: fs.ErrClosed}
	}
	return l.f.Stat()
}
