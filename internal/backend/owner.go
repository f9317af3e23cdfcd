package backend

import (
	"fmt"
	"strings"
)

// LabelReuseExtra is rightsize-go's mark of what the family's keep-alive
// identity cannot see (Spec.KeepAliveExtra).
const LabelReuseExtra = "dev.rightsize.reuse.go"

// RunLabels are the labels of run runID's ordinary sandboxes and networks:
// both spellings of the family.
func RunLabels(runID string) map[string]string {
	return map[string]string{LabelRunID: runID, LabelRunIDAlt: runID}
}

// NotOwnedWhy is the one rule of what labels make a sandbox or network
// named name run runID's to remove: it says why not, or "" when it is.
// It is UnlabelledWhy when it carries no run label and is no keep-alive;
// what a backend does then is the backend's (Docker leaves it, msb removes
// it by name, as the other members' msb sandboxes carry no label).
func NotOwnedWhy(runID, name string, labels map[string]string) string {
	if why, _ := KeepAliveWhy(name, labels); why != "" {
		return why
	}
	a, hasA := labels[LabelRunID]
	b, hasB := labels[LabelRunIDAlt]
	switch {
	case hasA && a == runID, hasB && b == runID:
		return ""
	case hasA || hasB:
		return fmt.Sprintf("it is labelled for run %s", firstNonEmpty(a, b))
	default:
		return UnlabelledWhy
	}
}

// KeepAliveWhy is the rule of what is a keep-alive sandbox's, which no run
// ever removes: why, or "" when it is not one; marked when it carries the
// keep-alive label (whatever its value), rather than a keep-alive name
// alone.
func KeepAliveWhy(name string, labels map[string]string) (why string, marked bool) {
	if v, ok := labels[LabelReuse]; ok {
		return fmt.Sprintf("a keep-alive sandbox (%s=%s), never removed by a run", LabelReuse, v), true
	}
	if strings.HasPrefix(name, KeepAlivePrefix) {
		return "named as a keep-alive sandbox, never removed by a run", false
	}
	return "", false
}

// UnlabelledWhy is NotOwnedWhy's answer for what carries no run label.
var UnlabelledWhy = ErrUnlabelled.Error()

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// ImageNotOwnedWhy is NotOwnedWhy for an image (LabelImageRun): why it is
// not run runID's to remove, or "" when it is.
func ImageNotOwnedWhy(runID string, labels map[string]string) string {
	v, ok := labels[LabelImageRun]
	switch {
	case ok && v == runID:
		return ""
	case ok:
		return fmt.Sprintf("it was built by run %s", v)
	default:
		return UnlabelledWhy
	}
}
