package ledger_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/rightsize/rightsize-go/internal/ledger"
)

// Named volumes and images are lines of their own files, beside the
// family's, which they leave as they were: a run of a volume and an image
// only writes no .sandboxes or .networks, a scan reads them as the run's
// (not as files no reader here knows), and the run's last removal deletes
// them with its record.
func TestVolumeAndImageLines(t *testing.T) {
	r, cache := newRun(t, ledger.Owner{Backend: "docker", Endpoint: "unix:///var/run/docker.sock", DefaultEngine: true})
	runs := filepath.Join(cache, ledger.RunsDir)
	if err := r.Add(ledger.VolumeKind, "rz-vol-1"); err != nil {
		t.Fatal(err)
	}
	if err := r.Add(ledger.ImageKind, "rz-"+r.ID()+"-2"); err != nil {
		t.Fatal(err)
	}
	_, sbx, nets := ledger.Paths(runs, r.ID())
	if exists(t, sbx) || exists(t, nets) {
		t.Errorf("a run of a volume and an image wrote the family's line files")
	}
	for _, p := range []string{filepath.Join(runs, r.ID()+ledger.VolumesExt), filepath.Join(runs, r.ID()+ledger.ImagesExt)} {
		if p != ledger.LinePath(runs, r.ID(), ledger.VolumeKind) && p != ledger.LinePath(runs, r.ID(), ledger.ImageKind) {
			t.Errorf("%s is no kind's line file", p)
		}
		if !exists(t, p) {
			t.Errorf("%s was not written", p)
		}
	}
	rf, err := ledger.ReadRun(cache, r.ID())
	if err != nil {
		t.Fatal(err)
	}
	l := rf.ReadLists()
	if len(rf.Unknown) > 0 || !rf.Has(ledger.VolumeKind) || !rf.Has(ledger.ImageKind) ||
		!slices.Equal(l.Of(ledger.VolumeKind), []string{"rz-vol-1"}) || !slices.Equal(l.Of(ledger.ImageKind), []string{"rz-" + r.ID() + "-2"}) || l.Len() != 2 {
		t.Errorf("read back: unknown %q, lists %+v", rf.Unknown, l)
	}
	s, err := ledger.ScanRuns(cache)
	if err != nil {
		t.Fatal(err)
	}
	s.Each(func(rf ledger.RunFiles) error {
		if len(rf.Unknown) > 0 || !rf.Has(ledger.VolumeKind) || !rf.Has(ledger.ImageKind) {
			t.Errorf("the scan: unknown %q, volumes %v, images %v", rf.Unknown, rf.Has(ledger.VolumeKind), rf.Has(ledger.ImageKind))
		}
		return nil
	})
	if err := r.Remove(ledger.VolumeKind, "rz-vol-1"); err != nil {
		t.Fatal(err)
	}
	if err := r.Remove(ledger.ImageKind, "rz-"+r.ID()+"-2"); err != nil {
		t.Fatal(err)
	}
	if left, _ := os.ReadDir(runs); len(left) > 0 {
		t.Errorf("after the last removal the runs folder holds %v", left)
	}
}
