package docker

import (
	"net"
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// besideEngine asks the kernel who serves the engine's socket
// (SO_PEERCRED) and whether that process shares this one's network
// namespace. known is false when it cannot tell: the peer is in another
// pid namespace (pid 0), or its namespace cannot be read.
func besideEngine(socket string) (same, known bool) { return sameNamespace(socket, "net") }

// SameMounts reports whether the process serving the engine's socket sees
// the same mounts as this one, so that a path here is the same path on the
// engine's host; known is false when it cannot tell.
func SameMounts(socket string) (same, known bool) { return sameNamespace(socket, "mnt") }

// sameNamespace asks the kernel who serves socket and whether it shares
// this process's namespace ns (net, mnt).
func sameNamespace(socket, ns string) (same, known bool) {
	c, err := net.DialTimeout("unix", socket, 5*time.Second)
	if err != nil {
		return false, false
	}
	defer c.Close()
	raw, err := c.(*net.UnixConn).SyscallConn()
	if err != nil {
		return false, false
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil || cerr != nil || cred == nil || cred.Pid <= 0 {
		return false, false
	}
	theirs, err := os.Readlink("/proc/" + strconv.Itoa(int(cred.Pid)) + "/ns/" + ns)
	if err != nil {
		return false, false
	}
	mine, err := os.Readlink("/proc/self/ns/" + ns)
	if err != nil {
		return false, false
	}
	return theirs == mine, true
}
