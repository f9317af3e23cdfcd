package kubernetes_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/rightsize/rightsize-go/internal/backend"
	"github.com/rightsize/rightsize-go/internal/backend/kubernetes"
	"github.com/rightsize/rightsize-go/internal/kubetest"
	"github.com/rightsize/rightsize-go/internal/proctest"
)

// TestNoNodeRoleIsEnough applies the Role of docs/kubernetes.md as it is,
// binds it to a service account, and runs a whole run as that account
// alone: without the binding the backend is refused, with it nothing is.
func TestNoNodeRoleIsEnough(t *testing.T) {
	t.Parallel()
	cs := kubetest.Client(t)
	ns := kubetest.Namespace(t, cs, "rz-rbac-")
	ctx, cancel := context.WithTimeout(context.Background(), gcWithin)
	defer cancel()

	role := docRole(t)
	if _, err := cs.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatalf("apply the Role of docs/kubernetes.md: %v", err)
	}
	const sa = "rightsize-runner"
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("service account: %v", err)
	}
	kc := impersonating(t, "system:serviceaccount:"+ns+":"+sa)
	vars := map[string]string{"KUBECONFIG": kc, kubernetes.EnvNamespace: ns, kubernetes.EnvLeaseSeconds: "3"}
	if _, err := kubernetes.OpenEnv(ctx, vars); !apierrors.IsForbidden(err) {
		t.Fatalf("open as %s before the binding: %v, want forbidden (is the impersonation in force?)", sa, err)
	}
	if _, err := cs.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "rightsize"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: ns}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("bind the Role: %v", err)
	}
	var d *kubernetes.Driver
	proctest.WaitUntil(t, 30*time.Second, "the binding in force", func() bool {
		var err error
		d, err = kubernetes.OpenEnv(ctx, vars)
		return err == nil
	})
	defer d.Close()

	const run = "0dd5ba11"
	net := "rz-net-" + run
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s as %s: %v", what, sa, err)
		}
	}
	_, err := d.CreateNetwork(ctx, net, run)
	must("create a network", err)
	sb, err := d.Start(ctx, "rz-"+run+"-1", backend.Spec{Image: never, RunID: run, Ports: []string{"80"}, Networks: map[string][]string{net: {"db"}},
		Files: []backend.File{{GuestPath: "/etc/app.conf", Content: []byte("a=1\n")}}})
	must("start a pod with files", err)
	if _, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, sb.Name(), metav1.GetOptions{}); err != nil {
		t.Fatalf("the pod's files: %v", err)
	}
	lease := leaseOf(ctx, t, cs, ns, run)
	if lease == nil {
		t.Fatalf("no Lease")
	}
	proctest.WaitUntil(t, 30*time.Second, "a renewal as "+sa, func() bool {
		l := leaseOf(ctx, t, cs, ns, run)
		return l != nil && l.Spec.RenewTime.After(lease.Spec.RenewTime.Time)
	})
	if _, err := sb.Logs(ctx); apierrors.IsForbidden(err) {
		t.Fatalf("logs as %s: %v", sa, err)
	}
	_, err = d.Adopt(ctx, sb.Name())
	if !errors.Is(err, backend.ErrStarting) {
		t.Fatalf("adopt the pending pod as %s: %v", sa, err)
	}
	ids, err := d.ListRun(ctx, backend.SandboxKind, run)
	must("list the run's pods", err)
	if !slices.Equal(ids, []string{sb.Name()}) {
		t.Fatalf("the run's pods: %v", ids)
	}
	nets, err := d.ListRun(ctx, backend.NetworkKind, run)
	must("list the run's networks", err)
	if !slices.Equal(nets, []string{net}) {
		t.Fatalf("the run's networks: %v", nets)
	}
	must("check a pod", d.CheckOwned(ctx, backend.SandboxKind, run, ids)[0])
	_, err = d.SweepLapsed(ctx, time.Now(), false)
	must("sweep lapsed Leases", err)
	must("remove the network", d.Remove(ctx, backend.NetworkKind, run, nets)[0])
	must("remove the pod and its files", d.Remove(ctx, backend.SandboxKind, run, ids)[0])
	if _, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, sb.Name(), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the removed pod's files: %v, want them gone", err)
	}
	must("drop the run's Lease", d.DropRun(ctx, run, 0))
	if leaseOf(ctx, t, cs, ns, run) != nil {
		t.Fatalf("the Lease is still there")
	}
}

// docRole is the Role of docs/kubernetes.md: its first yaml block.
func docRole(t *testing.T) *rbacv1.Role {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "kubernetes.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)```yaml\n(.*?)```").FindSubmatch(doc)
	if m == nil {
		t.Fatalf("docs/kubernetes.md has no yaml block")
	}
	var role rbacv1.Role
	if err := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(m[1]), 4096).Decode(&role); err != nil {
		t.Fatalf("the Role of docs/kubernetes.md: %v", err)
	}
	if role.Kind != "Role" || role.Name == "" {
		t.Fatalf("the yaml block of docs/kubernetes.md is a %q named %q, not a Role", role.Kind, role.Name)
	}
	return &role
}

// impersonating writes a kubeconfig that is the test cluster's, acting as
// user.
func impersonating(t *testing.T, user string) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(os.Getenv(kubetest.EnvKubeconfig))
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range cfg.AuthInfos {
		a.Impersonate = user
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestNoNodeRoleWithoutConfigMapsServesARunWithoutFiles: the Role of
// docs/kubernetes.md less its configmaps rule still serves a run that has
// no files (its pods are started, stopped, removed and closed without a
// call on ConfigMaps), and refuses files, saying so.
func TestNoNodeRoleWithoutConfigMapsServesARunWithoutFiles(t *testing.T) {
	t.Parallel()
	cs := kubetest.Client(t)
	ns := kubetest.Namespace(t, cs, "rz-rbac-nocm-")
	ctx, cancel := context.WithTimeout(context.Background(), gcWithin)
	defer cancel()
	role := docRole(t)
	rules := role.Rules[:0]
	for _, r := range role.Rules {
		if !slices.Contains(r.Resources, "configmaps") {
			rules = append(rules, r)
		}
	}
	if len(rules) == len(docRole(t).Rules) {
		t.Fatalf("the Role of docs/kubernetes.md has no configmaps rule")
	}
	role.Rules = rules
	if _, err := cs.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatalf("the Role without configmaps: %v", err)
	}
	const sa = "rightsize-runner"
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("service account: %v", err)
	}
	if _, err := cs.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "rightsize"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: ns}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("bind the Role: %v", err)
	}
	vars := map[string]string{"KUBECONFIG": impersonating(t, "system:serviceaccount:"+ns+":"+sa), kubernetes.EnvNamespace: ns, kubernetes.EnvLeaseSeconds: "3"}
	var d *kubernetes.Driver
	proctest.WaitUntil(t, 30*time.Second, "the binding in force", func() bool {
		var err error
		d, err = kubernetes.OpenEnv(ctx, vars)
		return err == nil
	})
	defer d.Close()

	const run = "0dd5ba12"
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s as %s without configmaps: %v", what, sa, err)
		}
	}
	sb, err := d.Start(ctx, "rz-"+run+"-1", backend.Spec{Image: never, RunID: run})
	must("start a pod", err)
	must("stop it", sb.Stop(ctx, 0))
	_, err = d.Start(ctx, "rz-"+run+"-2", backend.Spec{Image: never, RunID: run})
	must("start a pod", err)
	must("remove it", d.Remove(ctx, backend.SandboxKind, run, []string{"rz-" + run + "-2"})[0])
	_, err = d.Start(ctx, "rz-"+run+"-3", backend.Spec{Image: never, RunID: run})
	must("start a pod", err)
	_, err = d.CloseRun(ctx, run)
	must("close the run", err)
	if err := kubetest.WaitGone(ctx, cs.CoreV1().Pods(ns).Get, "rz-"+run+"-3"); err != nil {
		t.Errorf("the closed run's pod: %v", err)
	}
	_, err = d.Start(ctx, "rz-"+run+"-4", backend.Spec{Image: never, RunID: run, Files: []backend.File{{GuestPath: "/a"}}})
	if !errors.Is(err, kubernetes.ErrForbidden) || !strings.Contains(err.Error(), "create on configmaps") {
		t.Errorf("files without the configmaps rule: %v, want ErrForbidden, naming create on configmaps", err)
	}
	if _, err := cs.CoreV1().Pods(ns).Get(ctx, "rz-"+run+"-4", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the pod of refused files: %v, want none", err)
	}
}
