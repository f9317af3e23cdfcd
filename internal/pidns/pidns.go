// Package pidns tells whether this process runs in the host's own pid
// namespace, the only one from which every process of the host can be
// seen, and so the only one from which a record that names no pid
// namespace (the Rust, Kotlin and Node members write none) can be judged.
package pidns

import (
	"os"
	"runtime"
)

// Initial is what /proc/self/ns/pid reads in the host's own pid
// namespace: its inode number is fixed (PROC_PID_INIT_INO) since Linux
// 3.8.
const Initial = "pid:[4026531836]"

// Self is this process's pid namespace as /proc/self/ns/pid names it, ""
// where there is none to read (off Linux).
func Self() string {
	l, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		return ""
	}
	return l
}

// InInitial reports whether this process runs in the host's own pid
// namespace: true off Linux, which has none; false on Linux when it cannot
// be read (as the ledger judges it).
func InInitial() bool {
	return runtime.GOOS != "linux" || Self() == Initial
}
