package reaper

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/rightsize/rightsize-go/internal/backend"
	"github.com/rightsize/rightsize-go/internal/ledger"
	"github.com/rightsize/rightsize-go/internal/names"
)

// elsewhereCall bounds each call to an engine a run may have used besides
// the one swept: one that does not answer is given up at its first call.
const elsewhereCall = 10 * time.Second

// elsewhere deals with a dead run that records no engine (another
// member's) and of which the engine swept showed nothing (res): its
// sandboxes may be on another engine the run could have used
// (backend.EngineFinder). Where one shows any of the run, the run is
// reaped there and res takes that engine's outcome. Where none does, and
// every one of them answered, a run whose record is ledger.ForgetAfter
// old is forgotten: res's names are Forgotten. Otherwise it returns why
// the run is left as it is, for the engine it used. note is what to add
// to the run's reason either way.
func (c *config) elsewhere(ctx context.Context, b backend.Backend, rf ledger.RunFiles, t target, res *reaped) (leave, note string) {
	here := b.Endpoint()
	var hosts, unasked []string
	if f, ok := b.(backend.EngineFinder); ok {
		hosts, unasked = f.OtherEngines()
	}
	t.procs, t.call, t.giveUp, t.settle = nil, elsewhereCall, true, 0
	var empty []string
	for _, host := range hosts {
		if ctx.Err() != nil {
			unasked = append(unasked, host+" (not reached: "+unfinished(context.Cause(ctx))+")")
			continue
		}
		d, err := backend.OpenEndpoint(b.Name(), host)
		if err != nil {
			unasked = append(unasked, fmt.Sprintf("%s (%v)", host, err))
			continue
		}
		other := reapRun(ctx, d, t)
		d.Close()
		switch {
		case other.here:
			res.onEngine(other)
			return "", fmt.Sprintf("nothing of it on this engine (%s): found on %s, which it may have used (it records no engine), and reaped there", here, host)
		case other.engineClean():
			empty = append(empty, host)
		default:
			unasked = append(unasked, host+" (did not answer)")
		}
	}
	searched := "this engine (" + here + ")"
	if len(empty) > 0 {
		searched += " nor on " + strings.Join(empty, ", ")
	}
	age := rf.Age(c.now())
	if len(unasked) == 0 && res.engineClean() && !res.procsKept && age >= ledger.ForgetAfter {
		why := fmt.Sprintf("it records no engine, and none of it is on %s, the engines it may have used; its record is %s old (past %s)", searched, age.Round(time.Hour), ledger.ForgetAfter)
		res.forget(why)
		return "", why + ": forgotten"
	}
	leave = fmt.Sprintf("it records no engine, and nothing it lists is on %s", searched)
	if len(unasked) > 0 {
		leave += fmt.Sprintf("; %s could not be asked, so it is kept until one is", strings.Join(unasked, ", "))
	} else {
		leave += fmt.Sprintf("; forgotten once its record is %s old (it is %s)", ledger.ForgetAfter, age.Round(time.Minute))
	}
	return leave + ": left for a sweep of the engine it used, or rightsize sweep --run " + rf.ID, ""
}

// namesNoEngine reports whether rf names no engine (another member's
// record, or no record at all: a member deleted it and left the lines),
// swept through an engine whose labels tell what is the run's. The other
// members follow DOCKER_HOST (Kotlin Docker contexts too): such a run may
// have used another engine than this one.
func namesNoEngine(b backend.Backend, rf ledger.RunFiles) bool {
	unnamed := rf.RecordErr == nil && rf.Record.Endpoint == "" && backend.Canonical(rf.Record.Backend) != backend.Local ||
		errors.Is(rf.RecordErr, ledger.ErrNoRecord)
	return unnamed && b.Endpoint() != "" && isLabelled(b)
}

// leaveForItsEngine leaves a run of which this engine showed nothing, its
// lines as they are: "not found" from an engine the run may never have
// used proves nothing gone. A sweep of the engine it used removes what it
// lists; a person's sweep of the run (--run) drops it here. It is kept
// rather than left alone when something else keeps it: an engine that did
// not answer for a name, a list that could not be read, a local process.
func leaveForItsEngine(rr RunReport, why string, keptOtherwise bool) RunReport {
	var removed []Item
	for _, it := range rr.Removed {
		if it.Kind == names.ProcessKind {
			removed = append(removed, it)
		}
	}
	rr.Removed, rr.NotOwned = removed, nil
	rr.Reason += "; " + why
	rr.Decision = LeftAlone
	if len(rr.Kept) > 0 || len(rr.Removed) > 0 || keptOtherwise {
		rr.Decision = Kept
	}
	return rr
}
