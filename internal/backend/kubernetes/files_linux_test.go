package kubernetes_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rightsize/rightsize-go/internal/backend"
	"github.com/rightsize/rightsize-go/internal/backend/kubernetes"
	"github.com/rightsize/rightsize-go/internal/kubetest"
)

// TestNoNodeFilesAreAConfigMapTheLeaseOwns: a sandbox's files are a
// ConfigMap of its pod's name, with their content, the run's labels and an
// ownerReference to the run's Lease, which the pod mounts path by path;
// removing the pod removes it, stopping one too, and deleting the Lease
// makes the garbage collector delete the rest.
func TestNoNodeFilesAreAConfigMapTheLeaseOwns(t *testing.T) {
	t.Parallel()
	cs := kubetest.Client(t)
	ns := kubetest.Namespace(t, cs, "rz-files-")
	ctx, cancel := context.WithTimeout(context.Background(), gcWithin)
	defer cancel()
	d := open(t, ns, kubernetes.DefaultLeaseSeconds)
	const run = "0f11e5ab"
	files := []backend.File{
		{GuestPath: "/etc/app/config.yaml", Content: []byte("port: 8080\n"), Mode: 0o600},
		{GuestPath: "/usr/local/bin/tool", Content: []byte{0x7f, 'E', 'L', 'F', 0xff, 0x00, 0xfe}, Mode: 0o755},
		{GuestPath: "/etc/motd"},
	}
	var pods []string
	for i := range 3 {
		name := "rz-" + run + "-" + string(rune('1'+i))
		if _, err := d.Start(ctx, name, backend.Spec{Image: never, RunID: run, Files: files}); err != nil {
			t.Fatalf("start %s: %v", name, err)
		}
		pods = append(pods, name)
	}
	lease := leaseOf(ctx, t, cs, ns, run)
	if lease == nil {
		t.Fatalf("run %s has no Lease", run)
	}

	cm, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, pods[0], metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the ConfigMap of pod %s: %v", pods[0], err)
	}
	if refs := cm.OwnerReferences; len(refs) != 1 || refs[0].UID != lease.UID || refs[0].Kind != "Lease" {
		t.Errorf("ConfigMap ownerReferences %+v: want one, to Lease %s (%s)", refs, lease.Name, lease.UID)
	}
	if cm.Labels[backend.LabelRunID] != run || cm.Labels[backend.LabelRunIDAlt] != run || cm.Labels[kubernetes.LabelSandbox] != pods[0] {
		t.Errorf("ConfigMap labels %v", cm.Labels)
	}
	p, err := cs.CoreV1().Pods(ns).Get(ctx, pods[0], metav1.GetOptions{})
	if err != nil {
		t.Fatalf("pod %s: %v", pods[0], err)
	}
	if len(p.Spec.Volumes) != 1 || p.Spec.Volumes[0].ConfigMap == nil || p.Spec.Volumes[0].ConfigMap.Name != cm.Name {
		t.Fatalf("pod volumes %+v: want the ConfigMap %s", p.Spec.Volumes, cm.Name)
	}
	items, mounts := p.Spec.Volumes[0].ConfigMap.Items, p.Spec.Containers[0].VolumeMounts
	if len(items) != len(files) || len(mounts) != len(files) {
		t.Fatalf("%d items, %d mounts, want %d each", len(items), len(mounts), len(files))
	}
	for i, f := range files {
		// As the API server stored them.
		got, ok := []byte(cm.Data[items[i].Key]), true
		if _, text := cm.Data[items[i].Key]; !text {
			got, ok = cm.BinaryData[items[i].Key]
		}
		mode := int32(f.Mode)
		if mode == 0 {
			mode = 0o644
		}
		if !ok || !bytes.Equal(got, f.Content) || items[i].Mode == nil || *items[i].Mode != mode {
			t.Errorf("%s: the ConfigMap holds %q (key %s, there: %v), mode %v; want %q, %#o", f.GuestPath, got, items[i].Key, ok, items[i].Mode, f.Content, mode)
		}
		if m := mounts[i]; m.MountPath != f.GuestPath || m.SubPath != items[i].Key || !m.ReadOnly || m.Name != p.Spec.Volumes[0].Name {
			t.Errorf("%s: the pod mounts %+v", f.GuestPath, m)
		}
	}

	// Removing a pod, or stopping its sandbox, deletes its files.
	if err := d.Remove(ctx, backend.SandboxKind, run, pods[:1])[0]; err != nil {
		t.Fatalf("remove %s: %v", pods[0], err)
	}
	if err := kubetest.WaitGone(ctx, cs.CoreV1().ConfigMaps(ns).Get, pods[0]); err != nil {
		t.Fatalf("the ConfigMap of the removed pod: %v", err)
	}
	sb, err := d.Start(ctx, pods[0], backend.Spec{Image: never, RunID: run, Files: files[:1]})
	if err != nil {
		t.Fatalf("start %s again: %v", pods[0], err)
	}
	if err := sb.Stop(ctx, 0); err != nil {
		t.Fatalf("stop %s: %v", pods[0], err)
	}
	if err := kubetest.WaitGone(ctx, cs.CoreV1().ConfigMaps(ns).Get, pods[0]); err != nil {
		t.Fatalf("the ConfigMap of the stopped sandbox: %v", err)
	}

	// The run ends: its Lease goes, and the garbage collector deletes the
	// pods and their files.
	if err := d.DropRun(ctx, run, 0); err != nil {
		t.Fatalf("drop the run's Lease: %v", err)
	}
	for _, name := range pods[1:] {
		if err := kubetest.WaitGone(ctx, cs.CoreV1().ConfigMaps(ns).Get, name); err != nil {
			t.Fatalf("the ConfigMap of %s, after the Lease: %v", name, err)
		}
		if err := kubetest.WaitGone(ctx, cs.CoreV1().Pods(ns).Get, name); err != nil {
			t.Fatalf("pod %s, after the Lease: %v", name, err)
		}
	}
}

// TestNoNodeFilesUpToWhatAConfigMapHolds: files of exactly MaxFilesBytes
// in all are taken, by the API server too; one byte more is refused
// before anything is created, and the API server would refuse it as well.
func TestNoNodeFilesUpToWhatAConfigMapHolds(t *testing.T) {
	t.Parallel()
	cs := kubetest.Client(t)
	ns := kubetest.Namespace(t, cs, "rz-files-max-")
	ctx, cancel := context.WithTimeout(context.Background(), gcWithin)
	defer cancel()
	d := open(t, ns, kubernetes.DefaultLeaseSeconds)
	const run = "0f11e5ac"
	half := bytes.Repeat([]byte{0xff}, kubernetes.MaxFilesBytes/2) // binaryData
	text := strings.Repeat("x", kubernetes.MaxFilesBytes/2)        // data
	full := []backend.File{{GuestPath: "/a", Content: half}, {GuestPath: "/b", Content: []byte(text)}}
	if _, err := d.Start(ctx, "rz-"+run+"-1", backend.Spec{Image: never, RunID: run, Files: full}); err != nil {
		t.Fatalf("files of %d bytes: %v", kubernetes.MaxFilesBytes, err)
	}
	cm, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "rz-"+run+"-1", metav1.GetOptions{})
	if err != nil || len(cm.BinaryData) != 1 || len(cm.Data) != 1 {
		t.Fatalf("the ConfigMap of %d bytes: %v %d %d", kubernetes.MaxFilesBytes, err, len(cm.BinaryData), len(cm.Data))
	}

	over := []backend.File{{GuestPath: "/a", Content: half}, {GuestPath: "/b", Content: []byte(text + "x")}}
	_, err = d.Start(ctx, "rz-"+run+"-2", backend.Spec{Image: never, RunID: run, Files: over})
	if err == nil || !strings.Contains(err.Error(), "more than a ConfigMap holds") {
		t.Fatalf("files of one byte more: %v, want a refusal that says why", err)
	}
	for _, get := range []func() error{
		func() error { _, err := cs.CoreV1().Pods(ns).Get(ctx, "rz-"+run+"-2", metav1.GetOptions{}); return err },
		func() error {
			_, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "rz-"+run+"-2", metav1.GetOptions{})
			return err
		},
	} {
		if err := get(); !apierrors.IsNotFound(err) {
			t.Errorf("refused files made something: %v", err)
		}
	}
	// The limit is the API server's own: it refuses the same one byte more.
	_, err = cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "one-byte-over"},
		BinaryData: map[string][]byte{"a": half}, Data: map[string]string{"b": text + "x"},
	}, metav1.CreateOptions{})
	var status apierrors.APIStatus
	if !apierrors.IsInvalid(err) || !errors.As(err, &status) || !strings.Contains(err.Error(), "1048576") {
		t.Fatalf("the API server on a ConfigMap of %d bytes: %v, want it refused as too long", kubernetes.MaxFilesBytes+1, err)
	}
}
