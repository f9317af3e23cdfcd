//go:build !linux

package ledger

import "os"

// replaceFile moves tmp to path, replacing path atomically.
func replaceFile(tmp, path string) error {
	return retryBusy(func() error { return os.Rename(tmp, path) })
}
