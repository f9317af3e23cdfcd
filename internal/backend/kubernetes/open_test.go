package kubernetes_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rightsize/rightsize-go/internal/backend"
	"github.com/rightsize/rightsize-go/internal/backend/kubernetes"
)

// A kubeconfig of a server nobody listens on.
const refused = `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u, namespace: from-context}}]
current-context: x
`

func TestOpenSaysWhatIsWrong(t *testing.T) {
	dir := t.TempDir()
	kc := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kc, []byte(refused), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		env    map[string]string
		want   string
		is     error
		reason string
	}{
		{map[string]string{"KUBECONFIG": filepath.Join(dir, "none")}, "no cluster configured", nil, "no kubeconfig, not in a cluster"},
		{map[string]string{"KUBECONFIG": kc}, "127.0.0.1:1", backend.ErrUnreachable, "nobody listens"},
		{map[string]string{"KUBECONFIG": kc, kubernetes.EnvNamespace: "a/b"}, "not a DNS label", nil, "a hostile namespace"},
		{map[string]string{"KUBECONFIG": kc, kubernetes.EnvLeaseSeconds: "1"}, "from 3 to 3600", nil, "a lease too short to renew"},
		{map[string]string{"KUBECONFIG": kc, kubernetes.EnvStartTimeout: "soon"}, "whole seconds", nil, "a start timeout that is no number"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		_, err := kubernetes.OpenEnv(ctx, c.env)
		cancel()
		if err == nil || !strings.Contains(err.Error(), c.want) || c.is != nil && !errors.Is(err, c.is) {
			t.Errorf("%s: %v, want an error saying %q (wrapping %v)", c.reason, err, c.want, c.is)
		}
	}
}

func TestOpenNamespaceFromTheContextUnlessNamed(t *testing.T) {
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kc, []byte(refused), 0o600); err != nil {
		t.Fatal(err)
	}
	for env, want := range map[string]string{"": "from-context", "named": "named"} {
		d, err := kubernetes.LoadEnv(map[string]string{"KUBECONFIG": kc, kubernetes.EnvNamespace: env})
		if err != nil {
			t.Fatal(err)
		}
		if d.Namespace() != want || d.Endpoint() != "https://127.0.0.1:1/namespaces/"+want {
			t.Errorf("%s=%q: namespace %s, endpoint %s", kubernetes.EnvNamespace, env, d.Namespace(), d.Endpoint())
		}
		plan, err := d.Watchdog("0a1b2c3d")
		if err != nil || !plan.Hold || !slices.Contains(plan.Env, "KUBECONFIG="+kc) || !slices.Contains(plan.Env, kubernetes.EnvNamespace+"="+want) {
			t.Errorf("watchdog plan %+v (%v): want the native one, on this kubeconfig and namespace", plan, err)
		}
	}
}
