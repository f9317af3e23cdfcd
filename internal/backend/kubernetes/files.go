package kubernetes

import (
	"context"
	"fmt"
	"maps"
	"path"
	"strconv"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rightsize/rightsize-go/internal/backend"
)

// A sandbox's Spec.Files are one ConfigMap of the pod's name, owned by the
// run's Lease like the pod (so the garbage collector deletes it with the
// run), each file a key of it mounted at its path (a subPath mount).

// MaxFilesBytes is what a sandbox's files may hold in all: the API server
// refuses a ConfigMap whose data is larger (1 MiB).
const MaxFilesBytes = 1 << 20

// filesVolume is the pod's volume of its files.
const filesVolume = "rz-files"

func fileKey(i int) string { return "file-" + strconv.Itoa(i) }

// mountFiles mounts files into pod's container from the ConfigMap of the
// pod's name, refusing what a ConfigMap or a mount cannot be.
func mountFiles(pod *corev1.Pod, files []backend.File) error {
	if len(files) == 0 {
		return nil
	}
	src := &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: pod.Name}}
	c := &pod.Spec.Containers[0]
	seen := map[string]bool{}
	total := 0
	for i, f := range files {
		p := f.GuestPath
		switch {
		case p == "" || !path.IsAbs(p) || path.Clean(p) != p || p == "/":
			return fmt.Errorf("kubernetes: Spec.Files: %q is not an absolute, clean path of a file", p)
		case seen[p]:
			return fmt.Errorf("kubernetes: Spec.Files: two files at %s", p)
		case f.Mode < 0 || f.Mode > 0o777:
			return fmt.Errorf("kubernetes: Spec.Files: %s: mode %#o: want permission bits, 0 to 0777", p, f.Mode)
		}
		seen[p] = true
		total += len(f.Content)
		mode := int32(f.Mode)
		if mode == 0 {
			mode = 0o644
		}
		k := fileKey(i)
		src.Items = append(src.Items, corev1.KeyToPath{Key: k, Path: k, Mode: &mode})
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: filesVolume, MountPath: p, SubPath: k, ReadOnly: true})
	}
	if total > MaxFilesBytes {
		return fmt.Errorf("kubernetes: Spec.Files hold %d bytes in all, more than a ConfigMap holds (%d, 1 MiB): put the larger files in the image", total, MaxFilesBytes)
	}
	pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: filesVolume, VolumeSource: corev1.VolumeSource{ConfigMap: src}})
	return nil
}

// filesMap is the ConfigMap of pod's files (mountFiles), labelled as the
// pod is; nil when there are none. It is immutable: the kubelet need not
// watch it.
func filesMap(pod *corev1.Pod, files []backend.File) *corev1.ConfigMap {
	if len(files) == 0 {
		return nil
	}
	yes := true
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Labels: maps.Clone(pod.Labels)}, Immutable: &yes}
	for i, f := range files {
		// Data holds text; anything else would reach the API server
		// mangled (JSON strings are UTF-8).
		if utf8.Valid(f.Content) {
			if cm.Data == nil {
				cm.Data = map[string]string{}
			}
			cm.Data[fileKey(i)] = string(f.Content)
			continue
		}
		if cm.BinaryData == nil {
			cm.BinaryData = map[string][]byte{}
		}
		cm.BinaryData[fileKey(i)] = f.Content
	}
	return cm
}

// hasFiles: p mounts the ConfigMap of its name that Start made of its files.
func hasFiles(p *corev1.Pod) bool {
	for _, v := range p.Spec.Volumes {
		if v.Name == filesVolume && v.ConfigMap != nil && v.ConfigMap.Name == p.Name {
			return true
		}
	}
	return false
}

// deletePodFiles deletes the ConfigMap of p's files, when p has some.
func (d *Driver) deletePodFiles(ctx context.Context, p *corev1.Pod) error {
	if !hasFiles(p) {
		return nil
	}
	return d.deleteFiles(ctx, p.Labels[backend.LabelRunID], p.Name)
}

// deleteFiles deletes the ConfigMap of pod name's files, when it is run
// runID's and that pod's: nil when it is gone, or another's (left alone).
func (d *Driver) deleteFiles(ctx context.Context, runID, name string) error {
	cctx, cancel := context.WithTimeout(ctx, CallTimeout)
	defer cancel()
	cm, err := d.cs.CoreV1().ConfigMaps(d.ns).Get(cctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return d.apiError("get ConfigMap "+name+" (a pod's files)", err)
	}
	if owned(cm.Labels, runID, "ConfigMap "+name) != nil || cm.Labels[LabelSandbox] != name {
		return nil
	}
	err = d.cs.CoreV1().ConfigMaps(d.ns).Delete(cctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &cm.UID}})
	if err == nil || apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return d.apiError("delete ConfigMap "+name+" (a pod's files)", err)
}
