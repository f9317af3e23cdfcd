//go:build windows

package ledger

import (
	"errors"
	"time"

	"golang.org/x/sys/windows"
)

// busyFor bounds retryBusy: each conflict lasts one read, write or rename
// of a small file by another handle.
const busyFor = 2 * time.Second

// retryBusy calls f again while it fails because another handle holds the
// file: Go opens files without FILE_SHARE_DELETE, so a reader of a line
// file makes a writer's rename over it, or a prune's delete, fail
// (ERROR_ACCESS_DENIED, ERROR_SHARING_VIOLATION), and a rename under way
// makes a reader's open fail. Go's own tools retry the same errors for
// the same reason (cmd/go/internal/robustio).
func retryBusy(f func() error) error {
	deadline := time.Now().Add(busyFor)
	wait := time.Millisecond
	for {
		err := f()
		if err == nil || !errors.Is(err, windows.ERROR_ACCESS_DENIED) && !errors.Is(err, windows.ERROR_SHARING_VIOLATION) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(wait)
		wait = min(2*wait, 50*time.Millisecond)
	}
}
