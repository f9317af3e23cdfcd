//go:build linux

package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// procWatch follows the kernel's process events (the netlink process
// connector: forks, execs and exits of every process, with the kernel's
// own timestamps), so that the bench can say when a watchdog started its
// engine call without putting anything in the watchdog's path. It needs
// CAP_NET_ADMIN; without it the bench runs and says those figures are
// missing.
type procWatch struct {
	fd int
	mu sync.Mutex
	// mono0 and wall0 are one instant on both clocks, taken at arm: the
	// kernel stamps events with CLOCK_MONOTONIC, the engine with the wall
	// clock, and the two drift apart over minutes.
	mono0  int64
	wall0  time.Time
	armed  bool
	lost   bool
	events []procEvent
}

type procKind int

const (
	evFork procKind = iota + 1
	evExec
	evExit
)

// procEvent is one event. For a fork, pid/tgid are the child's and
// parent the parent's tgid; for an exec, comm is the new program's name
// as read from /proc at once ("" when it was gone already).
type procEvent struct {
	kind      procKind
	mono      int64     // the kernel's stamp
	at        time.Time // the same on the wall clock
	pid, tgid int
	parent    int
	comm      string
}

// The process connector's constants (linux/connector.h, linux/cn_proc.h).
const (
	cnIdxProc         = 1
	cnValProc         = 1
	procCnMcastListen = 1
	procEventFork     = 0x00000001
	procEventExec     = 0x00000002
	procEventExit     = 0x80000000
	cnMsgLen          = 20 // struct cn_msg without its data
)

func newProcWatch() (*procWatch, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.NETLINK_CONNECTOR)
	if err != nil {
		return nil, fmt.Errorf("netlink connector socket: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: cnIdxProc}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("netlink connector bind: %w", err)
	}
	// A burst of process events must not overflow the socket while the
	// reader is descheduled (the machine has 2 cores and a busy engine).
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 8<<20)
	msg := make([]byte, unix.NLMSG_HDRLEN+cnMsgLen+4)
	binary.NativeEndian.PutUint32(msg[0:], uint32(len(msg)))
	binary.NativeEndian.PutUint16(msg[4:], unix.NLMSG_DONE)
	binary.NativeEndian.PutUint32(msg[12:], uint32(os.Getpid()))
	cn := msg[unix.NLMSG_HDRLEN:]
	binary.NativeEndian.PutUint32(cn[0:], cnIdxProc)
	binary.NativeEndian.PutUint32(cn[4:], cnValProc)
	binary.NativeEndian.PutUint16(cn[16:], 4)
	binary.NativeEndian.PutUint32(cn[20:], procCnMcastListen)
	if err := unix.Sendto(fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("process connector listen: %w", err)
	}
	w := &procWatch{fd: fd}
	go w.read()
	return w, nil
}

// monoNow is CLOCK_MONOTONIC in nanoseconds, the kernel's event clock.
func monoNow() int64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

// arm clears the events and starts keeping them; collect stops and
// returns them, with whether some were lost.
func (w *procWatch) arm() {
	if w == nil {
		return
	}
	w.mu.Lock()
	w.events, w.lost, w.armed = w.events[:0], false, true
	w.mono0, w.wall0 = monoNow(), time.Now()
	w.mu.Unlock()
}

func (w *procWatch) collect() ([]procEvent, bool) {
	if w == nil {
		return nil, true
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.armed = false
	out := make([]procEvent, len(w.events))
	for i, ev := range w.events {
		ev.at = w.wall0.Add(time.Duration(ev.mono - w.mono0))
		out[i] = ev
	}
	return out, w.lost
}

func (w *procWatch) read() {
	buf := make([]byte, 1<<16)
	for {
		n, _, err := unix.Recvfrom(w.fd, buf, 0)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			w.mu.Lock()
			w.lost = true
			w.mu.Unlock()
			if errors.Is(err, unix.ENOBUFS) {
				continue
			}
			return
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			continue
		}
		for _, m := range msgs {
			if ev, ok := w.parse(m.Data); ok {
				w.mu.Lock()
				if w.armed {
					w.events = append(w.events, ev)
				}
				w.mu.Unlock()
			}
		}
	}
}

// parse reads struct proc_event out of a cn_msg.
func (w *procWatch) parse(d []byte) (procEvent, bool) {
	if len(d) < cnMsgLen+16+24 {
		return procEvent{}, false
	}
	e := d[cnMsgLen:]
	what := binary.NativeEndian.Uint32(e[0:])
	ts := int64(binary.NativeEndian.Uint64(e[8:]))
	u := e[16:]
	i32 := func(off int) int { return int(int32(binary.NativeEndian.Uint32(u[off:]))) }
	ev := procEvent{mono: ts}
	switch what {
	case procEventFork:
		ev.kind, ev.parent, ev.pid, ev.tgid = evFork, i32(4), i32(8), i32(12)
	case procEventExec:
		ev.kind, ev.pid, ev.tgid = evExec, i32(0), i32(4)
		w.mu.Lock()
		armed := w.armed
		w.mu.Unlock()
		if armed {
			b, _ := os.ReadFile("/proc/" + strconv.Itoa(ev.pid) + "/comm")
			ev.comm = strings.TrimSpace(string(b))
		}
	case procEventExit:
		ev.kind, ev.pid, ev.tgid = evExit, i32(0), i32(4)
	default:
		return procEvent{}, false
	}
	return ev, true
}

// lastExit is when the last thread of process tgid exited.
func lastExit(evs []procEvent, tgid int) (time.Time, bool) {
	var last time.Time
	for _, ev := range evs {
		if ev.kind == evExit && ev.tgid == tgid && ev.at.After(last) {
			last = ev.at
		}
	}
	return last, !last.IsZero()
}

// execOf is the exec of pid, if it is among evs.
func execOf(evs []procEvent, pid int) (procEvent, bool) {
	for _, ev := range evs {
		if ev.kind == evExec && ev.tgid == pid {
			return ev, true
		}
	}
	return procEvent{}, false
}
