package ledger

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// The other members of the family write nothing when they adopt a
// keep-alive sandbox: Rust, Kotlin and Node read its registry entry,
// reuse/<hash>.json, then check the engine. That read is the one trace of
// their use, and only where the file system records when a file is read.
// Under Linux's default (relatime) it records the first read after a
// file's last write or change of times, so a sweep that saw a read sets
// the read time back to the write time (arms the entry) to see the next.
// rightsize-go's own reads of an entry do not count: on Linux it reads
// without touching the read time (O_NOATIME); elsewhere its reads count as
// uses, which only keeps a sandbox longer.

// ReuseEntryTimes is what the file system says of a registry entry.
type ReuseEntryTimes struct {
	// Written is when a member last wrote it (its modification time).
	Written time.Time
	// ReadAt is when it was first read since it was written or armed;
	// zero when it was not, or when this system cannot say.
	ReadAt time.Time
}

// StatReuseEntry says when reuse/<hash>.json was written and first read
// since, without reading it.
func StatReuseEntry(cache, hash string) (ReuseEntryTimes, error) {
	if !validHash(hash) {
		return ReuseEntryTimes{}, fmt.Errorf("reuse entry: %q is not a keep-alive hash", hash)
	}
	fi, err := os.Lstat(ReusePath(cache, hash))
	if err != nil {
		return ReuseEntryTimes{}, err
	}
	t := ReuseEntryTimes{Written: fi.ModTime()}
	if at, ok := readTime(fi); ok && at.After(t.Written) {
		t.ReadAt = at
	}
	return t, nil
}

// ArmReuseEntry sets the read time of reuse/<hash>.json back to its write
// time, on the file open (never a file renamed over it meanwhile), so
// that the next read of it is recorded; its content and write time stay
// as they are. errors.ErrUnsupported where this system cannot.
func ArmReuseEntry(cache, hash string) error {
	if !validHash(hash) {
		return fmt.Errorf("reuse entry: %q is not a keep-alive hash", hash)
	}
	return armFile(ReusePath(cache, hash))
}

// readsProbe is a file of rightsize-go's own in the registry folder that
// tells whether its file system records reads.
const readsProbe = ".reads-probe"

// probeEpoch is the read and write time a probe is set to before it is
// read: any read recorded comes after it.
var probeEpoch = time.Unix(1_000_000_000, 0)

// ReuseReadsRecorded reports whether the file system of cache's keep-alive
// registry records reads, by reading a probe file of its own there.
// Where it does not (a noatime mount, Windows's deferred last-access
// times), an adoption by another member leaves no trace at all.
func ReuseReadsRecorded(cache string) (bool, error) {
	dir, err := EnsureSubdir(cache, ReuseDir)
	if err != nil {
		return false, err
	}
	path := filepath.Join(dir, readsProbe)
	f, err := OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return false, err
	}
	fi, err := f.Stat()
	if err == nil && fi.Size() == 0 {
		_, err = f.Write([]byte("r\n"))
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return false, fmt.Errorf("reads probe %s: %w", path, err)
	}
	if err := os.Chtimes(path, probeEpoch, probeEpoch); err != nil {
		return false, fmt.Errorf("reads probe %s: %w", path, err)
	}
	r, err := OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return false, err
	}
	_, err = r.Read(make([]byte, 1))
	r.Close()
	if err != nil {
		return false, fmt.Errorf("reads probe %s: %w", path, err)
	}
	fi, err = os.Lstat(path)
	if err != nil {
		return false, err
	}
	at, ok := readTime(fi)
	return ok && at.After(probeEpoch), nil
}

// ErrReuseEntryRewritten: a registry entry was written again since the
// engine was asked; it belongs to a sandbox created since, and stays.
var ErrReuseEntryRewritten = errors.New("written again since the engine was asked: it is a new sandbox's, kept")

// ReuseLockPath is the creation lock of hash's keep-alive in cache: a
// rightsize-go process holds it while it creates the sandbox and writes
// the registry entry.
func ReuseLockPath(cache, hash string) string {
	return filepath.Join(cache, ReuseDir, hash+".lock")
}

// DeleteReuseEntry deletes the registry entry of hash, whose sandbox is
// gone, unless it was written again at or after since (then
// ErrReuseEntryRewritten: a sandbox created since then is the entry's).
// When a rightsize-go process has made the entry's creation lock, it is
// taken first, waiting at most wait: a process holds it while it creates
// the sandbox and writes the entry.
func DeleteReuseEntry(cache, hash string, since time.Time, wait time.Duration) error {
	if !validHash(hash) {
		return fmt.Errorf("reuse entry: %q is not a keep-alive hash", hash)
	}
	lp := ReuseLockPath(cache, hash)
	if _, err := os.Lstat(lp); err == nil {
		lock := NewFileLock(lp)
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		ok, err := lock.TryLockContext(ctx, 50*time.Millisecond)
		cancel()
		switch {
		case errors.Is(err, ErrNotRegular):
			return err
		case err != nil || !ok:
			return fmt.Errorf("a process is creating its sandbox (it holds %s)", lp)
		}
		// Deleted with the entry: a process that opened it before comes to
		// lock a file no longer at the path, and opens it afresh.
		defer lock.Remove()
	}
	fi, err := os.Lstat(ReusePath(cache, hash))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil // someone else deleted it
	case err == nil && !fi.ModTime().Before(since):
		return ErrReuseEntryRewritten
	}
	return RemoveReuseEntry(cache, hash)
}
