//go:build linux

package e2e_test

import (
	"bufio"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/rightsize/rightsize-go/e2e/internal/harness"
)

// engineB is a second Docker engine started by the test: its own dockerd
// and containerd, data-root, exec-root and pid file, in a network
// namespace of its own, reached on a loopback TCP port.
//
// Why a network namespace: every dockerd manages the host's default bridge
// by name. Started with --bridge=none, dockerd 20.10 deletes the host's
// docker0 at once (removeDefaultBridgeInterface, "the --bridge=none use
// case"); started without it, it adopts docker0 and may delete it when it
// stops. Either way the main engine loses its default network, for
// everyone. In a network namespace of its own the second daemon has no
// docker0 to touch. It listens on a unix socket (which crosses namespaces
// as a file), and a forwarder in this process gives it its TCP address.
//
// Where the rig's engine is Podman (the Podman gate), engine B is a
// Podman service of its own (root, run root, network configuration and
// temporary folders in the test's folder) in a network namespace of its
// own too, so that a row runs against the same kind of engine.
type engineB struct {
	podman bool
	dir    string
	sock   string
	host   string // tcp://127.0.0.1:port
	eng    *harness.Engine
	cmd    *exec.Cmd
	done   chan struct{}
	px     *harness.Proxy
}

// hostBridgeUp reports whether the host's docker0 exists.
func hostBridgeUp() bool {
	_, err := net.InterfaceByName("docker0")
	return err == nil
}

// startEngineB starts engine B and loads the rig's image into it; it is
// stopped, its processes killed, its mounts undone and its folders removed
// when the test ends. It skips the test when dockerd or unshare --net is
// not available.
func startEngineB(t *testing.T, r *rig) *engineB {
	t.Helper()
	podman := isPodman(r.eng)
	dockerd, err := exec.LookPath("dockerd")
	if err != nil && !podman {
		t.Skip("no dockerd on PATH: no second engine to start")
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Skip("no unshare: a second dockerd outside a network namespace of its own would delete the host's docker0")
	}
	if out, err := exec.Command(unshare, "--net", "true").CombinedOutput(); err != nil {
		t.Skipf("unshare --net is not permitted (%v: %s): a second dockerd outside a network namespace of its own would delete the host's docker0", err, strings.TrimSpace(string(out)))
	}
	bridge := hostBridgeUp()
	dir, err := os.MkdirTemp("", "rz-e2e-b-")
	if err != nil {
		t.Fatal(err)
	}
	b := &engineB{dir: dir, sock: filepath.Join(dir, "engine.sock"), done: make(chan struct{})}
	for _, d := range []string{"data", "exec"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	// Its own (empty) configuration, whatever /etc/docker/daemon.json says.
	if err := os.WriteFile(filepath.Join(dir, "daemon.json"), []byte("{}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	logf, err := os.Create(filepath.Join(dir, "dockerd.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	b.cmd = exec.Command(unshare, "--net", "--", dockerd,
		"--config-file", filepath.Join(dir, "daemon.json"),
		"--host", "unix://"+b.sock,
		"--data-root", filepath.Join(dir, "data"),
		"--exec-root", filepath.Join(dir, "exec"),
		"--pidfile", filepath.Join(dir, "dockerd.pid"),
		"--bridge=none", "--iptables=false", "--ip-masq=false", "--ip-forward=false",
		"--containerd-namespace", "rz-e2e-b", "--containerd-plugins-namespace", "rz-e2e-b-plugins",
	)
	if b.podman = podman; podman {
		podman, err := exec.LookPath("podman")
		if err != nil {
			t.Skip("the rig's engine is Podman, and no podman is on PATH to start engine B with")
		}
		for _, d := range []string{"tmp", "net"} {
			if err := os.Mkdir(filepath.Join(dir, d), 0o700); err != nil {
				t.Fatal(err)
			}
		}
		b.cmd = exec.Command(unshare, "--net", "--", podman,
			"--root", filepath.Join(dir, "data"), "--runroot", filepath.Join(dir, "exec"),
			"--tmpdir", filepath.Join(dir, "tmp"), "--network-config-dir", filepath.Join(dir, "net"),
			"--cgroup-manager", "cgroupfs", "--events-backend", "file",
			"system", "service", "--time=0", "unix://"+b.sock)
	}
	b.cmd.Stdout, b.cmd.Stderr = logf, logf
	b.cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := b.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = b.cmd.Wait(); close(b.done) }()
	t.Cleanup(func() { b.stop(t, bridge) })

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	for {
		e, err := harness.NewEngine(ctx, "unix://"+b.sock)
		if err == nil {
			e.Close()
			break
		}
		select {
		case <-b.done:
			t.Fatalf("dockerd B exited: %v\n%s", err, b.logTail())
		case <-ctx.Done():
			t.Fatalf("dockerd B does not answer: %v\n%s", err, b.logTail())
		case <-time.After(200 * time.Millisecond):
		}
	}
	if bridge && !hostBridgeUp() {
		t.Fatalf("starting dockerd B deleted the host's docker0: the main engine has lost its default network")
	}
	if b.px, err = harness.StartProxy("tcp", "127.0.0.1:23750", b.sock); err != nil {
		if b.px, err = harness.StartProxy("tcp", "127.0.0.1:0", b.sock); err != nil {
			t.Fatal(err)
		}
	}
	b.host = "tcp://" + b.px.Addr
	if b.eng, err = harness.NewEngine(ctx, b.host); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := r.eng.CopyImage(ctx, r.img, b.eng); err != nil {
		t.Fatal(err)
	}
	kind := "dockerd"
	if b.podman {
		kind = "podman system service"
	}
	t.Logf("engine B: %s in its own network namespace at %s (unix://%s), image %s loaded in %s", kind, b.host, b.sock, r.img, ms(time.Since(start)))
	return b
}

func (b *engineB) logTail() string {
	data, _ := os.ReadFile(filepath.Join(b.dir, "dockerd.log"))
	ls := strings.Split(strings.TrimSpace(string(data)), "\n")
	return strings.Join(ls[max(0, len(ls)-30):], "\n")
}

// stop ends dockerd B (SIGTERM, then SIGKILL), then anything still running
// from its folders (its containerd, shims), undoes its mounts and removes
// its folders.
func (b *engineB) stop(t *testing.T, bridge bool) {
	if b.eng != nil {
		if b.podman {
			// Podman's containers hold network namespaces in the host's
			// /run/netns: removed through the service, they go too.
			b.removeAll(t)
		}
		b.eng.Close()
	}
	if b.px != nil {
		b.px.Stop()
	}
	_ = b.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-b.done:
	case <-time.After(45 * time.Second):
		t.Errorf("dockerd B did not stop within 45s of SIGTERM; killing it")
		_ = b.cmd.Process.Kill()
		<-b.done
	}
	for _, pid := range procsUnder(b.dir) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	mounts := mountsUnder(b.dir)
	for _, m := range slices.Backward(mounts) {
		if err := syscall.Unmount(m, syscall.MNT_DETACH); err != nil {
			t.Logf("umount %s: %v", m, err)
		}
	}
	if err := os.RemoveAll(b.dir); err != nil {
		t.Errorf("remove engine B's folders: %v", err)
	}
	if bridge && !hostBridgeUp() {
		t.Errorf("after dockerd B stopped, the host's docker0 is gone: the main engine has lost its default network")
	}
}

// removeAll removes every container engine B has.
func (b *engineB) removeAll(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cli := b.eng.Client()
	list, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true})
	if err != nil {
		t.Logf("engine B's containers: %v", err)
		return
	}
	for _, c := range list.Items {
		if _, err := cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true}); err != nil {
			t.Logf("remove %s from engine B: %v", c.ID, err)
		}
	}
}

// isPodman reports whether e says it is Podman.
func isPodman(e *harness.Engine) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	v, err := e.Client().ServerVersion(ctx, client.ServerVersionOptions{})
	if err != nil {
		return false
	}
	for _, c := range v.Components {
		if strings.Contains(strings.ToLower(c.Name), "podman") {
			return true
		}
	}
	return false
}

// procsUnder lists the processes whose command line mentions dir.
func procsUnder(dir string) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && strings.Contains(string(b), dir) {
			out = append(out, pid)
		}
	}
	return out
}

// mountsUnder lists the mount points under dir, in mount order.
func mountsUnder(dir string) []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) > 4 && (fs[4] == dir || strings.HasPrefix(fs[4], dir+"/")) {
			out = append(out, fs[4])
		}
	}
	return out
}

// Row 11: a second engine. A run on engine B is never reaped by a sweep
// through engine A (its files stay, the sweep says the run is recorded
// against another engine); a sweep through B reaps it; and with its
// watchdog alive, a SIGKILLed owner's sandboxes are removed from B, by the
// script watchdog (with no docker command line on PATH: it needs none) and
// by the native one.
// Sandboxes on B have no published ports (B has no bridge to publish
// them through); the owner's specs have none.
func TestRow11SecondEngine(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	b := startEngineB(t, r)
	onB := "DOCKER_HOST=" + b.host
	r.bystander(b.eng, onB)

	t.Run("left for a sweep", func(t *testing.T) {
		r := r.sub(t)
		o := r.start("owner on engine B", harness.Plan{Containers: 2, Networks: 1}, onB).on(b.eng).ready()
		if ep := o.get("endpoint"); ep != b.host {
			t.Fatalf("the owner on B records endpoint %q, want %s", ep, b.host)
		}
		o.killSession()
		before := snapshot(t, r.cache, o.run)

		sa := r.start("next first use on engine A", harness.Plan{Containers: 1}).ready()
		d, why := sa.sweepOf(o.run)
		if d != "left alone" || !strings.Contains(why, b.host) {
			t.Errorf("the sweep through A decided %q (%s) about B's dead run, want left alone as another engine's", d, why)
		}
		if after := snapshot(t, r.cache, o.run); !sameFiles(before, after) {
			t.Errorf("the sweep through A changed B's run's files: before %q, after %q", before, after)
		}
		o.checkAlive("B's dead run, after a sweep through A")
		sa.finish()
		t.Logf("through A: %s: %s", d, why)

		sb := r.start("next first use on engine B", harness.Plan{Containers: 1}, onB).on(b.eng).ready()
		if d, why := sb.sweepOf(o.run); d != "reaped" {
			t.Errorf("the sweep through B decided %q (%s), want reaped", d, why)
		} else {
			t.Logf("through B: %s: %s", d, why)
		}
		if left := o.leftovers(); left != "" {
			t.Errorf("after the sweep through B, the run still has %s", left)
		}
		sb.finish()
		r.waitGone(sb, "the B sweeper's own cleanup")
	})

	t.Run("watchdog", func(t *testing.T) {
		r := r.sub(t)
		o := r.start("owner on engine B", harness.Plan{Containers: 2, Networks: 1}, onB).on(b.eng).ready()
		o.kill()
		took := r.waitGone(o, "the watchdog, on engine B")
		t.Logf("SIGKILL of B's owner → its watchdog removed everything from B in %s", ms(took))
	})

	// What CI images without the docker command line give: DOCKER_HOST
	// over TCP, and a PATH that holds no docker. Either watchdog is the
	// test binary itself, speaking the API to B; A is not touched.
	t.Run("watchdog without a docker command line", func(t *testing.T) {
		r := r.sub(t)
		o := r.start("owner on engine B, no docker on PATH", harness.Plan{Containers: 2, Networks: 1}, onB, "PATH="+t.TempDir()).on(b.eng).ready()
		if k := o.get("watchdog.kind"); k != "script" {
			t.Fatalf("with no docker on PATH the watchdog is %q, want the default, script", k)
		}
		o.kill()
		took := r.waitGone(o, "the script watchdog, on engine B over TCP")
		t.Logf("SIGKILL of B's owner (no docker CLI) → the script watchdog removed everything from B in %s", ms(took))
	})
	t.Run("native watchdog", func(t *testing.T) {
		r := r.sub(t)
		o := r.start("owner on engine B, native watchdog", harness.Plan{Containers: 2, Networks: 1}, onB, "RIGHTSIZE_WATCHDOG=native").on(b.eng).ready()
		if k := o.get("watchdog.kind"); k != "native" {
			t.Fatalf("asked for, the watchdog is %q, want native", k)
		}
		o.kill()
		took := r.waitGone(o, "the native watchdog, on engine B over TCP")
		t.Logf("SIGKILL of B's owner → the native watchdog removed everything from B in %s", ms(took))
	})
}
