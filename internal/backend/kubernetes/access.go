package kubernetes

import (
	"context"
	"errors"
	"fmt"
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

// access is a verb on a resource (or subresource) of the namespace.
type access struct{ verb, group, resource, sub string }

func (a access) String() string {
	r := a.resource
	if a.sub != "" {
		r += "/" + a.sub
	}
	if a.group != "" {
		r += " (" + a.group + ")"
	}
	return a.verb + " on " + r
}

// What each part of a run needs: the run itself (its Lease, which the
// owner makes, renews and its watchdog deletes; its pods; and the sweep's
// list of Leases), then what only some specs or calls use. docs/kubernetes.md's
// Role gives all of it.
var (
	runAccess = []access{
		{"create", "coordination.k8s.io", "leases", ""}, {"get", "coordination.k8s.io", "leases", ""},
		{"list", "coordination.k8s.io", "leases", ""}, {"patch", "coordination.k8s.io", "leases", ""},
		{"delete", "coordination.k8s.io", "leases", ""},
		{"create", "", "pods", ""}, {"get", "", "pods", ""}, {"list", "", "pods", ""}, {"delete", "", "pods", ""},
	}
	filesAccess   = []access{{"create", "", "configmaps", ""}, {"get", "", "configmaps", ""}, {"delete", "", "configmaps", ""}}
	aliasAccess   = []access{{"create", "", "services", ""}, {"list", "", "services", ""}, {"delete", "", "services", ""}}
	logAccess     = []access{{"get", "", "pods", "log"}}
	execAccess    = []access{{"create", "", "pods", "exec"}}
	forwardAccess = []access{{"create", "", "pods", "portforward"}}
)

// need asks the cluster, once per process for each, whether this
// process's user may do each of as in the namespace (a
// SelfSubjectAccessReview each, at once), and fails naming all that is
// not allowed, for what. A cluster that does not answer the review itself
// (the review forbidden, or not served) is taken at its later answers,
// which name what they refuse.
func (d *Driver) need(ctx context.Context, what string, as ...access) error {
	d.accessMu.Lock()
	var ask []access
	var missing []access
	for _, a := range as {
		ok, known := d.allowed[a]
		switch {
		case !known:
			ask = append(ask, a)
		case !ok:
			missing = append(missing, a)
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
			if !said[i] {
				missing = append(missing, a)
			}
		}
		d.accessMu.Unlock()
	}
	if len(missing) == 0 {
		return nil
	}
	words := make([]string, len(missing))
	for i, a := range missing {
		words[i] = a.String()
	}
	return fmt.Errorf("kubernetes: %s needs, in namespace %s, what this process's user may not do: %s: %w (docs/kubernetes.md has the Role a run needs)",
		what, d.ns, strings.Join(words, ", "), ErrForbidden)
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

// forbidden wraps err, the cluster's refusal of a (a call made though the
// review said yes, or could not be made), to name what is missing.
func (d *Driver) forbidden(what string, a access, err error) error {
	return fmt.Errorf("kubernetes: %s needs, in namespace %s, what this process's user may not do: %s: %w: %w (docs/kubernetes.md has the Role a run needs)",
		what, d.ns, a, ErrForbidden, err)
}
