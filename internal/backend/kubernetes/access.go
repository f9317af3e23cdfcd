package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ErrForbidden is what an error wraps when the cluster does not let this
// process's user do what a run needs in the namespace; the error names
// each verb and resource missing.
var ErrForbidden = errors.New("forbidden by the cluster's RBAC")

// access is a verb on a resource (or subresource) of the namespace: what
// the cluster is asked, and what it said is kept by.
type access struct{ verb, group, resource, sub string }

// right is what a call needs: one of verbs (any will do) on a resource.
type right struct {
	verbs                []string
	group, resource, sub string
}

func (r right) String() string {
	res := r.resource
	if r.sub != "" {
		res += "/" + r.sub
	}
	if r.group != "" {
		res += " (" + r.group + ")"
	}
	return strings.Join(r.verbs, " or ") + " on " + res
}

func (r right) each() []access {
	out := make([]access, len(r.verbs))
	for i, v := range r.verbs {
		out[i] = access{v, r.group, r.resource, r.sub}
	}
	return out
}

// rights are the rights of verbs, one each, on a resource.
func rights(group, resource, sub string, verbs ...string) []right {
	out := make([]right, len(verbs))
	for i, v := range verbs {
		out[i] = right{[]string{v}, group, resource, sub}
	}
	return out
}

// What each part of a run needs: the run itself (its Lease, which the
// owner makes, renews and its watchdog deletes; its pods; and the sweep's
// list of Leases), then what only some specs or calls use.
// docs/kubernetes.md's Role gives all of it. A stream (exec,
// port-forward) is a GET upgraded to a WebSocket, which the API server
// authorizes as get or, on a cluster that says so, create; or, where
// WebSockets fail, an SPDY POST, create: either will do.
var (
	runAccess = append(rights("coordination.k8s.io", "leases", "", "create", "get", "list", "patch", "delete"),
		rights("", "pods", "", "create", "get", "list", "delete")...)
	filesAccess   = rights("", "configmaps", "", "create", "get", "delete")
	aliasAccess   = rights("", "services", "", "create", "list", "delete")
	logAccess     = rights("", "pods", "log", "get")
	execAccess    = []right{{[]string{"create", "get"}, "", "pods", "exec"}}
	forwardAccess = []right{{[]string{"create", "get"}, "", "pods", "portforward"}}
)

// need asks the cluster, once per process for each verb, whether this
// process's user may do each of rs in the namespace (a
// SelfSubjectAccessReview each, at once), and fails naming all that is
// not allowed, for what. A cluster that does not answer the review itself
// (the review forbidden, or not served) is taken at its later answers,
// which name what they refuse.
func (d *Driver) need(ctx context.Context, what string, rs ...right) error {
	d.accessMu.Lock()
	var ask []access
	for _, r := range rs {
		for _, a := range r.each() {
			if _, known := d.allowed[a]; !known && !slices.Contains(ask, a) {
				ask = append(ask, a)
			}
		}
	}
	d.accessMu.Unlock()
	if len(ask) > 0 {
		cctx, cancel := context.WithTimeout(ctx, CallTimeout)
		defer cancel()
		said := make([]bool, len(ask))
		errs := make([]error, len(ask))
		var wg sync.WaitGroup
		for i, a := range ask {
			wg.Go(func() { said[i], errs[i] = d.review(cctx, a) })
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return d.apiError("review of what "+what+" needs", err)
		}
		d.accessMu.Lock()
		for i, a := range ask {
			d.allowed[a] = said[i]
		}
		d.accessMu.Unlock()
	}
	var missing []string
	d.accessMu.Lock()
	for _, r := range rs {
		if !slices.ContainsFunc(r.each(), func(a access) bool { return d.allowed[a] }) {
			missing = append(missing, r.String())
		}
	}
	d.accessMu.Unlock()
	if len(missing) == 0 {
		return nil
	}
	return fmt.Errorf("kubernetes: %s needs, in namespace %s, what this process's user may not do: %s: %w (docs/kubernetes.md has the Role a run needs)",
		what, d.ns, strings.Join(missing, ", "), ErrForbidden)
}

// review asks the cluster whether this process's user may do a. A review
// the cluster will not make answers yes: the call itself will say.
func (d *Driver) review(ctx context.Context, a access) (bool, error) {
	r, err := d.cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
		Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: d.ns, Verb: a.verb, Group: a.group, Resource: a.resource, Subresource: a.sub,
		}},
	}, metav1.CreateOptions{})
	switch {
	case apierrors.IsForbidden(err), apierrors.IsNotFound(err), apierrors.IsMethodNotSupported(err):
		return true, nil
	case err != nil:
		return false, err
	}
	return r.Status.Allowed, nil
}

// forbidden wraps err, the cluster's refusal of r (a call made though the
// review said yes, or could not be made), to name what is missing.
func (d *Driver) forbidden(what string, r right, err error) error {
	return fmt.Errorf("kubernetes: %s needs, in namespace %s, what this process's user may not do: %s: %w: %w (docs/kubernetes.md has the Role a run needs)",
		what, d.ns, r, ErrForbidden, err)
}
