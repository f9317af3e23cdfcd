//go:build linux

package e2e_test

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rightsize/rightsize-go/e2e/internal/harness"
	"github.com/rightsize/rightsize-go/internal/ledger"
)

// memCgroup is a memory cgroup made for one test: cgroup v1's memory
// controller, or a cgroup v2 with the memory controller.
type memCgroup struct {
	dir string
	v2  bool
}

// newMemCgroup makes a memory cgroup limited to limit bytes, removed when
// the test ends; it skips the test, saying why, when neither cgroup v1's
// memory controller nor cgroup v2's memory.max can be written here.
func newMemCgroup(t *testing.T, limit int64) *memCgroup {
	t.Helper()
	var why []string
	var nonce [4]byte
	_, _ = rand.Read(nonce[:])
	name := "rz-e2e-oom-" + hex.EncodeToString(nonce[:])
	// cgroup v1: the memory hierarchy's own mount.
	if root := "/sys/fs/cgroup/memory"; exists(filepath.Join(root, "memory.limit_in_bytes")) {
		cg := &memCgroup{dir: filepath.Join(root, name)}
		err := cg.make(map[string]string{"memory.limit_in_bytes": strconv.FormatInt(limit, 10)})
		if err == nil {
			// No swap to escape to, where swap accounting allows saying so.
			_ = os.WriteFile(filepath.Join(cg.dir, "memory.memsw.limit_in_bytes"), []byte(strconv.FormatInt(limit, 10)), 0)
			t.Cleanup(func() { cg.remove(t) })
			return cg
		}
		why = append(why, "cgroup v1: "+err.Error())
	} else {
		why = append(why, "cgroup v1: no memory controller at /sys/fs/cgroup/memory")
	}
	// cgroup v2: unified at /sys/fs/cgroup, or hybrid at .../unified.
	for _, root := range []string{"/sys/fs/cgroup", "/sys/fs/cgroup/unified"} {
		b, err := os.ReadFile(filepath.Join(root, "cgroup.controllers"))
		if err != nil || !strings.Contains(" "+string(b)+" ", " memory") {
			why = append(why, fmt.Sprintf("cgroup v2 at %s: no memory controller", root))
			continue
		}
		cg := &memCgroup{dir: filepath.Join(root, name), v2: true}
		if err := cg.make(map[string]string{"memory.max": strconv.FormatInt(limit, 10)}); err != nil {
			why = append(why, fmt.Sprintf("cgroup v2 at %s: %v", root, err))
			continue
		}
		_ = os.WriteFile(filepath.Join(cg.dir, "memory.swap.max"), []byte("0"), 0)
		t.Cleanup(func() { cg.remove(t) })
		return cg
	}
	t.Skipf("no writable memory cgroup to OOM-kill an owner in: %s", strings.Join(why, "; "))
	return nil
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

func (c *memCgroup) make(files map[string]string) error {
	if err := os.Mkdir(c.dir, 0o755); err != nil {
		return err
	}
	for f, v := range files {
		if err := os.WriteFile(filepath.Join(c.dir, f), []byte(v), 0); err != nil {
			_ = os.Remove(c.dir)
			return fmt.Errorf("write %s: %w", f, err)
		}
	}
	return nil
}

// procs is the file a process writes its pid to to join.
func (c *memCgroup) procs() string { return filepath.Join(c.dir, "cgroup.procs") }

// holds reports whether process pid is in the cgroup.
func (c *memCgroup) holds(pid int) bool {
	b, err := os.ReadFile(c.procs())
	if err != nil {
		return false
	}
	for _, f := range strings.Fields(string(b)) {
		if f == strconv.Itoa(pid) {
			return true
		}
	}
	return false
}

// oomKills is the kernel's count of OOM kills in the cgroup (-1 when it
// does not say).
func (c *memCgroup) oomKills() int {
	f := "memory.oom_control"
	if c.v2 {
		f = "memory.events"
	}
	b, err := os.ReadFile(filepath.Join(c.dir, f))
	if err != nil {
		return -1
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "oom_kill "); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	return -1
}

// remove deletes the cgroup once its processes are gone; whatever still
// runs in it after a while is moved to this process's own cgroup first.
func (c *memCgroup) remove(t *testing.T) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := os.Remove(c.dir)
		if err == nil || errors.Is(err, fs.ErrNotExist) {
			return
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(c.procs())
			for _, pid := range strings.Fields(string(b)) {
				_ = os.WriteFile(filepath.Join(filepath.Dir(c.dir), "cgroup.procs"), []byte(pid), 0)
			}
			if err := os.Remove(c.dir); err != nil {
				t.Errorf("remove cgroup %s: %v (processes: %q)", c.dir, err, b)
			}
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Row 5: the owner, in a memory cgroup with a small limit, allocates until
// the kernel's OOM killer kills it. Its watchdog was spawned by it, so it
// is in the same cgroup, as it would be when a CI job runs the whole test
// step under one limit. The OOM killer picks the process with the highest
// badness in the cgroup, the owner; the watchdog (a shell in a read, about
// 1 MiB) survives, and once the owner's memory is freed its `docker rm -f`
// fits under the limit. This row asserts exactly that: the owner died of
// SIGKILL, the kernel counted an OOM kill, the watchdog was in the cgroup,
// and the watchdog (not a later sweep) removed everything.
func TestRow05OOMKill(t *testing.T) {
	t.Parallel()
	const limit = 256 << 20
	cg := newMemCgroup(t, limit)
	r := newRig(t)
	before := cg.oomKills()
	o := r.start("owner in a 256 MiB memory cgroup", harness.Plan{
		Containers: 2, Networks: 1, Processes: 1, Then: harness.Alloc, CgroupProcs: cg.procs(), AllocMax: 2 << 30,
	}).ready()
	if o.watchdog <= 0 {
		t.Fatalf("no watchdog: %s", o.Output())
	}
	if !cg.holds(o.watchdog) {
		t.Errorf("the watchdog (pid %d) is not in %s: the row is not what it claims", o.watchdog, cg.dir)
	}
	if !o.Wait(exitWithin) {
		t.Fatalf("the owner was not killed while allocating under a %d MiB limit", limit>>20)
	}
	if sig, ok := o.Signaled(); !ok || sig != syscall.SIGKILL {
		t.Errorf("the owner ended with %s, want SIGKILL from the OOM killer\n%s", o.Status(), o.Output())
	}
	after := cg.oomKills()
	if before >= 0 && after <= before {
		t.Errorf("the cgroup counts %d OOM kills (before: %d): the owner's death was not the OOM killer's", after, before)
	}
	took := r.waitGone(o, "the watchdog, after the OOM kill of its owner")
	// The watchdog's last line comes a moment after the run's files, which
	// waitGone saw go, are deleted; and of its two shares (the script's, of
	// the engine's objects; the native one's, of the local processes) the
	// last to end says everything went.
	poll(t, time.Minute, "the watchdog to say it removed everything", func() (bool, string) {
		log := r.watchdogLog(o.run) + "\n" + r.processWatchdogLog(o.run)
		return strings.Contains(log, "everything removed"), "its logs:\n" + log
	})
	// The local process tree went too (waitGone saw none left), ended by
	// the watchdog, whose fate says so.
	ended := 0
	for _, f := range r.fatesOf(o.run) {
		for _, it := range f.Items {
			if it.Kind == "process" && it.Outcome == ledger.Ended {
				ended++
			}
		}
	}
	if ended == 0 {
		t.Errorf("no fate of run %s says its local processes were ended: %v", o.run, r.fatesOf(o.run))
	}
	t.Logf("OOM-killed (%s; cgroup %s counts %d OOM kill(s)); the watchdog, in the same cgroup, survived and removed everything in %s, and ended %d local processes",
		o.Status(), cg.dir, after, ms(took), ended)
}
