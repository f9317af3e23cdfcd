package proctest

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
)

// VmRSSKiB is a process's resident set in KiB, as Linux's
// /proc/<pid>/status says; elsewhere it returns an error.
func VmRSSKiB(pid int) (int, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			return strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
		}
	}
	return 0, errors.New("no VmRSS line")
}

// CPUTicks is a process's user plus system CPU time in clock ticks
// (fields 14 and 15 of Linux's /proc/<pid>/stat); elsewhere an error.
func CPUTicks(pid int) (int, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %q", pid, s)
	}
	u, err1 := strconv.Atoi(f[11])
	st, err2 := strconv.Atoi(f[12])
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %q", pid, s)
	}
	return u + st, nil
}

// WaitingOnStdin reports whether a process sleeps reading its stdin, as
// Linux's /proc/<pid>/task/<tid>/syscall shows it: one of its threads in
// read(0, …) (a Go program reads on whichever thread its goroutine runs),
// or in poll(2) with no timeout (busybox's read builtin polls first).
// known is false where the architecture's syscall numbers are not known
// here.
func WaitingOnStdin(pid int) (waiting, known bool) {
	known = runtime.GOARCH == "amd64" || runtime.GOARCH == "arm64"
	if !known {
		return false, known
	}
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return false, known
	}
	for _, task := range tasks {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/syscall", pid, task.Name()))
		if err != nil {
			continue
		}
		f := strings.Fields(string(b))
		if len(f) < 4 {
			continue
		}
		switch runtime.GOARCH + " " + f[0] {
		case "amd64 0", "arm64 63": // read
			if f[1] == "0x0" {
				return true, known
			}
		case "amd64 7": // poll(fds, 1, -1)
			if f[2] == "0x1" && f[3] == "0xffffffff" {
				return true, known
			}
		}
	}
	return false, known
}
