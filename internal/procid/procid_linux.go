package procid

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

	"golang.org/x/sys/unix"

	"github.com/rightsize/rightsize-go/internal/pidns"
)

// userHZ is the unit of /proc/<pid>/stat's start time. The kernel exports
// USER_HZ, which is 100 on every architecture Go supports on Linux; reading
// it properly needs sysconf(_SC_CLK_TCK), i.e. cgo.
const userHZ = 100

var (
	hostOnce  sync.Once
	bootID    string
	pidNS     string
	bootEpoch time.Time // wall-clock instant of boot, to the nanosecond
	bootErr   error
)

func loadHost() {
	hostOnce.Do(func() {
		if b, err := os.ReadFile("/proc/sys/kernel/random/boot_id"); err == nil {
			bootID = strings.TrimSpace(string(b))
		}
		pidNS = pidns.Self()
		bootEpoch, bootErr = bootInstant()
	})
}

// bootInstant is when this boot began on the wall clock: now on the
// realtime clock less now on the boottime clock, the one /proc/<pid>/stat's
// start times count on. /proc/stat's btime gives the same instant in whole
// seconds only, early by up to a second, which used up half of the
// family's 2 s window when compared with a start time taken from `ps`.
func bootInstant() (time.Time, error) {
	var r1, b, r2 unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_REALTIME, &r1); err != nil {
		return btime()
	}
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &b); err != nil {
		return btime()
	}
	if err := unix.ClockGettime(unix.CLOCK_REALTIME, &r2); err != nil {
		return btime()
	}
	mid := (r1.Nano() + r2.Nano()) / 2
	return time.Unix(0, mid-b.Nano()).UTC(), nil
}

// btime reads the boot instant from /proc/stat, to the second.
func btime() (time.Time, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return time.Time{}, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "btime "); ok {
			secs, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				return time.Time{}, fmt.Errorf("/proc/stat btime %q: %w", v, err)
			}
			return time.Unix(secs, 0).UTC(), nil
		}
	}
	return time.Time{}, errors.New("/proc/stat has no btime line")
}

func hostBootID() string       { loadHost(); return bootID }
func hostPidNamespace() string { loadHost(); return pidNS }

// BootTime is when this boot began, or the zero time when unknown.
func BootTime() time.Time { loadHost(); return bootEpoch }

// Proc tells what the platform knows of pid now: no process, an exited
// one, or a live one and its start.
func Proc(pid int) (State, error) {
	if pid <= 0 {
		return State{}, nil
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ESRCH) {
			return State{Exists: true, Unknown: "cannot read /proc/" + strconv.Itoa(pid) + "/stat: " + err.Error()}, nil
		}
		// /proc may hide other users' processes (hidepid): ask the kernel.
		switch err := syscall.Kill(pid, 0); err {
		case syscall.ESRCH:
			return State{}, nil
		case nil, syscall.EPERM:
			return State{Exists: true, Unknown: "/proc does not show pid " + strconv.Itoa(pid)}, nil
		default:
			return State{}, fmt.Errorf("signal 0 to pid %d: %w", pid, err)
		}
	}
	state, ticks, err := parseStat(b)
	if err != nil {
		return State{Exists: true, Unknown: fmt.Sprintf("/proc/%d/stat: %v", pid, err)}, nil
	}
	st := State{Exists: true, Exited: state == 'Z' || state == 'X', Ticks: ticks}
	loadHost()
	if bootErr != nil {
		st.Unknown = "boot time Unknown: " + bootErr.Error()
		return st, nil
	}
	// To the millisecond, as records are written: the tick (10 ms) is the
	// precision anyway.
	st.Start = bootEpoch.Add(time.Duration(ticks) * (time.Second / userHZ)).Truncate(time.Millisecond)
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

// InInitialPidNamespace: only from the host's own pid namespace can every
// process of the host be seen.
func InInitialPidNamespace() bool { return hostPidNamespace() == pidns.Initial }

// nsIndex maps each pid namespace to the host pids of the processes in it,
// read from /proc; complete is false when some process's namespace could
// not be read (another user's, without the privilege).
type nsIndex struct {
	at       time.Time
	byNS     map[string][]int
	complete bool
}

var (
	nsMu    sync.Mutex
	nsCache *nsIndex
)

// nsIndexTTL is how long one reading of /proc serves: a sweep judges many
// runs in a row, and a namespace does not come back to life.
const nsIndexTTL = time.Second

func currentNSIndex() (*nsIndex, error) {
	nsMu.Lock()
	defer nsMu.Unlock()
	if nsCache != nil && time.Since(nsCache.at) < nsIndexTTL {
		return nsCache, nil
	}
	f, err := os.Open("/proc")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	entries, err := f.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	idx := &nsIndex{at: time.Now(), byNS: map[string][]int{}, complete: true}
	for _, e := range entries {
		pid, err := strconv.Atoi(e)
		if err != nil || pid <= 1 {
			// Pid 1 of the /proc read here is the init of the namespace
			// that mounted it, this process's: never in another, and
			// sometimes not readable even by root.
			continue
		}
		l, err := os.Readlink("/proc/" + e + "/ns/pid")
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ESRCH) {
				idx.complete = false // it exists, and we may not look
			}
			continue
		}
		idx.byNS[l] = append(idx.byNS[l], pid)
	}
	nsCache = idx
	return idx, nil
}

// InNamespace looks up the process numbered pid in pid namespace ns
// from the initial pid namespace: among the host's processes in ns, the
// one whose innermost NSpid is pid. nsLive is false when no process is in
// ns any more: the namespace is gone, and every pid of it is dead.
func InNamespace(ns string, pid int) (st State, nsLive bool, err error) {
	idx, err := currentNSIndex()
	if err != nil {
		return State{}, false, err
	}
	hosts := idx.byNS[ns]
	if len(hosts) == 0 {
		if !idx.complete {
			return State{}, false, fmt.Errorf("no process this one may inspect is in %s, and some cannot be inspected", ns)
		}
		return State{}, false, nil
	}
	live := false
	for _, h := range hosts {
		// The index may be a second old: a process of it that is gone, or
		// whose pid now belongs to another namespace, does not count.
		if l, err := os.Readlink("/proc/" + strconv.Itoa(h) + "/ns/pid"); err != nil || l != ns {
			continue
		}
		live = true
		inner, ok := innermostPid(h)
		if !ok || inner != pid {
			continue
		}
		st, err := Proc(h)
		if err != nil {
			return State{}, true, err
		}
		return st, true, nil
	}
	// No process of the namespace has that number (and maybe none is left).
	return State{}, live, nil
}

// innermostPid is the last field of the NSpid line of /proc/<pid>/status:
// the process's pid in its own pid namespace (Linux 4.1 and later).
func innermostPid(pid int) (int, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "NSpid:"); ok {
			f := strings.Fields(v)
			if len(f) == 0 {
				return 0, false
			}
			n, err := strconv.Atoi(f[len(f)-1])
			return n, err == nil
		}
	}
	return 0, false
}
