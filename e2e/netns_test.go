//go:build linux

package e2e_test

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rightsize/rightsize-go/e2e/internal/harness"
	"github.com/rightsize/rightsize-go/internal/keeper"
	"github.com/rightsize/rightsize-go/internal/proctest"
)

// machineNS is a "machine" of its own: a network namespace M whose only
// way out is a veth pair to the host's namespace, with a /30 of its own.
// Engine B is reached from M through a proxy listening on the host side's
// address, so that everything the machine says to the engine crosses the
// veth, and dropping M's traffic leaves the proxy with connections that
// never see a FIN or an RST.
type machineNS struct {
	name       string // the namespace, /run/netns/<name>
	hostIf     string // the host side of the veth
	hostIP     string // its address, the proxy's
	px         *harness.Proxy
	dockerHost string // tcp://hostIP:port, DOCKER_HOST inside M
}

// ipCmd runs ip (or another command) and fails with what it said.
func ipCmd(args ...string) error {
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// newMachineNS makes a network namespace, its veth and a proxy to engine
// B on the host side of the veth. Everything is removed when the test
// ends, whatever happens: the processes still in M killed (continued
// first), the veth and the namespace deleted, the proxy stopped. It skips
// the test where the machine does not permit network namespaces or veths.
func newMachineNS(t *testing.T, b *engineB) *machineNS {
	t.Helper()
	for _, c := range []string{"ip", "nsenter", "iptables"} {
		if _, err := exec.LookPath(c); err != nil {
			t.Skipf("no %s on PATH: cannot make or cut off a network namespace for the machine", c)
		}
	}
	var rb [6]byte
	if _, err := rand.Read(rb[:]); err != nil {
		t.Fatal(err)
	}
	suffix := hex.EncodeToString(rb[:4])
	m := &machineNS{name: "rz-m-" + suffix, hostIf: "rzh-" + suffix}
	mIf := "rzm-" + suffix // interface names: at most 15 bytes
	// A /30 in 10.213.0.0/16 that no interface of the host has.
	var mIP string
	for i := 0; ; i++ {
		n := binary.BigEndian.Uint16(rb[4:]) &^ 3
		m.hostIP = fmt.Sprintf("10.213.%d.%d", n>>8, n&0xff+1)
		mIP = fmt.Sprintf("10.213.%d.%d", n>>8, n&0xff+2)
		if !addrTaken(n) {
			break
		}
		if i == 20 {
			t.Fatal("no free /30 in 10.213.0.0/16 after 20 tries")
		}
		if _, err := rand.Read(rb[4:]); err != nil {
			t.Fatal(err)
		}
	}
	if err := ipCmd("ip", "netns", "add", m.name); err != nil {
		t.Skipf("cannot make a network namespace for the machine (%v)", err)
	}
	t.Cleanup(func() { m.remove(t) })
	if err := ipCmd("ip", "link", "add", m.hostIf, "type", "veth", "peer", "name", mIf); err != nil {
		t.Skipf("cannot make a veth pair for the machine (%v)", err)
	}
	for _, c := range [][]string{
		{"ip", "link", "set", mIf, "netns", m.name},
		{"ip", "addr", "add", m.hostIP + "/30", "dev", m.hostIf},
		{"ip", "link", "set", m.hostIf, "up"},
		{"ip", "-n", m.name, "addr", "add", mIP + "/30", "dev", mIf},
		{"ip", "-n", m.name, "link", "set", mIf, "up"},
		{"ip", "-n", m.name, "link", "set", "lo", "up"},
	} {
		if err := ipCmd(c...); err != nil {
			t.Fatal(err)
		}
	}
	px, err := harness.StartProxy("tcp", m.hostIP+":0", b.sock)
	if err != nil {
		t.Fatalf("proxy to engine B on %s: %v", m.hostIP, err)
	}
	m.px = px
	m.dockerHost = "tcp://" + px.Addr
	return m
}

// addrTaken reports whether an interface of the host has an address in
// 10.213.n/30.
func addrTaken(n uint16) bool {
	addrs, _ := net.InterfaceAddrs()
	_, want, _ := net.ParseCIDR(fmt.Sprintf("10.213.%d.%d/30", n>>8, n&0xff))
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && (want.Contains(ipn.IP) || ipn.Contains(want.IP)) {
			return true
		}
	}
	return false
}

// pids lists the processes in M.
func (m *machineNS) pids(t *testing.T) []int {
	t.Helper()
	out, err := exec.Command("ip", "netns", "pids", m.name).Output()
	if err != nil {
		t.Fatalf("ip netns pids %s: %v", m.name, err)
	}
	var pids []int
	for _, f := range strings.Fields(string(out)) {
		if pid, err := strconv.Atoi(f); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// signal sends sig to every process in M and returns their pids.
func (m *machineNS) signal(t *testing.T, sig syscall.Signal) []int {
	t.Helper()
	pids := m.pids(t)
	for _, pid := range pids {
		if err := syscall.Kill(pid, sig); err != nil && err != syscall.ESRCH {
			t.Fatalf("%v to %d in %s: %v", sig, pid, m.name, err)
		}
	}
	return pids
}

// in reports whether pid's network namespace is M's.
func (m *machineNS) in(pid int) (bool, error) {
	var want, got syscall.Stat_t
	if err := syscall.Stat("/run/netns/"+m.name, &want); err != nil {
		return false, err
	}
	if err := syscall.Stat("/proc/"+strconv.Itoa(pid)+"/ns/net", &got); err != nil {
		return false, err
	}
	return want.Dev == got.Dev && want.Ino == got.Ino, nil
}

// remove kills what still runs in M (continued first, so that no stopped
// process is left), then deletes the veth and the namespace and stops the
// proxy. A namespace whose processes will not die is an error, not a
// leftover left in silence.
func (m *machineNS) remove(t *testing.T) {
	if m.px != nil {
		m.px.Stop()
	}
	deadline := time.Now().Add(exitWithin)
	for {
		out, _ := exec.Command("ip", "netns", "pids", m.name).Output()
		pids := strings.Fields(string(out))
		if len(pids) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("processes %v still in %s after %s of SIGKILL", pids, m.name, exitWithin)
			break
		}
		for _, f := range pids {
			if pid, err := strconv.Atoi(f); err == nil {
				_ = syscall.Kill(pid, syscall.SIGCONT)
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		time.Sleep(25 * time.Millisecond)
	}
	if _, err := net.InterfaceByName(m.hostIf); err == nil {
		if err := ipCmd("ip", "link", "del", m.hostIf); err != nil {
			t.Errorf("remove the machine's veth: %v", err)
		}
	}
	if err := ipCmd("ip", "netns", "del", m.name); err != nil {
		t.Errorf("remove the machine's namespace: %v", err)
	}
}

// startKeptIn starts a kept owner inside M, on engine B through M's
// proxy, checks that it and its watchdog are in M, and that its keeper
// runs on B.
func startKeptIn(r *rig, m *machineNS, b *engineB, name string, p harness.Plan) *owner {
	r.t.Helper()
	nsenter, err := exec.LookPath("nsenter")
	if err != nil {
		r.t.Skip("no nsenter")
	}
	env := append(keeperEnv(), "DOCKER_HOST="+m.dockerHost,
		// The engine's socket on its host: engine B's, not the
		// host's default one (which is engine A's).
		keeper.EnvSocketOverride+"="+b.sock)
	// Without --fork, nsenter execs: the pid is the owner's.
	o := r.startWith(name, p, func(s *proctest.Spec) {
		s.Argv = append([]string{nsenter, "--net=/run/netns/" + m.name, "--"}, s.Argv...)
	}, env...).on(b.eng).ready()
	if ep := o.get("endpoint"); ep != m.dockerHost {
		r.t.Fatalf("%s records endpoint %q, want %s", name, ep, m.dockerHost)
	}
	if o.watchdog <= 0 {
		r.t.Fatalf("%s has no watchdog: %s", name, o.say())
	}
	if kind := o.get("watchdog.kind"); kind != "native" {
		r.t.Fatalf("%s has a %s watchdog; the keeper's lease needs the native one: %s", name, kind, o.say())
	}
	for what, pid := range map[string]int{"owner": o.Pid(), "watchdog": o.watchdog} {
		in, err := m.in(pid)
		if err != nil || !in {
			r.t.Fatalf("%s's %s (pid %d) in %s: %v (%v)", name, what, pid, m.name, in, err)
		}
		if !slices.Contains(m.pids(r.t), pid) {
			r.t.Fatalf("%s's %s (pid %d) is not among %s's processes %v", name, what, pid, m.name, m.pids(r.t))
		}
	}
	if b, err := os.ReadFile("/proc/" + strconv.Itoa(o.Pid()) + "/cmdline"); err != nil || !strings.Contains(string(b), "TestOwner") {
		r.t.Fatalf("pid %d is not the owner (cmdline %q, %v)", o.Pid(), b, err)
	}
	o.checkKeeper(true, "after its start in "+m.name)
	return o
}

// running reports whether pid is a live process (not a zombie).
func running(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && i+2 < len(s) && s[i+2] != 'Z' && s[i+2] != 'X'
}

// Row 19: the machine in a network namespace of its own (M: the owner and
// its watchdog, nothing else), the engine a second dockerd over TCP in
// another (engine B, as in row 11), the engine-side keeper holding the
// run. The machine dies three ways, and each time engine B loses the
// run's containers and network, then the keeper, while B's bystander
// stays:
//   - killed: SIGKILL to every process in M (the kernel closes their
//     sockets: the keeper's stdin ends);
//   - frozen: SIGSTOP to every process in M (the connections stay open, no
//     heartbeat comes: gone after the lease timeout, not much before);
//   - its traffic dropped: iptables DROP on M's INPUT and OUTPUT, so that
//     no FIN or RST ever reaches the proxy, while the processes in M live
//     on (gone after the lease timeout, not much before).
func TestRow19MachineInNetns(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("network namespaces and veths need root")
	}
	r := newRig(t)
	b := startEngineB(t, r)
	r.bystander(b.eng, "DOCKER_HOST="+b.host)

	// The keeper image is built on first use (the go tool, once per engine
	// and program version); engine B is new, so the first row would pay
	// for it. It is built here, from the same binary, and timed.
	ctx, cancel := context.WithTimeout(context.Background(), readyWithin)
	defer cancel()
	start := time.Now()
	ref, err := keeper.Ensure(ctx, b.eng.Client())
	if err != nil {
		t.Fatalf("the keeper image on engine B: %v", err)
	}
	t.Logf("keeper image %s on engine B in %s", ref, ms(time.Since(start)))

	plan := harness.Plan{Containers: 3, Networks: 1}
	// early is the least time the run may take to go after a freeze: the
	// keeper counts the lease from the last heartbeat, which can come up
	// to a fifth of the lease before the death.
	early := keeperLease - keeperLease/4

	t.Run("killed", func(t *testing.T) {
		r := r.sub(t)
		m := newMachineNS(t, b)
		o := startKeptIn(r, m, b, "owner in "+m.name, plan)
		o.checkAlive("the owner in M, before the kill")
		pids := m.signal(t, syscall.SIGKILL)
		at := time.Now()
		poll(t, exitWithin, "every process of "+m.name+" to be gone", func() (bool, string) {
			left := m.pids(t)
			return len(left) == 0, fmt.Sprintf("still %v", left)
		})
		dead := time.Since(at)
		run, kept := o.engineGone("engine B, after SIGKILL of everything in "+m.name, goneWithin)
		t.Logf("SIGKILL of %d processes in M (gone in %s) → 3 containers and 1 network gone from B %s after, the keeper %s", len(pids), ms(dead), ms(dead+run), ms(dead+kept))
	})

	t.Run("frozen", func(t *testing.T) {
		r := r.sub(t)
		m := newMachineNS(t, b)
		o := startKeptIn(r, m, b, "owner in "+m.name, plan)
		o.checkAlive("the owner in M, before the freeze")
		pids := m.signal(t, syscall.SIGSTOP)
		run, kept := o.engineGone("engine B, after SIGSTOP of everything in "+m.name, keeperLease+goneWithin)
		if run < early {
			t.Fatalf("the run went %s after the freeze, before its lease of %s (less a heartbeat's interval, %s) could end: something else removed it", ms(run), keeperLease, ms(early))
		}
		for _, pid := range pids {
			if !running(pid) {
				t.Errorf("pid %d of the frozen machine is gone: something else than the lease ended the run", pid)
			}
		}
		t.Logf("SIGSTOP of %d processes in M → 3 containers and 1 network gone from B %s after the freeze, the keeper %s (lease %s)", len(pids), ms(run), ms(kept), keeperLease)
	})

	t.Run("traffic dropped", func(t *testing.T) {
		r := r.sub(t)
		m := newMachineNS(t, b)
		o := startKeptIn(r, m, b, "owner in "+m.name, plan)
		o.checkAlive("the owner in M, before its traffic is dropped")
		for _, chain := range []string{"OUTPUT", "INPUT"} {
			if err := ipCmd("ip", "netns", "exec", m.name, "iptables", "-I", chain, "-j", "DROP"); err != nil {
				t.Skipf("cannot drop the machine's traffic: %v", err)
			}
		}
		pids := m.pids(t)
		run, kept := o.engineGone("engine B, after "+m.name+"'s traffic was dropped", keeperLease+goneWithin)
		if run < early {
			t.Fatalf("the run went %s after the machine's traffic was dropped, before its lease of %s (less a heartbeat's interval, %s) could end: something else removed it", ms(run), keeperLease, ms(early))
		}
		// The machine lived through it: the lease ended, not a process.
		for what, pid := range map[string]int{"owner": o.Pid(), "watchdog": o.watchdog} {
			if !running(pid) {
				t.Errorf("the machine's %s (pid %d) died: the run must have gone by the lease, with the machine alive", what, pid)
			}
		}
		if now := m.pids(t); !slices.Equal(slices.Sorted(slices.Values(now)), slices.Sorted(slices.Values(pids))) {
			t.Errorf("the processes in M were %v when its traffic was dropped, %v after the run went", pids, now)
		}
		t.Logf("traffic of M dropped (%d processes alive) → 3 containers and 1 network gone from B %s after, the keeper %s (lease %s)", len(pids), ms(run), ms(kept), keeperLease)
	})
}
