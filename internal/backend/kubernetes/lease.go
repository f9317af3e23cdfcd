package kubernetes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
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
	id := l.Labels[backend.LabelRunID]
	if !validRunID(id) || l.Name != LeasePrefix+id || l.Labels[backend.LabelRunIDAlt] != id {
		return ""
	}
	return id
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

// runLease is this process's Lease of one run, made at the run's first
// create.
type runLease struct {
	once sync.Once
	ref  metav1.OwnerReference
	err  error
	stop context.CancelFunc // ends this process's renewal
}

// owner makes run runID's Lease once (or takes the one this run made
// before), starts renewing it for as long as the driver is open, and
// returns the ownerReference every object of the run carries.
func (d *Driver) owner(ctx context.Context, runID string) (metav1.OwnerReference, error) {
	name := LeaseName(runID)
	if name == "" {
		return metav1.OwnerReference{}, fmt.Errorf("kubernetes: run id %q cannot name a Lease (lower-case letters, digits and '-')", runID)
	}
	d.mu.Lock()
	rl := d.runs[runID]
	if rl == nil {
		rl = &runLease{}
		d.runs[runID] = rl
	}
	d.mu.Unlock()
	rl.once.Do(func() {
		var uid types.UID
		uid, rl.err = d.makeLease(ctx, runID)
		if rl.err != nil {
			return
		}
		rl.ref = metav1.OwnerReference{APIVersion: coordinationv1.SchemeGroupVersion.String(), Kind: "Lease", Name: name, UID: uid}
		hctx, cancel := context.WithCancel(context.Background())
		rl.stop = cancel
		go func() {
			select {
			case <-d.closed:
				cancel()
			case <-hctx.Done():
			}
		}()
		go d.HoldRun(hctx, runID)
	})
	if rl.err != nil {
		// A later create tries again.
		d.mu.Lock()
		if d.runs[runID] == rl {
			delete(d.runs, runID)
		}
		d.mu.Unlock()
	}
	return rl.ref, rl.err
}

func (d *Driver) makeLease(ctx context.Context, runID string) (types.UID, error) {
	name := LeaseName(runID)
	host, _ := os.Hostname()
	holder := host + "/" + strconv.Itoa(os.Getpid())
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
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"renewTime": metav1.NewMicroTime(time.Now())}})
	if err != nil {
		return err
	}
	if _, err := d.cs.CoordinationV1().Leases(d.ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return d.apiError("renew Lease "+name, err)
	}
	return nil
}

// HoldRun renews run runID's Lease every third of its duration until ctx
// ends. A Lease not made yet (the owner makes it at its first create), or
// a failed renewal, waits for the next tick.
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
// renewing it, and a later create of the run makes a new one.
func (d *Driver) DropRun(ctx context.Context, runID string) error {
	name := LeaseName(runID)
	if name == "" {
		return fmt.Errorf("kubernetes: run id %q cannot name a Lease", runID)
	}
	d.mu.Lock()
	rl := d.runs[runID]
	delete(d.runs, runID)
	d.mu.Unlock()
	if rl != nil {
		// A create under way finishes making its Lease; one yet to start
		// is refused rather than given no owner.
		rl.once.Do(func() { rl.err = fmt.Errorf("kubernetes: run %s's Lease was dropped", runID) })
		if rl.stop != nil {
			rl.stop()
		}
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
	return d.deleteLease(cctx, l, false)
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
// their duration; the garbage collector deletes what they own. A Lease
// renewed between the listing and the delete is left: the delete is of
// the version listed. Any other Lease is never touched.
func (d *Driver) SweepLapsed(ctx context.Context, now time.Time, dryRun bool) ([]string, error) {
	cctx, cancel := context.WithTimeout(ctx, CallTimeout)
	defer cancel()
	list, err := d.cs.CoordinationV1().Leases(d.ns).List(cctx, metav1.ListOptions{LabelSelector: backend.LabelRunID})
	if err != nil {
		return nil, d.apiError("list Leases", err)
	}
	var runs []string
	var errs []error
	for i := range list.Items {
		l := &list.Items[i]
		id := leaseRun(l)
		if id == "" || !lapsed(l, now) {
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
		runs = append(runs, id)
	}
	return runs, errors.Join(errs...)
}

// runLabels are the labels of every object of run runID.
func runLabels(runID string) map[string]string {
	return map[string]string{backend.LabelRunID: runID, backend.LabelRunIDAlt: runID}
}
