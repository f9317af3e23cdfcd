//go:build windows

package ledger

import "os"

// OpenFile opens a file of the cache dir (flag and perm as os.OpenFile's),
// unless its name is a symbolic link or another reparse point, and refuses
// anything that is not a regular file (ErrNotRegular). Windows has no
// O_NOFOLLOW; the check and the open are two steps, which is acceptable
// for a folder only its user writes. Windows keeps named pipes out of the
// file system, so nothing there blocks an open; another handle's rename
// or delete under way does, for a moment, and the open is tried again
// (retryBusy).
func OpenFile(path string, flag int, perm os.FileMode) (*os.File, error) {
	if fi, err := os.Lstat(path); err == nil && fi.Mode()&(os.ModeSymlink|os.ModeIrregular) != 0 {
		return nil, symlinkError(path)
	}
	var f *os.File
	err := retryBusy(func() (err error) {
		f, err = os.OpenFile(path, flag, perm)
		return err
	})
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, notRegularError(path, fi.Mode().Type())
	}
	return f, nil
}
