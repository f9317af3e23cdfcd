package keeper

import (
	"testing"

	"github.com/rightsize/rightsize-go/internal/backend"
	"github.com/rightsize/rightsize-go/internal/backend/docker"
)

// The program cannot import the module: the marks it reads, and the
// environment it is started with, are held in step with their one
// definition here.
func TestProgramMarksInStep(t *testing.T) {
	got := programConsts(t)
	for name, want := range map[string]string{
		"labelRun":        docker.LabelRunID,
		"labelRunAlt":     docker.LabelRunIDAlt,
		"labelReuse":      docker.LabelReuse,
		"labelImageRun":   backend.LabelImageRun,
		"labelImage":      backend.LabelImage,
		"labelImageSince": backend.LabelImageSince,
		"keepAlivePrefix": backend.KeepAlivePrefix,
		"labelKeeper":     LabelKeeper,
		"keeperPrefix":    NamePrefix,
		"envRun":          envRun,
		"envTimeout":      EnvLeaseTimeout,
		"envSettle":       envSettle,
		"envNonce":        envNonce,
		"envLease":        envLease,
		"heldWord":        heldWord,
		"envSocket":       envSocket,
		"defaultSocket":   socketInside,
	} {
		if got[name] != want {
			t.Errorf("the program's %s is %q, want %q", name, got[name], want)
		}
	}
}
