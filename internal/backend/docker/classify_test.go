package docker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/rightsize/rightsize-go/internal/backend"
	"github.com/rightsize/rightsize-go/internal/testimage"
)

// The answers of Docker 20.10 and Podman 4.3 as they came, word for word
// (ids and names shortened), read without the status that came with them
// unless status says so: a wrapper may drop it.
func TestClassifyRecorded(t *testing.T) {
	cases := []struct {
		name     string
		msg      string
		notFound bool // the client had a 404 to go by
		want     error
		reason   string
	}{
		{"docker no container", "Error response from daemon: No such container: rz-x", false, backend.ErrNotFound, "Docker's words, capitalised"},
		{"docker no exec", "Error response from daemon: No such exec instance: 0123", false, backend.ErrNotFound, "an exec inspected after the engine forgot it"},
		{"docker no network", "Error response from daemon: network rz-x not found", true, backend.ErrNotFound, "only the 404 says it: the words hold the name in the middle"},
		{"podman no container", `Error response from daemon: no container with name or ID "rz-x" found: no such container`, false, backend.ErrNotFound, "Podman's words, lower case"},
		{"podman no exec", "Error response from daemon: no exec session with ID 0123 found: no such exec session", false, backend.ErrNotFound, "Podman's exec"},
		{"podman no network", "Error response from daemon: unable to find network with name or ID rz-x: network not found", false, backend.ErrNotFound, "Podman's network inspect"},
		{"podman network rm", "Error response from daemon: network not found", false, backend.ErrNotFound, "Podman's network removal"},
		{"podman removal race", "Error response from daemon: container 4acf does not exist in database: no such container", false, backend.ErrNotFound, "another call is removing it: gone, not a failure"},
		{"docker name taken", `Error response from daemon: Conflict. The container name "/rz-x" is already in use by container "4acf". You have to remove (or rename) that container to be able to reuse that name.`, false, backend.ErrNameTaken, "Docker's 409"},
		{"podman name taken", `Error response from daemon: container create: creating container storage: the container name "rz-x" is already in use by 4acf. You have to remove that container to be able to reuse that name: that name is already in use`, false, backend.ErrNameTaken, "Podman's 500"},
		{"docker in use", "Error response from daemon: error while removing network: network rz-x id 9c26 has active endpoints", false, backend.ErrInUse, "Docker's 403"},
		{"podman in use", `Error response from daemon: "rz-x" has associated containers with it. Use -f to forcibly delete containers and pods: network is being used`, false, backend.ErrInUse, "Podman's 500"},
		{"docker removal under way", "Error response from daemon: removal of container 17a6fb886bd6 is already in progress", false, nil, "no class of its own: removeID waits for the removal under way"},
		{"port taken", "Error response from daemon: driver failed programming external connectivity: Bind for 127.0.0.1:8080 failed: port is already allocated", false, nil, "a conflict of another kind is none of these"},
		{"podman port taken", "Error response from daemon: rootlessport listen tcp 127.0.0.1:8080: bind: address already in use", false, nil, "'already in use' alone is not a name taken"},
	}
	if !removing.says(errors.New("Error response from daemon: removal of container 17a6fb886bd6 is already in progress")) {
		t.Error("Docker's removal under way is not recognised")
	}
	for _, c := range cases {
		err := errors.New(c.msg)
		if c.notFound {
			err = fmt.Errorf("%s: %w", c.msg, cerrdefs.ErrNotFound)
		}
		got := classify("op", err)
		for _, s := range []error{backend.ErrNotFound, backend.ErrNameTaken, backend.ErrInUse, backend.ErrUnreachable} {
			if errors.Is(got, s) != (s == c.want) {
				t.Errorf("%s: classify = %v; want %v: %s", c.name, got, c.want, c.reason)
				break
			}
		}
	}

	noShellDocker := "OCI runtime exec failed: exec failed: unable to start container process: exec: \"/bin/sh\": stat /bin/sh: no such file or directory: unknown\r\n"
	noShellPodman := "Error: OCI runtime attempted to invoke a command that was not found\n"
	for _, c := range []struct {
		code int
		out  string
	}{{126, noShellDocker}, {127, noShellPodman}} {
		if err := startFailure(c.code, []byte(c.out), nil); !errors.Is(err, ErrNoShell) {
			t.Errorf("exit %d, %q: %v, want ErrNoShell", c.code, c.out, err)
		}
	}
}

// An answer of the table, and how to have an engine give it.
type answerCase struct {
	engine string // "docker" or "podman": the engine that gives the answer
	table  string // the answer it is part of
	text   string // the entry it proves
	want   error  // what classify makes of it
	// do has the engine give the answer; it returns the error (or, for
	// the watchdog's texts, the docker command line's output).
	do func(t *testing.T, d *Driver) error
}

func answerCases() []answerCase {
	var cases []answerCase
	add := func(engines, table string, texts []string, want error, do func(*testing.T, *Driver) error) {
		for _, e := range strings.Split(engines, ",") {
			for _, text := range texts {
				cases = append(cases, answerCase{e, table, text, want, do})
			}
		}
	}
	missing := func(t *testing.T) string { return "rz-classify-missing-" + strings.ReplaceAll(t.Name(), "/", "-") }
	inspectMissing := func(t *testing.T, d *Driver) error {
		_, err := d.cli.ContainerInspect(context.Background(), missing(t), client.ContainerInspectOptions{})
		return err
	}
	add("docker,podman", "notFound", []string{"no such container"}, backend.ErrNotFound, inspectMissing)
	add("podman", "notFound", []string{"no container with name or id"}, backend.ErrNotFound, inspectMissing)
	add("docker,podman", "notFound", []string{"no such exec"}, backend.ErrNotFound, func(t *testing.T, d *Driver) error {
		_, err := d.cli.ExecInspect(context.Background(), "0123456789abcdef", client.ExecInspectOptions{})
		return err
	})
	add("podman", "notFound", []string{"unable to find network"}, backend.ErrNotFound, func(t *testing.T, d *Driver) error {
		_, err := d.cli.NetworkInspect(context.Background(), missing(t), client.NetworkInspectOptions{})
		return err
	})
	add("podman", "notFound", []string{"network not found"}, backend.ErrNotFound, func(t *testing.T, d *Driver) error {
		_, err := d.cli.NetworkRemove(context.Background(), missing(t), client.NetworkRemoveOptions{})
		return err
	})
	add("podman", "notFound", []string{"does not exist in database"}, backend.ErrNotFound, removalRace)
	add("docker,podman", "nameTaken", []string{"is already in use by"}, backend.ErrNameTaken, func(t *testing.T, d *Driver) error {
		name := uniqueTestName(t)
		apiCreate(t, d, name, nil)
		_, err := d.cli.ContainerCreate(context.Background(), client.ContainerCreateOptions{Name: name, Config: &container.Config{Image: testimage.Busybox(t)}})
		return err
	})
	add("docker,podman", "nameTaken", []string{"is already in use by"}, backend.ErrNameTaken, func(t *testing.T, d *Driver) error {
		// The same through testcontainers-go, as Create meets it.
		name := uniqueTestName(t)
		apiCreate(t, d, name, nil)
		_, err := d.Create(context.Background(), name, backend.Spec{Image: testimage.Busybox(t), RunID: "classify"})
		return err
	})
	add("docker", "inUse", []string{"active endpoints"}, backend.ErrInUse, networkInUse)
	add("podman", "inUse", []string{"has associated containers with it", "network is being used"}, backend.ErrInUse, networkInUse)
	add("docker", "ambiguous", []string{"is ambiguous"}, nil, func(t *testing.T, d *Driver) error {
		_, err := d.cli.NetworkInspect(context.Background(), sameNamedNetworks(t, d, 2), client.NetworkInspectOptions{})
		return err
	})
	add("docker", "noShell", []string{`exec: "/bin/sh"`}, ErrNoShell, execNoShell)
	add("podman", "noShell", []string{"command that was not found"}, ErrNoShell, execNoShell)

	return cases
}

// TestClassifyEngine has the engine under test give each answer it gives,
// and checks the table's words are in it and what classify makes of it.
// The answers of the other engine are skipped: `make test` runs these
// against Docker, `make test-podman` against Podman.
func TestClassifyEngine(t *testing.T) {
	d := openDriver(t)
	engine := "docker"
	if d.isPodman() {
		engine = "podman"
	}
	for _, c := range answerCases() {
		t.Run(c.engine+"/"+c.table+"/"+c.text, func(t *testing.T) {
			if c.do == nil {
				t.Skipf("%s gives this answer; there is none on this machine", c.engine)
			}
			if c.engine != engine {
				t.Skipf("%s gives this answer; the engine under test is %s (`make test` runs Docker, `make test-podman` Podman)", c.engine, engine)
			}
			err := c.do(t, d)
			if err == nil {
				t.Fatal("the engine gave no error")
			}
			msg, text := strings.ToLower(err.Error()), strings.ToLower(c.text)
			if !strings.Contains(msg, text) {
				t.Errorf("the engine said %q, which does not hold the %s entry %q", err, c.table, c.text)
			}
			if c.want != nil {
				got := classify("op", err)
				if c.table == "noShell" {
					got = err // Exec's own error, from the exec's output
				}
				if !errors.Is(got, c.want) {
					t.Errorf("classify(%q) = %v, want %v", err, got, c.want)
				}
			}
			t.Logf("%s said: %s", engine, err)
		})
	}
}

// Every entry of the table is proved by a case of answerCases.
func TestClassifyTableCovered(t *testing.T) {
	tables := map[string][]string{
		"notFound":  notFound.texts,
		"nameTaken": nameTaken.texts,
		"inUse":     inUse.texts,
		"noShell":   noShell.texts,
		"ambiguous": ambiguous.texts,
	}
	proved := map[string]bool{}
	for _, c := range answerCases() {
		proved[c.table+"\x00"+c.text] = true
		if !slices.Contains(tables[c.table], c.text) {
			t.Errorf("a case proves %s entry %q, which the table does not hold", c.table, c.text)
		}
	}
	for table, texts := range tables {
		for _, text := range texts {
			if !proved[table+"\x00"+text] {
				t.Errorf("%s entry %q: no case has an engine give it", table, text)
			}
		}
	}
}

var testNameSeq struct {
	sync.Mutex
	n int
}

func uniqueTestName(t *testing.T) string {
	testNameSeq.Lock()
	defer testNameSeq.Unlock()
	testNameSeq.n++
	return fmt.Sprintf("rz-classify-%d-%d", os.Getpid(), testNameSeq.n)
}

// apiCreate creates a container of the busybox image, and starts it when
// hc is given; it is removed when the test ends.
func apiCreate(t *testing.T, d *Driver, name string, hc *container.HostConfig) {
	t.Helper()
	ctx := context.Background()
	_, err := d.cli.ContainerCreate(ctx, client.ContainerCreateOptions{Name: name, Config: &container.Config{Image: testimage.Busybox(t)}, HostConfig: hc})
	if err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
	t.Cleanup(func() {
		_, _ = d.cli.ContainerRemove(context.Background(), name, client.ContainerRemoveOptions{Force: true})
	})
	if hc != nil {
		if _, err := d.cli.ContainerStart(ctx, name, client.ContainerStartOptions{}); err != nil {
			t.Fatalf("start %s: %v", name, err)
		}
	}
}

// networkInUse removes, by name, a network a running container is on.
func networkInUse(t *testing.T, d *Driver) error {
	ctx := context.Background()
	net := uniqueTestName(t)
	if _, err := d.cli.NetworkCreate(ctx, net, client.NetworkCreateOptions{Driver: "bridge"}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = d.cli.NetworkRemove(context.Background(), net, client.NetworkRemoveOptions{}) })
	apiCreate(t, d, uniqueTestName(t), &container.HostConfig{NetworkMode: container.NetworkMode(net)})
	_, err := d.cli.NetworkRemove(ctx, net, client.NetworkRemoveOptions{})
	return err
}

// sameNamedNetworks creates n networks of one name (Docker allows it: a
// create without CheckDuplicate, the default of API 1.41), each labelled
// with labels[i] when given, and returns the name; they are removed by id
// when the test ends.
func sameNamedNetworks(t *testing.T, d *Driver, n int, labels ...map[string]string) string {
	t.Helper()
	ctx := context.Background()
	name := uniqueTestName(t)
	for i := range n {
		opts := client.NetworkCreateOptions{Driver: "bridge"}
		if i < len(labels) {
			opts.Labels = labels[i]
		}
		res, err := d.cli.NetworkCreate(ctx, name, opts)
		if err != nil {
			if i > 0 {
				t.Skipf("the engine refuses a second network named %s (Podman does): %v", name, err)
			}
			t.Fatal(err)
		}
		t.Cleanup(func() { _, _ = d.cli.NetworkRemove(context.Background(), res.ID, client.NetworkRemoveOptions{}) })
	}
	return name
}

// removalRace removes one running container three times at once: Podman
// answers the calls that come second that it is not in its database.
func removalRace(t *testing.T, d *Driver) error {
	for try := 0; try < 10; try++ {
		name := uniqueTestName(t)
		apiCreate(t, d, name, &container.HostConfig{})
		errs := make(chan error, 3)
		for range 3 {
			go func() {
				_, err := d.cli.ContainerRemove(context.Background(), name, client.ContainerRemoveOptions{Force: true})
				errs <- err
			}()
		}
		for range 3 {
			if err := <-errs; err != nil && strings.Contains(err.Error(), "does not exist in database") {
				return err
			}
		}
	}
	t.Skip("no removal race came about in 10 tries: the engine answered each second removal otherwise")
	return nil
}

func execNoShell(t *testing.T, d *Driver) error {
	s := d.SandboxFor(testContainer(t, d, testimage.NoShell(t)))
	_, err := s.Exec(context.Background(), []string{"true"}, ExecOptions{})
	return err
}
