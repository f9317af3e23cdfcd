package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8s "k8s.io/client-go/kubernetes"

	"github.com/rightsize/rightsize-go/internal/backend"
	"github.com/rightsize/rightsize-go/internal/backend/kubernetes"
	"github.com/rightsize/rightsize-go/internal/backend/memory"
	"github.com/rightsize/rightsize-go/internal/kubetest"
)

// These tests run against the test cluster of scripts/kube.sh (the
// Kubernetes gate of `make test`), which has no node: pods are stored and
// garbage-collected, never run. Without it (RIGHTSIZE_TEST_KUBECONFIG
// unset) they skip, saying so.

// gcWithin bounds a wait for the garbage collector, which right after the
// cluster starts can take seconds to sync its informers.
const gcWithin = 2 * time.Minute

// kubeCLI gives the test a namespace of its own on the test cluster and
// points this process's kubernetes backend at it; RIGHTSIZE_BACKEND is
// unset (and restored after: sweep --backend sets it).
func kubeCLI(t *testing.T) (k8s.Interface, string) {
	t.Helper()
	cs := kubetest.Client(t)
	ns := kubetest.Namespace(t, cs, "rz-cli-")
	t.Setenv("KUBECONFIG", os.Getenv(kubetest.EnvKubeconfig))
	t.Setenv(kubernetes.EnvNamespace, ns)
	t.Setenv(backend.EnvBackend, "")
	return cs, ns
}

// rightsize runs the command in this process and returns its exit code,
// stdout and stderr.
func rightsize(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errs bytes.Buffer
	code := run(args, &out, &errs)
	return code, out.String(), errs.String()
}

// kubeLease creates a Lease named name with labels lb, renewed at renewed
// (none when zero) for seconds (none when 0), and pods of its own.
func kubeLease(ctx context.Context, t *testing.T, cs k8s.Interface, ns, name string, lb map[string]string, renewed time.Time, seconds int32, pods ...string) *coordinationv1.Lease {
	t.Helper()
	holder := "ci-7/4242"
	spec := coordinationv1.LeaseSpec{HolderIdentity: &holder}
	if !renewed.IsZero() {
		at := metav1.NewMicroTime(renewed)
		spec.AcquireTime, spec.RenewTime = &at, &at
	}
	if seconds > 0 {
		spec.LeaseDurationSeconds = &seconds
	}
	l, err := cs.CoordinationV1().Leases(ns).Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lb}, Spec: spec}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create Lease %s/%s: %v", ns, name, err)
	}
	no := false
	for _, p := range pods {
		_, err := cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: p, Labels: lb, OwnerReferences: []metav1.OwnerReference{{
				APIVersion: coordinationv1.SchemeGroupVersion.String(), Kind: "Lease", Name: l.Name, UID: l.UID,
			}}},
			Spec: corev1.PodSpec{AutomountServiceAccountToken: &no, Containers: []corev1.Container{{Name: "sandbox", Image: "rightsize.invalid/never-pulled:1"}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("create pod %s/%s: %v", ns, p, err)
		}
	}
	return l
}

func runLabels(run string) map[string]string {
	return map[string]string{backend.LabelRunID: run, backend.LabelRunIDAlt: run}
}

// there reports whether the Lease or pod name is in ns and not being
// deleted.
func there(ctx context.Context, t *testing.T, cs k8s.Interface, ns, kind, name string) bool {
	t.Helper()
	var meta *metav1.ObjectMeta
	var err error
	switch kind {
	case "Lease":
		var l *coordinationv1.Lease
		if l, err = cs.CoordinationV1().Leases(ns).Get(ctx, name, metav1.GetOptions{}); err == nil {
			meta = &l.ObjectMeta
		}
	default:
		var p *corev1.Pod
		if p, err = cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{}); err == nil {
			meta = &p.ObjectMeta
		}
	}
	if apierrors.IsNotFound(err) {
		return false
	}
	if err != nil {
		t.Fatalf("get %s %s/%s: %v", kind, ns, name, err)
	}
	return meta.DeletionTimestamp == nil
}

// lsLeasesJSON is `rightsize ls --leases --json`, decoded, by Lease name.
func lsLeasesJSON(t *testing.T) (leasesReport, map[string]leaseRow) {
	t.Helper()
	code, out, errs := rightsize(t, "ls", "--leases", "--json")
	if code != 0 {
		t.Fatalf("ls --leases --json exited %d: %s", code, errs)
	}
	var rep leasesReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("ls --leases --json: %v\n%s", err, out)
	}
	by := map[string]leaseRow{}
	for _, r := range rep.Leases {
		by[r.Name] = r
	}
	return rep, by
}

// TestNoNodeKubeSweepDeletesOnlyLapsedLeases: `rightsize sweep --backend
// kubernetes`, and `RIGHTSIZE_BACKEND=kubernetes rightsize sweep`, from a
// cache dir that knows none of the runs, delete the run Lease that lapsed,
// and the garbage collector its pods; a live run's Lease, a run's Lease
// that says no renewal, and Leases that are not provably a run's, however
// stale, are left with their pods. ls shows each with the state the sweep
// acted on, before and after; a dry run touches nothing.
func TestNoNodeKubeSweepDeletesOnlyLapsedLeases(t *testing.T) {
	cs, ns := kubeCLI(t)
	ctx, cancel := context.WithTimeout(context.Background(), gcWithin)
	defer cancel()
	long := time.Now().Add(-time.Hour)
	kubeLease(ctx, t, cs, ns, "rz-run-dead0001", runLabels("dead0001"), long, 15, "rz-dead0001-1", "rz-dead0001-2")
	kubeLease(ctx, t, cs, ns, "rz-run-11fe0001", runLabels("11fe0001"), time.Now(), 3600, "rz-11fe0001-1")
	kubeLease(ctx, t, cs, ns, "rz-run-0000aaaa", runLabels("0000aaaa"), time.Time{}, 0, "rz-0000aaaa-1")
	// Stale, and not a run's: the labels disagree; the name is not the
	// run's; no run label at all (not even listed).
	kubeLease(ctx, t, cs, ns, "rz-run-bad00001", map[string]string{backend.LabelRunID: "bad00001", backend.LabelRunIDAlt: "other"}, long, 15, "rz-bad00001-1")
	kubeLease(ctx, t, cs, ns, "squatter", runLabels("dead0009"), long, 15, "rz-squat-1")
	kubeLease(ctx, t, cs, ns, "unlabelled", nil, long, 15, "rz-unlabelled-1")
	cache := t.TempDir()

	t.Setenv(backend.EnvBackend, backend.Kubernetes)
	rep, by := lsLeasesJSON(t)
	if rep.EngineError != "" || rep.Backend != backend.Kubernetes || rep.Namespace != ns || !strings.HasSuffix(rep.Endpoint, "/namespaces/"+ns) {
		t.Fatalf("ls --leases --json: %+v", rep)
	}
	for _, w := range []struct {
		name, run, state string
		expired          bool
		reason           string
	}{
		{"rz-run-dead0001", "dead0001", "lapsed", true, "^dead: not renewed for 1h0m0"},
		{"rz-run-11fe0001", "11fe0001", "held", false, "^alive: renewed .* ago, within its 1h0m0s"},
		{"rz-run-0000aaaa", "0000aaaa", "unjudged", false, "never judged lapsed"},
		{"rz-run-bad00001", "", "not a run's", true, `run_id label "other" is not its .*never touched`},
		{"squatter", "", "not a run's", true, "its name is not rz-run-dead0009"},
	} {
		r, ok := by[w.name]
		if !ok {
			t.Errorf("ls --leases --json has no %s: %+v", w.name, rep.Leases)
			continue
		}
		if r.Run != w.run || r.State != w.state || r.Expired != w.expired || !regexp.MustCompile(w.reason).MatchString(r.Reason) || r.Holder != "ci-7/4242" {
			t.Errorf("%s: %+v, want run %q, state %q, expired %v, a reason matching %q, holder ci-7/4242", w.name, r, w.run, w.state, w.expired, w.reason)
		}
	}
	if d := by["rz-run-dead0001"]; d.DurationSeconds != 15 || d.RenewedISO == "" || d.ExpiresISO == "" {
		t.Errorf("the lapsed Lease's times: %+v", d)
	}
	if _, ok := by["unlabelled"]; ok || len(by) != 5 {
		t.Errorf("ls --leases lists %d Leases, want the 5 with a run label: %+v", len(by), rep.Leases)
	}

	code, out, errs := rightsize(t, "ls", "--cache", cache)
	if code != 0 {
		t.Fatalf("ls exited %d: %s", code, errs)
	}
	for _, re := range []string{
		`(?m)^no keep-alive sandboxes \(registry \S+; the kubernetes backend makes no keep-alive sandboxes\)$`,
		`(?m)^run Leases \(kubernetes engine at https://\S+/namespaces/` + ns + `\):$`,
		`(?m)^LEASE +RUN +HOLDER +RENEWED +LASTS +EXPIRED +STATE +REASON$`,
		`(?m)^rz-run-dead0001 +dead0001 +ci-7/4242 +1h00m ago +15s +yes +lapsed +dead: `,
		`(?m)^rz-run-11fe0001 +11fe0001 +ci-7/4242 +\d+s ago +1h00m +no +held +alive: `,
		`(?m)^rz-run-0000aaaa +0000aaaa +ci-7/4242 +- +- +- +unjudged `,
		`(?m)^rz-run-bad00001 +- +ci-7/4242 +1h00m ago +15s +yes +not a run's +not a run's Lease`,
		`(?m)^squatter +- +`,
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("ls: no line matching %s in\n%s", re, out)
		}
	}

	code, out, errs = rightsize(t, "sweep", "--dry-run", "--cache", cache)
	if code != 0 || !strings.Contains(out, "lapsed run claims would be dropped (the engine removes what they own): dead0001\n") {
		t.Fatalf("sweep --dry-run exited %d:\n%s%s", code, out, errs)
	}
	if !there(ctx, t, cs, ns, "Lease", "rz-run-dead0001") {
		t.Fatalf("sweep --dry-run deleted the lapsed Lease")
	}

	t.Setenv(backend.EnvBackend, "")
	code, out, errs = rightsize(t, "sweep", "--backend", "kubernetes", "--cache", cache)
	if code != 0 {
		t.Fatalf("sweep --backend kubernetes exited %d:\n%s%s", code, out, errs)
	}
	if !regexp.MustCompile(`^sweep of \S+ for kubernetes at https://\S+/namespaces/`+ns+`: 0 runs, 0 reaped`).MatchString(out) ||
		!strings.Contains(out, "\n  lapsed run claims dropped (the engine removes what they own): dead0001\n") {
		t.Errorf("sweep --backend kubernetes said:\n%s", out)
	}
	if there(ctx, t, cs, ns, "Lease", "rz-run-dead0001") {
		t.Fatalf("the lapsed Lease is still there after the sweep")
	}
	for _, p := range []string{"rz-dead0001-1", "rz-dead0001-2"} {
		if err := kubetest.WaitGone(ctx, cs.CoreV1().Pods(ns).Get, p); err != nil {
			t.Fatalf("pod %s of the lapsed Lease, through the garbage collector: %v", p, err)
		}
	}
	// The garbage collector has acted on the sweep's delete: what it left
	// is what the sweep left.
	for _, o := range [][2]string{
		{"Lease", "rz-run-11fe0001"}, {"Pod", "rz-11fe0001-1"},
		{"Lease", "rz-run-0000aaaa"}, {"Pod", "rz-0000aaaa-1"},
		{"Lease", "rz-run-bad00001"}, {"Pod", "rz-bad00001-1"},
		{"Lease", "squatter"}, {"Pod", "rz-squat-1"},
		{"Lease", "unlabelled"}, {"Pod", "rz-unlabelled-1"},
	} {
		if !there(ctx, t, cs, ns, o[0], o[1]) {
			t.Errorf("%s %s is gone: the sweep was to leave it", o[0], o[1])
		}
	}

	// RIGHTSIZE_BACKEND=kubernetes, no flag: the same sweep.
	kubeLease(ctx, t, cs, ns, "rz-run-dead0002", runLabels("dead0002"), long, 15, "rz-dead0002-1")
	t.Setenv(backend.EnvBackend, backend.Kubernetes)
	code, out, errs = rightsize(t, "sweep", "--cache", cache)
	if code != 0 || !strings.Contains(out, "lapsed run claims dropped (the engine removes what they own): dead0002\n") {
		t.Fatalf("RIGHTSIZE_BACKEND=kubernetes rightsize sweep exited %d:\n%s%s", code, out, errs)
	}
	if err := kubetest.WaitGone(ctx, cs.CoreV1().Pods(ns).Get, "rz-dead0002-1"); err != nil {
		t.Fatalf("pod of the second lapsed Lease: %v", err)
	}

	_, by = lsLeasesJSON(t)
	if _, ok := by["rz-run-dead0001"]; ok || len(by) != 4 {
		t.Errorf("ls --leases after the sweeps: %+v, want the 4 Leases it left", by)
	}
}

// TestKubeLsWithoutACluster: ls on the kubernetes backend with no cluster
// answering still lists the runs and exits 0, saying why no Lease was
// listed; ls --leases on a backend without Leases says so.
func TestKubeLsWithoutACluster(t *testing.T) {
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kc, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u, namespace: ci}}]
current-context: x
`), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KUBECONFIG", kc)
	t.Setenv(kubernetes.EnvNamespace, "")
	t.Setenv(backend.EnvBackend, backend.Kubernetes)
	cache := t.TempDir()

	code, out, errs := rightsize(t, "ls", "--cache", cache)
	if code != 0 || !strings.Contains(out, "no runs in ") || !strings.Contains(out, "the engine could not be asked: kubernetes backend") {
		t.Errorf("ls with no cluster exited %d:\n%s%s", code, out, errs)
	}
	code, out, errs = rightsize(t, "ls", "--leases")
	if code != 0 || !regexp.MustCompile(`^run Leases not listed: kubernetes backend: kubernetes list pods \(namespace ci at https://127\.0\.0\.1:1\): engine unreachable`).MatchString(out) {
		t.Errorf("ls --leases with no cluster exited %d:\n%s%s", code, out, errs)
	}
	code, out, _ = rightsize(t, "ls", "--leases", "--json")
	var rep leasesReport
	if code != 0 || json.Unmarshal([]byte(out), &rep) != nil || rep.EngineError == "" || rep.Leases == nil {
		t.Errorf("ls --leases --json with no cluster exited %d: %s", code, out)
	}

	t.Setenv(backend.EnvBackend, backend.Memory)
	t.Setenv(memory.EnvDir, t.TempDir())
	code, out, errs = rightsize(t, "ls", "--leases")
	if code != 0 || out != "run Leases not listed: "+errNoLeases("memory")+"\n" {
		t.Errorf("ls --leases on the memory backend exited %d:\n%s%s", code, out, errs)
	}
}
