package msb

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/rightsize/rightsize-go/internal/backend"
)

// runPlan is an `msb run` argv and what it committed this process to: the
// host ports it publishes and the host files it mounts.
type runPlan struct {
	args []string
	// ports maps a guest port ("8080/tcp") to the host port publishing it.
	ports map[string]string
	// files is the temporary folder holding the files mounted into the
	// sandbox; "" when there are none.
	files string
}

// planRun checks spec and builds the argv of an attached `msb run`, in the
// family's order: name, memory, ports, env, mounts, image, `--` command,
// with this package's labels after the env. Host ports are picked here, on
// 127.0.0.1.
func planRun(name string, spec backend.Spec) (plan runPlan, err error) {
	if err := checkImage(spec.Image); err != nil {
		return plan, err
	}
	if len(spec.Networks) > 0 {
		return plan, fmt.Errorf("networks %s: networks are not supported on msb: %w", strings.Join(slices.Sorted(maps.Keys(spec.Networks)), ", "), errors.ErrUnsupported)
	}
	if spec.MemoryLimitMB < 0 {
		return plan, fmt.Errorf("negative memory limit %d MB", spec.MemoryLimitMB)
	}

	args := []string{"run", "--name", name}
	if spec.MemoryLimitMB > 0 {
		args = append(args, "-m", strconv.Itoa(spec.MemoryLimitMB)+"M")
	}

	ports, err := parsePorts(spec.Ports)
	if err != nil {
		return plan, err
	}
	hostPorts, err := freePorts(ports)
	if err != nil {
		return plan, err
	}
	plan.ports = map[string]string{}
	for i, p := range ports {
		plan.ports[p.key()] = hostPorts[i]
		publish := hostPorts[i] + ":" + p.number
		if p.proto == "udp" {
			publish += "/udp"
		}
		args = append(args, "-p", publish)
	}

	for _, k := range slices.Sorted(maps.Keys(spec.Env)) {
		v := spec.Env[k]
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.Contains(v, "\x00") {
			return plan, fmt.Errorf("environment variable %q: a name must be non-empty and hold no '=' or NUL, a value no NUL", k)
		}
		args = append(args, "-e", k+"="+v)
	}

	labels, err := marks(spec)
	if err != nil {
		return plan, err
	}
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		// One word, `--label=K=V`: a key or value starting with '-' is not
		// read as a flag.
		args = append(args, "--label="+k+"="+labels[k])
	}

	if len(spec.Files) > 0 {
		mounts, dir, err := writeFiles(name, spec.Files)
		if err != nil {
			return plan, err
		}
		plan.files = dir
		for _, m := range mounts {
			args = append(args, "--mount-file", m)
		}
	}

	args = append(args, spec.Image)
	if len(spec.Cmd) > 0 {
		// No `--` at all keeps the image's own command: msb reads an empty
		// one after `--` as a command to run.
		args = append(args, "--")
		args = append(args, spec.Cmd...)
	}
	plan.args = args
	return plan, nil
}

// marks are the sandbox's labels: the user's, then, as on Docker, the
// run's under both spellings (backend.RunLabels) or, for a keep-alive
// sandbox, its keep-alive marks instead, so that no run-scoped removal
// takes it. msb splits `KEY=VALUE` at the first '=' and refuses an empty
// key.
func marks(spec backend.Spec) (map[string]string, error) {
	labels := map[string]string{}
	for k, v := range spec.Labels {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.Contains(v, "\x00") {
			return nil, fmt.Errorf("label %q: a key must be non-empty and hold no '=' or NUL, a value no NUL", k)
		}
		labels[k] = v
	}
	switch {
	case spec.KeepAlive != "":
		labels[backend.LabelReuse] = spec.KeepAlive
		if spec.KeepAliveExtra != "" {
			labels[backend.LabelReuseExtra] = spec.KeepAliveExtra
		}
		delete(labels, backend.LabelRunID)
		delete(labels, backend.LabelRunIDAlt)
	case spec.RunID != "":
		maps.Copy(labels, backend.RunLabels(spec.RunID))
	}
	return labels, nil
}

// checkImage refuses an image reference msb could read as a flag or as
// more than one word.
func checkImage(image string) error {
	switch {
	case image == "":
		return errors.New("no image")
	case strings.HasPrefix(image, "-"):
		return fmt.Errorf("image %q: an image reference cannot start with '-'", image)
	case strings.IndexFunc(image, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0:
		return fmt.Errorf("image %q: an image reference holds no spaces or control characters", image)
	}
	return nil
}

type guestPort struct {
	number string // "8080"
	proto  string // "tcp" or "udp"
}

func (p guestPort) key() string { return p.number + "/" + p.proto }

// parsePort reads "8080/tcp", "8080" (tcp) or "53/udp".
func parsePort(s string) (guestPort, error) {
	num, proto, hasProto := strings.Cut(strings.TrimSpace(s), "/")
	if !hasProto {
		proto = "tcp"
	}
	proto = strings.ToLower(proto)
	if proto != "tcp" && proto != "udp" {
		return guestPort{}, fmt.Errorf("port %q: protocol must be tcp or udp", s)
	}
	n, err := strconv.Atoi(num)
	if err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != num {
		return guestPort{}, fmt.Errorf("port %q: not a port number from 1 to 65535", s)
	}
	return guestPort{number: num, proto: proto}, nil
}

func parsePorts(specs []string) ([]guestPort, error) {
	var ports []guestPort
	seen := map[string]bool{}
	for _, s := range specs {
		p, err := parsePort(s)
		if err != nil {
			return nil, err
		}
		if !seen[p.key()] {
			seen[p.key()] = true
			ports = append(ports, p)
		}
	}
	return ports, nil
}

// freePorts picks one free host port per guest port by binding
// 127.0.0.1:0, as the family does: msb publishes the port it is given and
// picks none itself. All sockets stay open until every port is picked, so
// no two picks collide; another process may still take one before msb binds
// it, and msb's own error then says so.
func freePorts(ports []guestPort) (_ []string, err error) {
	var held []io.Closer
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	out := make([]string, len(ports))
	for i, p := range ports {
		var addr net.Addr
		if p.proto == "udp" {
			c, err := net.ListenPacket("udp4", "127.0.0.1:0")
			if err != nil {
				return nil, fmt.Errorf("picking a free host port for %s: %w", p.key(), err)
			}
			held = append(held, c)
			addr = c.LocalAddr()
		} else {
			l, err := net.Listen("tcp4", "127.0.0.1:0")
			if err != nil {
				return nil, fmt.Errorf("picking a free host port for %s: %w", p.key(), err)
			}
			held = append(held, l)
			addr = l.Addr()
		}
		_, port, err := net.SplitHostPort(addr.String())
		if err != nil {
			return nil, err
		}
		out[i] = port
	}
	return out, nil
}

// writeFiles writes each file into a new temporary folder and returns the
// --mount-file values for them. The files must outlive the sandbox's boot,
// so the folder is removed when the sandbox is.
func writeFiles(name string, files []backend.File) (mounts []string, dir string, err error) {
	tmp, err := os.MkdirTemp("", "rightsize-msb-"+name+"-")
	if err != nil {
		return nil, "", fmt.Errorf("files for the sandbox: %w", err)
	}
	// tmp, not dir: a failing return has already set dir to "".
	defer func() {
		if err != nil {
			os.RemoveAll(tmp)
		}
	}()
	dir = tmp
	if strings.ContainsAny(dir, ",") || (runtime.GOOS != "windows" && strings.Contains(dir, ":")) {
		return nil, "", fmt.Errorf("files for the sandbox: temporary folder %q holds a ',' or ':', which msb's SOURCE:DEST[:OPTIONS] cannot carry; set TMPDIR elsewhere", dir)
	}
	for i, f := range files {
		g := f.GuestPath
		if !path.IsAbs(g) || path.Clean(g) != g || strings.ContainsAny(g, ":,\x00") {
			return nil, "", fmt.Errorf("file %q: the guest path must be absolute, clean, and hold no ':' or ','", g)
		}
		mode := os.FileMode(f.Mode).Perm()
		if mode == 0 {
			mode = 0o644
		}
		host := filepath.Join(dir, fmt.Sprintf("%d-%s", i, path.Base(g)))
		if err := os.WriteFile(host, f.Content, mode); err != nil {
			return nil, "", fmt.Errorf("file %q: %w", g, err)
		}
		// WriteFile's mode is filtered by the umask; the guest sees this one.
		if err := os.Chmod(host, mode); err != nil {
			return nil, "", fmt.Errorf("file %q: %w", g, err)
		}
		// The option block is always spelled out: it keeps a Windows drive
		// colon from being read as the SOURCE:DEST separator (family note).
		mounts = append(mounts, host+":"+g+":rw,nodev")
	}
	return mounts, dir, nil
}
