//go:build windows

package ledger

import "io/fs"

// checkOwner checks nothing more on Windows: the folder lives under the
// user's profile (%LOCALAPPDATA%), whose ACL other users cannot write
// through by default, and reading an ACL's owner and entries is not cheap
// enough for every start. A RIGHTSIZE_CACHE_DIR elsewhere is the user's
// responsibility (docs/environment.md).
func checkOwner(string, fs.FileInfo) error { return nil }
