package kubernetes

import (
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rightsize/rightsize-go/internal/backend"
)

func TestLeaseRunNeedsNameAndBothLabels(t *testing.T) {
	lb := func(a, b string) map[string]string {
		return map[string]string{backend.LabelRunID: a, backend.LabelRunIDAlt: b}
	}
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   string
		reason string
	}{
		{"rz-run-0a1b2c3d", lb("0a1b2c3d", "0a1b2c3d"), "0a1b2c3d", "a run's Lease"},
		{"rz-run-0a1b2c3d", nil, "", "no labels: anyone's"},
		{"rz-run-0a1b2c3d", map[string]string{backend.LabelRunID: "0a1b2c3d"}, "", "one label only"},
		{"rz-run-0a1b2c3d", lb("0a1b2c3d", "0a1b2c3e"), "", "the labels disagree"},
		{"other", lb("0a1b2c3d", "0a1b2c3d"), "", "the name is not the run's"},
		{"rz-run-", lb("", ""), "", "an empty run id"},
		{"rz-run-UPPER", lb("UPPER", "UPPER"), "", "not a Kubernetes name"},
	} {
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: c.name, Labels: c.labels}}
		if got := leaseRun(l); got != c.want {
			t.Errorf("%s %v: %q, want %q (%s)", c.name, c.labels, got, c.want, c.reason)
		}
	}
}

func TestLapsedNeedsARenewalAndADuration(t *testing.T) {
	now := time.Now()
	at := func(d time.Duration) *metav1.MicroTime { m := metav1.NewMicroTime(now.Add(d)); return &m }
	secs := func(n int32) *int32 { return &n }
	for _, c := range []struct {
		renew  *metav1.MicroTime
		dur    *int32
		want   bool
		reason string
	}{
		{at(-16 * time.Second), secs(15), true, "renewed 16 s ago for 15"},
		{at(-14 * time.Second), secs(15), false, "renewed 14 s ago for 15"},
		{nil, secs(15), false, "never renewed: cannot be judged"},
		{at(-time.Hour), nil, false, "no duration: cannot be judged"},
		{at(-time.Hour), secs(0), false, "a zero duration: cannot be judged"},
	} {
		l := &coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{RenewTime: c.renew, LeaseDurationSeconds: c.dur}}
		if got := lapsed(l, now); got != c.want {
			t.Errorf("%s: lapsed %v", c.reason, got)
		}
	}
}

// TestJudgeLeaseIsWhatTheSweepActsOn: every state a listing shows, and
// that only a run's Lease past its time is judged lapsed: the one state
// SweepLapsed deletes.
func TestJudgeLeaseIsWhatTheSweepActsOn(t *testing.T) {
	now := time.Now()
	at := func(d time.Duration) *metav1.MicroTime { m := metav1.NewMicroTime(now.Add(d)); return &m }
	secs := func(n int32) *int32 { return &n }
	run := map[string]string{backend.LabelRunID: "0a1b2c3d", backend.LabelRunIDAlt: "0a1b2c3d"}
	holder := "ci/42"
	for _, c := range []struct {
		name   string
		labels map[string]string
		renew  *metav1.MicroTime
		dur    *int32
		state  backend.ClaimState
		lapsed bool
		reason string
		why    string
	}{
		{"rz-run-0a1b2c3d", run, at(-16 * time.Second), secs(15), backend.ClaimLapsed, true, "dead: not renewed for 16s, past its 15s", "a run's, renewed 16 s ago for 15"},
		{"rz-run-0a1b2c3d", run, at(-14 * time.Second), secs(15), backend.ClaimHeld, false, "alive: renewed 14s ago, within its 15s", "a run's, renewed 14 s ago for 15"},
		{"rz-run-0a1b2c3d", run, at(5 * time.Second), secs(15), backend.ClaimHeld, false, "ahead of this machine's clock", "renewed by a clock ahead of ours"},
		{"rz-run-0a1b2c3d", run, nil, secs(15), backend.ClaimUnjudged, false, "never judged lapsed", "never renewed"},
		{"rz-run-0a1b2c3d", run, at(-time.Hour), nil, backend.ClaimUnjudged, false, "never judged lapsed", "no duration"},
		{"rz-run-0a1b2c3e", run, at(-time.Hour), secs(15), backend.ClaimNotARun, true, "its name is not rz-run-0a1b2c3d", "stale, and another run's name"},
		{"rz-run-0a1b2c3d", map[string]string{backend.LabelRunID: "0a1b2c3d"}, at(-time.Hour), secs(15), backend.ClaimNotARun, true, "run_id label \"\" is not its", "one label only"},
	} {
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: c.name, Labels: c.labels},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, RenewTime: c.renew, LeaseDurationSeconds: c.dur}}
		got := judgeLease(l, now)
		if got.State != c.state || got.Lapsed != c.lapsed || !strings.Contains(got.Reason, c.reason) || got.Name != c.name || got.Holder != holder {
			t.Errorf("%s: %+v, want state %q, lapsed %v, a reason saying %q", c.why, got, c.state, c.lapsed, c.reason)
		}
		if (got.Run != "") != (c.state != backend.ClaimNotARun) {
			t.Errorf("%s: run %q for state %q", c.why, got.Run, got.State)
		}
	}
}

func TestPodForRefusesWhatItCannotDo(t *testing.T) {
	d := &Driver{}
	ok := backend.Spec{Image: "busybox", RunID: "0a1b2c3d"}
	for _, c := range []struct {
		name string
		edit func(*backend.Spec)
		want string
	}{
		{"Bad_Name", nil, "not a pod name"},
		{"rz-x-1;rm -rf", nil, "not a pod name"},
		{"rz-x-1", func(s *backend.Spec) { s.RunID = "" }, "keep-alive"},
		{"rz-x-1", func(s *backend.Spec) { s.KeepAlive = "0123456789ab" }, "keep-alive"},
		{"rz-x-1", func(s *backend.Spec) { s.RunID = "../x" }, "cannot name a Lease"},
		{"rz-x-1", func(s *backend.Spec) { s.Image = "" }, "no image"},
		{"rz-x-1", func(s *backend.Spec) { s.Files = []backend.File{{GuestPath: "etc/a"}} }, `"etc/a" is not an absolute, clean path`},
		{"rz-x-1", func(s *backend.Spec) { s.Files = []backend.File{{GuestPath: "/etc/../a"}} }, "not an absolute, clean path"},
		{"rz-x-1", func(s *backend.Spec) { s.Files = []backend.File{{GuestPath: "/"}} }, "not an absolute, clean path"},
		{"rz-x-1", func(s *backend.Spec) { s.Files = []backend.File{{GuestPath: "/a"}, {GuestPath: "/a"}} }, "two files at /a"},
		{"rz-x-1", func(s *backend.Spec) { s.Files = []backend.File{{GuestPath: "/a", Mode: 0o4755}} }, "mode 04755: want permission bits"},
		{"rz-x-1", func(s *backend.Spec) {
			s.Files = []backend.File{{GuestPath: "/a", Content: make([]byte, MaxFilesBytes/2)}, {GuestPath: "/b", Content: make([]byte, MaxFilesBytes/2+1)}}
		}, "hold 1048577 bytes in all, more than a ConfigMap holds (1048576, 1 MiB)"},
		{"rz-x-1", func(s *backend.Spec) { s.Labels = map[string]string{backend.LabelRunID: "other"} }, "rightsize's own"},
		{"rz-x-1", func(s *backend.Spec) { s.Ports = []string{"99999"} }, "port"},
		{"rz-x-1", func(s *backend.Spec) { s.Ports = []string{"80/quic"} }, "protocol"},
		{"rz-x-1", func(s *backend.Spec) { s.Networks = map[string][]string{"n": {"Not_A_Name"}} }, "not a Service name"},
		{"rz-x-1", func(s *backend.Spec) { s.Networks = map[string][]string{"bad net": {"a"}} }, "label value"},
	} {
		s := ok
		if c.edit != nil {
			c.edit(&s)
		}
		_, err := d.podFor(c.name, s)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %+v: %v, want an error saying %q", c.name, s, err, c.want)
		}
	}
	p, err := d.podFor("rz-0a1b2c3d-1", backend.Spec{Image: "busybox", RunID: "0a1b2c3d", Cmd: []string{"sleep", "1"},
		Env: map[string]string{"B": "2", "A": "1"}, Ports: []string{"53/udp"}, MemoryLimitMB: 64, Labels: map[string]string{"team": "x"}})
	if err != nil {
		t.Fatal(err)
	}
	c := p.Spec.Containers[0]
	if strings.Join(c.Args, " ") != "sleep 1" || len(c.Command) != 0 {
		t.Errorf("Cmd replaces the image's command (args), not its entrypoint: command %q args %q", c.Command, c.Args)
	}
	if c.Env[0].Name != "A" || c.Ports[0].Protocol != "UDP" || c.Resources.Limits.Memory().Value() != 64<<20 {
		t.Errorf("env %v, ports %v, limits %v", c.Env, c.Ports, c.Resources.Limits)
	}
	if p.Labels[backend.LabelRunID] != "0a1b2c3d" || p.Labels[backend.LabelRunIDAlt] != "0a1b2c3d" || p.Labels["team"] != "x" || p.Labels[LabelSandbox] != p.Name {
		t.Errorf("labels %v", p.Labels)
	}
}

// TestFilesAreOneConfigMapMountedByPath: each file is a key of the
// ConfigMap of the pod's name, text as data and the rest as binaryData,
// mounted read-only at its path with its mode (0644 when none is given).
func TestFilesAreOneConfigMapMountedByPath(t *testing.T) {
	d := &Driver{}
	files := []backend.File{
		{GuestPath: "/etc/app/config.yaml", Content: []byte("port: 8080\n"), Mode: 0o600},
		{GuestPath: "/usr/local/bin/tool", Content: []byte{0x7f, 'E', 'L', 'F', 0xff, 0xfe}, Mode: 0o755},
		{GuestPath: "/empty"},
	}
	p, err := d.podFor("rz-0a1b2c3d-1", backend.Spec{Image: "busybox", RunID: "0a1b2c3d", Files: files})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Spec.Volumes) != 1 || p.Spec.Volumes[0].ConfigMap == nil || p.Spec.Volumes[0].ConfigMap.Name != p.Name || !hasFiles(p) {
		t.Fatalf("volumes %+v: want one, of the ConfigMap %s", p.Spec.Volumes, p.Name)
	}
	items, mounts := p.Spec.Volumes[0].ConfigMap.Items, p.Spec.Containers[0].VolumeMounts
	cm := filesMap(p, files)
	if cm.Name != p.Name || cm.Labels[LabelSandbox] != p.Name || cm.Labels[backend.LabelRunID] != "0a1b2c3d" || cm.Immutable == nil || !*cm.Immutable {
		t.Errorf("ConfigMap %s, labels %v, immutable %v", cm.Name, cm.Labels, cm.Immutable)
	}
	for i, f := range files {
		k := items[i].Key
		got, text := cm.Data[k]
		if !text {
			got = string(cm.BinaryData[k])
		}
		want := int32(f.Mode)
		if want == 0 {
			want = 0o644
		}
		if got != string(f.Content) || text != (i != 1) || *items[i].Mode != want || items[i].Path != k {
			t.Errorf("%s: key %s holds %q (as text: %v), mode %#o; want %q, %#o", f.GuestPath, k, got, text, *items[i].Mode, f.Content, want)
		}
		if m := mounts[i]; m.Name != filesVolume || m.MountPath != f.GuestPath || m.SubPath != k || !m.ReadOnly {
			t.Errorf("%s: mount %+v", f.GuestPath, m)
		}
	}
	if filesMap(p, nil) != nil {
		t.Errorf("a ConfigMap for no files")
	}
}
