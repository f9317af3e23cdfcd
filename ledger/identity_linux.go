package ledger

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// userHZ is the unit of /proc/<pid>/stat's start time. The kernel exports
// USER_HZ, which is 100 on every architecture Go supports on Linux; reading
// it properly needs sysconf(_SC_CLK_TCK), i.e. cgo.
const userHZ = 100

var (
	hostOnce  sync.Once
	bootID    string
	pidNS     string
	bootEpoch time.Time // wall-clock instant of boot, whole seconds (btime)
	bootErr   error
)

func loadHost() {
	hostOnce.Do(func() {
		if b, err := os.ReadFile("/proc/sys/kernel/random/boot_id"); err == nil {
			bootID = strings.TrimSpace(string(b))
		}
		if l, err := os.Readlink("/proc/self/ns/pid"); err == nil {
			pidNS = l
		}
		b, err := os.ReadFile("/proc/stat")
		if err != nil {
			bootErr = err
			return
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "btime "); ok {
				secs, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				if err != nil {
					bootErr = fmt.Errorf("/proc/stat btime %q: %w", v, err)
					return
				}
				bootEpoch = time.Unix(secs, 0).UTC()
				return
			}
		}
		bootErr = errors.New("/proc/stat has no btime line")
	})
}

func hostBootID() string       { loadHost(); return bootID }
func hostPidNamespace() string { loadHost(); return pidNS }

// bootTime is when this boot began, or the zero time when unknown.
func bootTime() time.Time { loadHost(); return bootEpoch }

func lookupProc(pid int) (procState, error) {
	if pid <= 0 {
		return procState{}, nil
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ESRCH) {
			return procState{exists: true, unknown: "cannot read /proc/" + strconv.Itoa(pid) + "/stat: " + err.Error()}, nil
		}
		// /proc may hide other users' processes (hidepid): ask the kernel.
		switch err := syscall.Kill(pid, 0); err {
		case syscall.ESRCH:
			return procState{}, nil
		case nil, syscall.EPERM:
			return procState{exists: true, unknown: "/proc does not show pid " + strconv.Itoa(pid)}, nil
		default:
			return procState{}, fmt.Errorf("signal 0 to pid %d: %w", pid, err)
		}
	}
	state, ticks, err := parseStat(b)
	if err != nil {
		return procState{exists: true, unknown: fmt.Sprintf("/proc/%d/stat: %v", pid, err)}, nil
	}
	st := procState{exists: true, exited: state == 'Z' || state == 'X', ticks: ticks}
	loadHost()
	if bootErr != nil {
		st.unknown = "boot time unknown: " + bootErr.Error()
		return st, nil
	}
	st.start = bootEpoch.Add(time.Duration(ticks) * (time.Second / userHZ))
	return st, nil
}

// parseStat returns the state (field 3) and start time (field 22) of a
// /proc/<pid>/stat line. The command name (field 2) may hold spaces and
// parentheses, so fields are counted from after its last ')'.
func parseStat(b []byte) (state byte, ticks uint64, err error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, errors.New("no ')' after the command name")
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return 0, 0, fmt.Errorf("%d fields after the command name, want at least 20", len(f))
	}
	if len(f[0]) != 1 {
		return 0, 0, fmt.Errorf("state %q", f[0])
	}
	ticks, err = strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("start time %q: %w", f[19], err)
	}
	return f[0][0], ticks, nil
}
