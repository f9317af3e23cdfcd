package proctest

import (
	"errors"
	"fmt"
	"os"
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
