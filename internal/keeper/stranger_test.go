package keeper

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"
)

// Only the lease's own holder ends it. While it holds the lease, what
// anyone else can do to the keeper through the engine changes nothing:
//   - attach to it with their input at its end (a script, a person's
//     Ctrl-D, an IDE's attach), two at once, one of them closing first;
//   - `docker attach` of the engine's command line, its input /dev/null;
//   - the signals a docker attach passes on from a terminal (SIGINT,
//     SIGHUP, SIGQUIT);
//   - run the keeper's holder themselves, with no secret, another
//     secret, or the secret while the lease is held.
//
// The run's container stays, the keeper runs, the lease is held, over
// three lease timeouts; then the holder's own end removes the run as ever.
func TestStrangersChangeNothing(t *testing.T) {
	r := newRig(t)
	run := newRunID(t)
	const timeout = 2 * time.Second
	k := r.start(run, Options{LeaseTimeout: timeout})
	lease := hold(t, k)
	c := r.container("rz-"+run+"-1", runLabels(run))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// Two attaches at once, each with its input; the first ends its
	// input, then its connection.
	var attached []client.ContainerAttachResult
	for range 2 {
		att, err := r.cli.ContainerAttach(ctx, k.ID, client.ContainerAttachOptions{Stream: true, Stdin: true, Stdout: true, Stderr: true})
		if err != nil {
			// An engine that refuses the attach leaves the keeper as
			// it was just as well.
			t.Logf("attach to the keeper: %v", err)
			continue
		}
		go stdcopy.StdCopy(discard{}, discard{}, att.Reader)
		attached = append(attached, att)
	}
	if len(attached) > 0 {
		_, _ = attached[0].Conn.Write([]byte("H.\x04"))
		_ = attached[0].CloseWrite()
		attached[0].Close()
	}
	defer func() {
		for _, a := range attached[min(1, len(attached)):] {
			_ = a.CloseWrite()
			a.Close()
		}
	}()

	// The engine's command line, its input at its end from the start.
	if docker, err := exec.LookPath("docker"); err == nil {
		cmd := exec.Command(docker, "attach", "--sig-proxy=true", k.Name)
		cmd.Env = append(os.Environ(), "DOCKER_HOST="+r.cli.DaemonHost())
		cmd.Stdin = nil // /dev/null
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}()
	} else {
		t.Log("no docker command line here: its attach is left out")
	}

	// What a docker attach passes on from a person's terminal.
	for _, sig := range []string{"SIGINT", "SIGHUP", "SIGQUIT"} {
		if _, err := r.cli.ContainerKill(ctx, k.ID, client.ContainerKillOptions{Signal: sig}); err != nil {
			t.Fatalf("%s to the keeper: %v", sig, err)
		}
	}

	// The keeper's own holder, run by someone without the lease.
	for _, tc := range []struct{ what, stdin string }{
		{"no input", ""},
		{"no secret", "\n"},
		{"another secret", strings.Repeat("0", 64) + "\n..."},
		{"the secret, while the lease is held", k.Secret + "\n..."},
	} {
		out := r.execHold(ctx, k.ID, tc.stdin)
		if strings.HasPrefix(out, heldWord) {
			t.Errorf("a stranger's holder with %s was answered %q", tc.what, out)
		}
		t.Logf("a stranger's holder with %s: %q", tc.what, out)
	}

	// An absence, over three lease timeouts of heartbeats.
	time.Sleep(3 * timeout)
	if err := lease.Err(); err != nil {
		t.Fatalf("the lease ended: %v\n%s", err, r.logs(k.ID))
	}
	if _, running := r.state(k.ID); !running {
		t.Fatalf("the keeper does not run\n%s", r.logs(k.ID))
	}
	if !r.exists(c, false) {
		t.Fatalf("the run's container went while its own holder held the lease\n%s", r.logs(k.ID))
	}
	closed := time.Now()
	if err := lease.Close(); err != nil {
		t.Fatal(err)
	}
	r.allGone(time.Minute, "the run's container, once its holder let go", []string{c}, nil)
	t.Logf("the holder let go → the run's container gone in %s", time.Since(closed).Round(time.Millisecond))
	r.keeperGone(time.Minute, k.Name)
}

// execHold runs the keeper's holder in container id with stdin, as a
// stranger would (docker exec -i), and returns what it said.
func (r *rig) execHold(ctx context.Context, id, stdin string) string {
	r.t.Helper()
	ex, err := r.cli.ExecCreate(ctx, id, client.ExecCreateOptions{Cmd: []string{holdCommand, "hold"}, AttachStdin: true, AttachStdout: true, AttachStderr: true})
	if err != nil {
		r.t.Fatalf("exec in the keeper: %v", err)
	}
	att, err := r.cli.ExecAttach(ctx, ex.ID, client.ExecAttachOptions{})
	if err != nil {
		r.t.Fatalf("exec in the keeper: %v", err)
	}
	defer att.Close()
	_, _ = att.Conn.Write([]byte(stdin))
	if err := att.CloseWrite(); err != nil {
		r.t.Fatalf("closing the exec's input: %v", err)
	}
	var out strings.Builder
	done := make(chan struct{})
	go func() {
		_, _ = stdcopy.StdCopy(&out, discard{}, att.Reader)
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(time.Minute):
		r.t.Fatal("a stranger's holder did not end within a minute")
	}
	return strings.TrimSpace(out.String())
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
