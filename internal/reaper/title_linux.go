package reaper

import (
	"strings"
	"unsafe"
)

// setTitle makes argv[1:] the process's whole command line, as `ps` and
// `pkill -f` read it (/proc/self/cmdline), written over argv, the
// arguments the kernel gave (os.Args as the program started); what is
// left over is zeroed. It does nothing unless argv still lies where the
// kernel put it, one string after the other. The strings of argv, and of
// os.Args, change under anyone who reads them after it.
func setTitle(argv []string) {
	if len(argv) < 2 || len(argv[0]) == 0 {
		return
	}
	base := unsafe.StringData(argv[0])
	n := 0
	for _, a := range argv {
		if len(a) == 0 || unsafe.StringData(a) != (*byte)(unsafe.Add(unsafe.Pointer(base), n)) {
			return // not the kernel's block of arguments
		}
		n += len(a) + 1
	}
	title := strings.Join(argv[1:], "\x00")
	if len(title) >= n {
		return
	}
	area := unsafe.Slice(base, n)
	copy(area, title)
	clear(area[len(title):])
}
