package kubernetes_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/testcontainers/testcontainers-go/wait"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8s "k8s.io/client-go/kubernetes"

	"github.com/rightsize/rightsize-go/internal/backend"
	"github.com/rightsize/rightsize-go/internal/backend/kubernetes"
	"github.com/rightsize/rightsize-go/internal/kubetest"
	"github.com/rightsize/rightsize-go/internal/proctest"
)

// roleWithout is the Role of docs/kubernetes.md less verbs on resource,
// and only that.
func roleWithout(t *testing.T, resource string, verbs ...string) *rbacv1.Role {
	t.Helper()
	role := docRole(t)
	var rules []rbacv1.PolicyRule
	found := false
	for _, r := range role.Rules {
		if !slices.Contains(r.Resources, resource) {
			rules = append(rules, r)
			continue
		}
		if others := slices.DeleteFunc(slices.Clone(r.Resources), func(s string) bool { return s == resource }); len(others) > 0 {
			o := *r.DeepCopy()
			o.Resources = others
			rules = append(rules, o)
		}
		left := slices.DeleteFunc(slices.Clone(r.Verbs), func(s string) bool { return slices.Contains(verbs, s) })
		found = found || len(left) < len(r.Verbs)
		if len(left) > 0 {
			o := *r.DeepCopy()
			o.Resources, o.Verbs = []string{resource}, left
			rules = append(rules, o)
		}
	}
	if !found {
		t.Fatalf("the Role of docs/kubernetes.md gives none of %v on %s", verbs, resource)
	}
	role.Rules = rules
	return role
}

// asRole opens the backend on namespace ns as a service account bound to
// role alone, once the binding is in force.
func asRole(ctx context.Context, t *testing.T, cs k8s.Interface, ns string, role *rbacv1.Role, leaseSeconds string) *kubernetes.Driver {
	t.Helper()
	if _, err := cs.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatalf("the Role: %v", err)
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
	vars := map[string]string{"KUBECONFIG": impersonating(t, "system:serviceaccount:"+ns+":"+sa), kubernetes.EnvNamespace: ns, kubernetes.EnvLeaseSeconds: leaseSeconds}
	var d *kubernetes.Driver
	proctest.WaitUntil(t, 30*time.Second, "the binding in force", func() bool {
		var err error
		d, err = kubernetes.OpenEnv(ctx, vars)
		return err == nil
	})
	t.Cleanup(func() { d.Close() })
	return d
}

// With the Role of docs/kubernetes.md less one verb (for a stream, which
// either of two verbs opens, less the resource), the first start that
// needs it fails at once, naming it, and leaves nothing made: no renewal
// refused for a whole test, no Lease left at its end, no wait strategy run
// out for want of a forward or the logs. A stream that its other verb
// opens is not refused.
func TestRoleLessOneVerbFailsTheStartNamingIt(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		resource string
		verbs    []string
		want     string // "" when the start works
	}{
		{"leases", []string{"patch"}, "patch on leases (coordination.k8s.io)"},
		{"leases", []string{"delete"}, "delete on leases (coordination.k8s.io)"},
		{"pods/portforward", []string{"create", "get"}, "create or get on pods/portforward"},
		{"pods/portforward", []string{"create"}, ""},
		{"pods/log", []string{"get"}, "get on pods/log"},
	} {
		t.Run(strings.Join(c.verbs, "-")+"-"+strings.ReplaceAll(c.resource, "/", "-"), func(t *testing.T) {
			t.Parallel()
			node := strings.HasPrefix(c.resource, "pods/") // the start waits for its pod to run
			img := never
			if node {
				img = kubetest.Busybox(t) // skips where no node runs
			}
			cs := kubetest.Client(t)
			ns := kubetest.Namespace(t, cs, "rz-less-")
			ctx, cancel := context.WithTimeout(context.Background(), gcWithin)
			defer cancel()
			d := asRole(ctx, t, cs, ns, roleWithout(t, c.resource, c.verbs...), "3")
			const run = "1e55e001"
			name := "rz-" + run + "-1"
			defer d.CloseRun(context.Background(), run)
			var err error
			switch c.resource {
			case "pods/portforward":
				_, err = d.Create(ctx, name, backend.Spec{Image: img, Cmd: []string{"/server"}, Ports: []string{"8080/tcp"}, RunID: run,
					WaitingFor: wait.ForListeningPort("8080/tcp").WithStartupTimeout(time.Minute)})
			case "pods/log":
				_, err = d.Create(ctx, name, backend.Spec{Image: img, Cmd: []string{"/server"}, RunID: run,
					WaitingFor: wait.ForLog("ready").WithStartupTimeout(time.Minute)})
			default:
				_, err = d.Start(ctx, name, backend.Spec{Image: img, RunID: run})
			}
			if c.want == "" {
				if err != nil {
					t.Fatalf("a start without %v on %s: %v, want it to work", c.verbs, c.resource, err)
				}
				return
			}
			if !errors.Is(err, kubernetes.ErrForbidden) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("a start without %s: %v, want ErrForbidden naming it", c.want, err)
			}
			t.Logf("%v", err)
			if !node {
				if leaseOf(ctx, t, cs, ns, run) != nil {
					t.Errorf("the refused start made the run's Lease")
				}
				if _, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
					t.Errorf("the refused start's pod: %v, want none", err)
				}
			}
		})
	}
}

// The cluster stops allowing the renewal of a live run's Lease: the
// refusal is said at once, the run's later starts fail with it, and the
// stop of a pod the run held fails the test, rather than the test passing
// while a sweep takes the run.
func TestNoNodeARenewalRefusedIsSaid(t *testing.T) {
	t.Parallel()
	cs := kubetest.Client(t)
	ns := kubetest.Namespace(t, cs, "rz-refused-")
	ctx, cancel := context.WithTimeout(context.Background(), gcWithin)
	defer cancel()
	d := asRole(ctx, t, cs, ns, docRole(t), "3")
	var w warnings
	d.SetWarn(w.add)
	const run = "1e55e002"
	defer d.CloseRun(context.Background(), run)
	sb, err := d.Start(ctx, "rz-"+run+"-1", backend.Spec{Image: never, RunID: run})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.RbacV1().Roles(ns).Update(ctx, roleWithout(t, "leases", "patch"), metav1.UpdateOptions{}); err != nil {
		t.Fatalf("take patch on leases from the Role: %v", err)
	}
	proctest.WaitUntil(t, 30*time.Second, "the refused renewal said", func() bool { return len(w.all()) > 0 })
	said := w.all()
	if len(said) != 1 || !strings.Contains(said[0], "refused to renew") || !strings.Contains(said[0], "forbidden") {
		t.Errorf("said %q, want the refusal said once", said)
	}
	if _, err := d.Start(ctx, "rz-"+run+"-2", backend.Spec{Image: never, RunID: run}); !errors.Is(err, backend.ErrClaimLost) {
		t.Errorf("a start after a refused renewal: %v, want ErrClaimLost", err)
	}
	if err := sb.Stop(ctx, 0); !errors.Is(err, backend.ErrClaimLost) {
		t.Errorf("the stop of a pod whose run's renewal was refused: %v, want ErrClaimLost", err)
	} else {
		t.Logf("%v", err)
	}
}
