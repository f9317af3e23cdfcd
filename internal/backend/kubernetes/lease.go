package kubernetes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/rightsize/rightsize-go/internal/backend"
)

// LeasePrefix starts the name of every run's Lease: LeasePrefix + run id.
const LeasePrefix = "rz-run-"

// LeaseName is run runID's Lease, or "" when the id cannot name one.
func LeaseName(runID string) string {
	if !validRunID(runID) {
		return ""
	}
	return LeasePrefix + runID
}

// validRunID: a run id (the ledger's grammar is wider) that fits a
// Kubernetes name and label value; a run of another id cannot be made on
// this backend.
func validRunID(id string) bool {
	return id != "" && dnsLabel(LeasePrefix+id) && labelValue(id)
}

// leaseRun is the run whose Lease l provably is: its name is LeasePrefix and
// the run id its label carries. "" for any other Lease.
func leaseRun(l *coordinationv1.Lease) string {
	id, _ := leaseRunWhy(l)
	return id
}

// leaseRunWhy is leaseRun, with why not when it is "".
func leaseRunWhy(l *coordinationv1.Lease) (run, whyNot string) {
	id, alt := l.Labels[backend.LabelRunID], l.Labels[backend.LabelRunIDAlt]
	switch {
	case !validRunID(id):
		return "", fmt.Sprintf("its %s label %q is no run id of this backend", backend.LabelRunID, id)
	case alt != id:
		return "", fmt.Sprintf("its %s label %q is not its %s label %q", backend.LabelRunIDAlt, alt, backend.LabelRunID, id)
	case l.Name != LeasePrefix+id:
		return "", fmt.Sprintf("its name is not %s%s, the run its labels name", LeasePrefix, id)
	}
	return id, ""
}

// judgeLease is what a sweep at now makes of l: the one judgement both
// SweepLapsed and Claims use.
func judgeLease(l *coordinationv1.Lease, now time.Time) backend.Claim {
	c := backend.Claim{Name: l.Name}
	if h := l.Spec.HolderIdentity; h != nil {
		c.Holder = *h
	}
	if r := l.Spec.RenewTime; r != nil {
		c.Renewed = r.Time
	}
	if s := l.Spec.LeaseDurationSeconds; s != nil && *s > 0 {
		c.Duration = time.Duration(*s) * time.Second
	}
	c.Lapsed = lapsed(l, now)
	id, whyNot := leaseRunWhy(l)
	if id == "" {
		c.State, c.Reason = backend.ClaimNotARun, "not a run's Lease ("+whyNot+"): never touched"
		return c
	}
	c.Run = id
	age := now.Sub(c.Renewed).Round(100 * time.Millisecond)
	switch {
	case c.Lapsed:
		c.State = backend.ClaimLapsed
		c.Reason = fmt.Sprintf("dead: not renewed for %s, past its %s (renewed %s by %q)", age, c.Duration, c.Renewed.UTC().Format(time.RFC3339), c.Holder)
	case c.Renewed.IsZero() || c.Duration <= 0:
		c.State, c.Reason = backend.ClaimUnjudged, "it says no renewTime or no leaseDurationSeconds: never judged lapsed"
	case age < 0:
		c.State = backend.ClaimHeld
		c.Reason = fmt.Sprintf("alive: renewed %s ahead of this machine's clock, by %q", -age, c.Holder)
	default:
		c.State = backend.ClaimHeld
		c.Reason = fmt.Sprintf("alive: renewed %s ago, within its %s, by %q", age, c.Duration, c.Holder)
	}
	return c
}

// lapsed: the Lease says when it was last renewed and for how long, and
// that time is past. A Lease that says neither is never judged lapsed.
func lapsed(l *coordinationv1.Lease, now time.Time) bool {
	s := l.Spec
	if s.RenewTime == nil || s.LeaseDurationSeconds == nil || *s.LeaseDurationSeconds <= 0 {
		return false
	}
	return now.After(s.RenewTime.Add(time.Duration(*s.LeaseDurationSeconds) * time.Second))
}

// runLease is this process's hold on one run's Lease: made at the run's
// first create, and made again at a later create when it was deleted while
// the run lived (a sweep that found it lapsed, a person).
type runLease struct {
	run string

	mu sync.Mutex
	// ref is the ownerReference to the Lease the run's creates are owned
	// by; its UID is empty until one is made, and again once it is lost.
	ref metav1.OwnerReference
	// dropped: DropRun gave the run up; no create is given an owner.
	dropped bool
	// refused is the cluster's refusal of a renewal: the run can no longer
	// keep its objects, and every later create fails with it.
	refused error
	// lost holds, by uid, the run's Leases deleted while it lived, and
	// what that did to the objects they owned.
	lost map[types.UID]error
	stop context.CancelFunc // ends this process's renewal; nil until made
}

// errFor is why the objects owned by the Lease uid are not held: it was
// lost, or the run's renewals were refused; nil while they are held.
func (rl *runLease) errFor(uid types.UID) error {
	if rl == nil {
		return nil
	}
	rl.mu.Lock()
	defer rl.mu.Unlock()
	if err := rl.lost[uid]; err != nil {
		return err
	}
	return rl.refused
}

// owner returns run runID's Lease as the owner of an object the run creates
// now: made at the run's first create (or taken over from an earlier driver
// of this process), checked at each later one, and made anew when it was
// deleted since. The first create of the process first checks that the
// cluster allows what every run does (runAccess).
func (d *Driver) owner(ctx context.Context, runID string) (*runLease, metav1.OwnerReference, error) {
	name := LeaseName(runID)
	if name == "" {
		return nil, metav1.OwnerReference{}, fmt.Errorf("kubernetes: run id %q cannot name a Lease (lower-case letters, digits and '-')", runID)
	}
	if err := d.need(ctx, "run "+runID, runAccess...); err != nil {
		return nil, metav1.OwnerReference{}, err
	}
	d.mu.Lock()
	rl := d.runs[runID]
	if rl == nil {
		rl = &runLease{run: runID}
		d.runs[runID] = rl
	}
	d.mu.Unlock()
	rl.mu.Lock()
	defer rl.mu.Unlock()
	switch {
	case rl.dropped:
		return nil, metav1.OwnerReference{}, fmt.Errorf("kubernetes: run %s's Lease was dropped", runID)
	case rl.refused != nil:
		return nil, metav1.OwnerReference{}, rl.refused
	}
	if rl.ref.UID != "" {
		if err := d.checkLeaseLocked(ctx, rl); err != nil {
			return nil, metav1.OwnerReference{}, err
		}
	}
	if rl.ref.UID == "" {
		uid, err := d.makeLease(ctx, runID)
		if err != nil {
			return nil, metav1.OwnerReference{}, err
		}
		rl.ref = metav1.OwnerReference{APIVersion: coordinationv1.SchemeGroupVersion.String(), Kind: "Lease", Name: name, UID: uid}
	}
	if rl.stop == nil {
		hctx, cancel := context.WithCancel(context.Background())
		rl.stop = cancel
		go func() {
			select {
			case <-d.closed:
				cancel()
			case <-hctx.Done():
			}
		}()
		go d.keep(hctx, rl)
	}
	return rl, rl.ref, nil
}

// checkLeaseLocked looks the run's Lease up: gone, or another of its name,
// the one rl.ref names is lost (said once), and rl.ref is left without a
// UID for the caller to make a new one. rl.mu is held.
func (d *Driver) checkLeaseLocked(ctx context.Context, rl *runLease) error {
	cctx, cancel := context.WithTimeout(ctx, CallTimeout)
	defer cancel()
	l, err := d.cs.CoordinationV1().Leases(d.ns).Get(cctx, rl.ref.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		d.loseLocked(rl, rl.ref.UID, "found gone at a create")
	case err != nil:
		return d.apiError("get Lease "+rl.ref.Name, err)
	case l.UID != rl.ref.UID:
		d.loseLocked(rl, rl.ref.UID, "found made again, by someone else, at a create")
	}
	return nil
}

// lose takes note that the Lease uid of rl's run is gone while the run
// lives, unless that is known already.
func (d *Driver) lose(rl *runLease, uid types.UID, how string) {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	d.loseLocked(rl, uid, how)
}

// loseLocked is lose with rl.mu held. The loss is said once, on stderr, at
// once: the cluster deletes what the Lease owned, pods a test holds among
// them, and each of their Stops fails the test with it.
func (d *Driver) loseLocked(rl *runLease, uid types.UID, how string) {
	if uid == "" || rl.lost[uid] != nil {
		return
	}
	if rl.lost == nil {
		rl.lost = map[types.UID]error{}
	}
	rl.lost[uid] = fmt.Errorf("kubernetes: run %s's Lease %s/%s (uid %s) was deleted while the run lived (%s; a sweep deletes a Lease not renewed for its %s, as when this machine stalls, and so may a person): the cluster's garbage collector deletes every pod, Service and ConfigMap it owned; the run's later creates are owned by a new Lease: %w",
		rl.run, d.ns, LeaseName(rl.run), uid, how, d.lease, backend.ErrClaimLost)
	if rl.ref.UID == uid {
		rl.ref.UID = ""
	}
	d.warn(rl.lost[uid].Error())
}

// refuse takes note that the cluster refused a renewal of rl's run's Lease:
// said once, at once, and every later create of the run fails with it.
func (d *Driver) refuse(rl *runLease, err error) {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	if rl.refused != nil || rl.dropped {
		return
	}
	rl.refused = fmt.Errorf("kubernetes: the cluster refused to renew run %s's Lease %s/%s: %w: once it goes unrenewed for %s, any sweep deletes it, and the cluster every pod it owns; the run's later creates fail: %w",
		rl.run, d.ns, LeaseName(rl.run), err, d.lease, backend.ErrClaimLost)
	d.warn(rl.refused.Error())
}

// keep renews rl's run's Lease every third of its duration for this
// process, until ctx ends. A renewal that finds the Lease gone, or another
// of its name, loses it (the next create makes a new one); one the cluster
// refuses is a refusal. Any other failure (an API server out of reach for
// a moment) is tried again within a second (renewRetry), not at the next
// third: three thirds missed in a row are a lapse, and a sweep deletes
// the Lease of a live run.
func (d *Driver) keep(ctx context.Context, rl *runLease) {
	t := time.NewTimer(d.lease / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		t.Reset(d.lease / 3)
		rl.mu.Lock()
		ref := rl.ref
		rl.mu.Unlock()
		if ref.UID == "" {
			continue
		}
		// A sixth of the Lease per attempt: one that waits on a silent API
		// server still leaves time for a retry before the Lease lapses.
		cctx, cancel := context.WithTimeout(ctx, d.lease/6)
		l, err := d.renewLease(cctx, ref.Name)
		cancel()
		switch {
		case ctx.Err() != nil:
			return
		case err == nil && l.UID != ref.UID:
			d.lose(rl, ref.UID, "found made again, by someone else, at a renewal")
		case err == nil:
		case apierrors.IsNotFound(err):
			d.lose(rl, ref.UID, "found gone at a renewal")
		case apierrors.IsForbidden(err), apierrors.IsUnauthorized(err):
			d.refuse(rl, d.apiError("renew Lease "+ref.Name, err))
		default:
			t.Reset(min(renewRetry, d.lease/6))
		}
	}
}

// renewRetry is how soon a renewal that failed for want of an answer is
// tried again.
const renewRetry = time.Second

// holderOf is the holder identity of a Lease that process pid of this
// machine makes.
func holderOf(pid int) string {
	host, _ := os.Hostname()
	return host + "/" + strconv.Itoa(pid)
}

func (d *Driver) makeLease(ctx context.Context, runID string) (types.UID, error) {
	name := LeaseName(runID)
	holder := holderOf(os.Getpid())
	secs := int32(d.lease / time.Second)
	now := metav1.NewMicroTime(time.Now())
	cctx, cancel := context.WithTimeout(ctx, CallTimeout)
	defer cancel()
	l, err := d.cs.CoordinationV1().Leases(d.ns).Create(cctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: runLabels(runID)},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity: &holder, LeaseDurationSeconds: &secs, AcquireTime: &now, RenewTime: &now,
		},
	}, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		// This run's, made by an earlier driver of this process, or a
		// squatter's: only the former is taken, and renewed at once.
		if l, err = d.cs.CoordinationV1().Leases(d.ns).Get(cctx, name, metav1.GetOptions{}); err != nil {
			return "", d.apiError("get Lease "+name, err)
		}
		if leaseRun(l) != runID {
			return "", fmt.Errorf("kubernetes: Lease %s/%s exists and is not run %s's (its labels: %v): %w", d.ns, name, runID, l.Labels, backend.ErrNotOwned)
		}
		if err := d.renew(cctx, name); err != nil {
			return "", err
		}
		return l.UID, nil
	}
	if err != nil {
		return "", d.apiError("create Lease "+name, err)
	}
	return l.UID, nil
}

// renew sets the Lease's renewTime to now. A merge patch: the owner and its
// watchdog both renew, and neither needs the other's resource version.
func (d *Driver) renew(ctx context.Context, name string) error {
	_, err := d.renewLease(ctx, name)
	if err != nil {
		return d.apiError("renew Lease "+name, err)
	}
	return nil
}

// renewLease is renew, returning the Lease renewed, or the API's error as
// it is.
func (d *Driver) renewLease(ctx context.Context, name string) (*coordinationv1.Lease, error) {
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"renewTime": metav1.NewMicroTime(time.Now())}})
	if err != nil {
		return nil, err
	}
	return d.cs.CoordinationV1().Leases(d.ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
}

// HoldRun renews run runID's Lease every third of its duration until ctx
// ends: the watchdog's renewal, by name. A Lease not made yet (the owner
// makes it at its first create, and again when it was lost), or a failed
// renewal, waits for the next tick; what a failure means is the owner's to
// say (keep).
func (d *Driver) HoldRun(ctx context.Context, runID string) {
	name := LeaseName(runID)
	if name == "" {
		return
	}
	t := time.NewTicker(d.lease / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		cctx, cancel := context.WithTimeout(ctx, d.lease/3)
		_ = d.renew(cctx, name)
		cancel()
	}
}

// DropRun deletes run runID's Lease, when it is the run's: the garbage
// collector then deletes the run's pods and Services. This process stops
// renewing it, and a later create of the run makes a new one. With owner
// not 0 (a sweep, which judged that process dead), the Lease is deleted
// only when its holder is that process of this machine, and only the
// version read: a Lease another machine's process holds (a cache dir two
// machines share), or one renewed since, is left to lapse.
func (d *Driver) DropRun(ctx context.Context, runID string, owner int) error {
	name := LeaseName(runID)
	if name == "" {
		return fmt.Errorf("kubernetes: run id %q cannot name a Lease", runID)
	}
	if owner == 0 {
		d.stopRun(runID)
	}
	cctx, cancel := context.WithTimeout(ctx, CallTimeout)
	defer cancel()
	l, err := d.cs.CoordinationV1().Leases(d.ns).Get(cctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return d.apiError("get Lease "+name, err)
	}
	if leaseRun(l) != runID {
		return fmt.Errorf("kubernetes: Lease %s/%s is not run %s's: %w", d.ns, name, runID, backend.ErrNotOwned)
	}
	if owner != 0 {
		holder := ""
		if h := l.Spec.HolderIdentity; h != nil {
			holder = *h
		}
		if want := holderOf(owner); holder != want {
			return fmt.Errorf("kubernetes: Lease %s/%s is held by %q, not by the run's recorded owner %q: left to lapse: %w", d.ns, name, holder, want, backend.ErrNotOwned)
		}
	}
	err = d.deleteLease(cctx, l, owner != 0)
	if apierrors.IsConflict(err) {
		return fmt.Errorf("kubernetes: Lease %s/%s was renewed or made again as it was read: left to lapse: %w", d.ns, name, backend.ErrNotOwned)
	}
	return err
}

// stopRun stops this process's hold on run runID: no more renewals, and
// a create yet to be given an owner is refused rather than given none (one
// under way finishes with the Lease it has).
func (d *Driver) stopRun(runID string) {
	d.mu.Lock()
	rl := d.runs[runID]
	delete(d.runs, runID)
	d.mu.Unlock()
	if rl != nil {
		rl.mu.Lock()
		rl.dropped = true
		if rl.stop != nil {
			rl.stop()
		}
		rl.mu.Unlock()
	}
}

// deleteLease deletes l, and only the very version read when current is
// set: a renewal in between (the run is alive) makes the delete fail.
func (d *Driver) deleteLease(ctx context.Context, l *coordinationv1.Lease, current bool) error {
	pre := &metav1.Preconditions{UID: &l.UID}
	if current {
		pre.ResourceVersion = &l.ResourceVersion
	}
	bg := metav1.DeletePropagationBackground
	err := d.cs.CoordinationV1().Leases(d.ns).Delete(ctx, l.Name, metav1.DeleteOptions{Preconditions: pre, PropagationPolicy: &bg})
	if err == nil || apierrors.IsNotFound(err) {
		return nil
	}
	return d.apiError("delete Lease "+l.Name, err)
}

// SweepLapsed deletes the Leases of the namespace that are provably runs'
// (LeaseName of the run id both run labels carry) and were not renewed for
// their duration (judgeLease); the garbage collector deletes what they
// own. A Lease renewed between the listing and the delete is left: the
// delete is of the version listed. Any other Lease is never touched.
func (d *Driver) SweepLapsed(ctx context.Context, now time.Time, dryRun bool) ([]string, error) {
	cctx, cancel := context.WithTimeout(ctx, CallTimeout)
	defer cancel()
	list, err := d.runLeases(cctx)
	if err != nil {
		return nil, err
	}
	var runs []string
	var errs []error
	for i := range list {
		l := &list[i]
		c := judgeLease(l, now)
		if c.State != backend.ClaimLapsed {
			continue
		}
		if !dryRun {
			if err := d.deleteLease(cctx, l, true); err != nil {
				if !apierrors.IsConflict(err) {
					errs = append(errs, err)
				}
				continue
			}
		}
		runs = append(runs, c.Run)
	}
	return runs, errors.Join(errs...)
}

// Claims is every Lease of the namespace that carries a run's label,
// judged as SweepLapsed judges it at now, sorted by name.
func (d *Driver) Claims(ctx context.Context, now time.Time) ([]backend.Claim, error) {
	cctx, cancel := context.WithTimeout(ctx, CallTimeout)
	defer cancel()
	list, err := d.runLeases(cctx)
	if err != nil {
		return nil, err
	}
	out := make([]backend.Claim, 0, len(list))
	for i := range list {
		out = append(out, judgeLease(&list[i], now))
	}
	slices.SortFunc(out, func(a, b backend.Claim) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// runLeases lists the Leases that carry a run's label.
func (d *Driver) runLeases(ctx context.Context) ([]coordinationv1.Lease, error) {
	list, err := d.cs.CoordinationV1().Leases(d.ns).List(ctx, metav1.ListOptions{LabelSelector: backend.LabelRunID})
	if err != nil {
		return nil, d.apiError("list Leases", err)
	}
	return list.Items, nil
}

// runLabels are the labels of every object of run runID.
func runLabels(runID string) map[string]string {
	return map[string]string{backend.LabelRunID: runID, backend.LabelRunIDAlt: runID}
}
