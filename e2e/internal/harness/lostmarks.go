//go:build linux

package harness

import (
	"bytes"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rightsize/rightsize-go/internal/proctest"
	"github.com/rightsize/rightsize-go/internal/proctree"
	"github.com/rightsize/rightsize-go/sandboxtest"
)

// Processes that lose the mark: perl writing its title over its
// environment ($0 as PostgreSQL, nginx and Redis set theirs), and a
// process started with `env -i`. Each is an orphan (a double fork), so
// only its process group ties it to its command.
const (
	perlTitle = `perl -e '$0 = "x" x 4096; sleep 1000'`
	lostPair  = "(" + perlTitle + " &); (env -i sleep 1000 &); "
)

// LostMarkCommands are the commands of Plan.LostMarks, by the key the
// owner says their processes under, with how many processes of each
// group lose the mark.
var LostMarkCommands = []struct {
	Key  string
	Argv []string
	Lost int
}{
	// The leader lives on (and keeps its mark): it proves its group.
	{"lost.leader", []string{"/bin/sh", "-c", lostPair + "exec sleep 1000"}, 2},
	// The leader exits at once: only its owner's holding it unreaped
	// (until the owner dies) proves the group.
	{"lost.gone", []string{"/bin/sh", "-c", lostPair + "exit 0"}, 2},
	// The command itself writes its title over the mark.
	{"lost.perl", []string{"/usr/bin/perl", "-e", `$0 = "x" x 4096; sleep 1000`}, 1},
}

// startLostMarks starts LostMarkCommands (and, with escape, a command
// whose child leaves its group and session without the mark), waits
// until each group's processes have lost their marks, and says their ids
// (proctree.ID) under each key, each command's under key+".command", and
// the escaped child's under "lost.escaped".
func startLostMarks(t *testing.T, escape bool) {
	for _, c := range LostMarkCommands {
		pr := sandboxtest.StartProcess(t, exec.Command(c.Argv[0], c.Argv[1:]...))
		if st, err := proctree.ReadStat(pr.Pid()); err == nil {
			proctest.Say(c.Key+".command", proctree.ID(pr.Pid(), st.StartTicks))
		}
		sayWhenUnmarked(t, c.Key, pr.Pid(), c.Lost)
	}
	if escape {
		pr := sandboxtest.StartProcess(t, exec.Command("/bin/sh", "-c", "env -i setsid sleep 1002 & exec sleep 1000"))
		var id string
		proctest.WaitUntil(t, time.Minute, "the escaped child", func() bool {
			for _, pid := range allPIDs() {
				st, err := proctree.ReadStat(pid)
				if err == nil && st.Ppid == pr.Pid() && st.Session == pid && !marked(pid) {
					id = proctree.ID(pid, st.StartTicks)
					return true
				}
			}
			return false
		})
		proctest.Say("lost.escaped", id)
	}
}

// settledComms are the commands of a process that lost its mark for good:
// perl under its new title (comm keeps its first 15 bytes) and the sleep
// `env -i` became. A subshell on its way out, or a process between fork
// and exec, also shows an empty environment for a moment: it is not one.
var settledComms = []string{strings.Repeat("x", 15), "sleep"}

// sayWhenUnmarked waits until group pgid has n processes without the
// mark, each settled (settledComms), and says their ids under key.
func sayWhenUnmarked(t *testing.T, key string, pgid, n int) {
	var ids []string
	proctest.WaitUntil(t, time.Minute, key+": the processes that lose the mark", func() bool {
		ids = ids[:0]
		for _, pid := range allPIDs() {
			st, err := proctree.ReadStat(pid)
			if err == nil && st.Pgrp == pgid && !st.Zombie() && !marked(pid) && slices.Contains(settledComms, st.Comm) {
				ids = append(ids, proctree.ID(pid, st.StartTicks))
			}
		}
		return len(ids) == n
	})
	slices.Sort(ids)
	proctest.Say(key, strings.Join(ids, ","))
}

// marked reports whether pid's environment carries the mark.
func marked(pid int) bool {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	return bytes.Contains(b, []byte(proctree.EnvMark+"="))
}

func allPIDs() []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

// Alive reports whether the process of id (proctree.ID) is still there
// and not a zombie: the same pid with the same start.
func Alive(id string) bool {
	pid, ticks, ok := proctree.ParseID(id)
	if !ok {
		return false
	}
	st, err := proctree.ReadStat(pid)
	return err == nil && !st.Zombie() && st.StartTicks == ticks
}

// Exists reports whether the process of id is still there, a zombie
// included (its number is not free yet).
func Exists(id string) bool {
	pid, ticks, ok := proctree.ParseID(id)
	if !ok {
		return false
	}
	st, err := proctree.ReadStat(pid)
	return err == nil && st.StartTicks == ticks
}
