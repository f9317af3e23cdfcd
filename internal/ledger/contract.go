package ledger

import (
	"fmt"
	"time"

	"github.com/rightsize/rightsize-go/internal/isotime"
	"github.com/rightsize/rightsize-go/internal/procid"
	contract "github.com/rightsize/rightsize-go/ledger"
)

// The contract's types, values and rules are package ledger's, the public
// one; these names keep the machinery's callers as they were.
type (
	Record        = contract.Record
	State         = contract.State
	Liveness      = contract.Liveness
	Outcome       = contract.Outcome
	ReuseIdentity = contract.ReuseIdentity
	ReuseCopy     = contract.ReuseCopy
	Identity      = procid.Identity
)

const (
	EnvCacheDir   = contract.EnvCacheDir
	MaxRecordSize = contract.MaxRecordSize
	StartWindow   = contract.StartWindow

	Unknown = contract.Unknown
	Alive   = contract.Alive
	Dead    = contract.Dead

	Removed       = contract.Removed
	AlreadyGone   = contract.AlreadyGone
	NotOwned      = contract.NotOwned
	Kept          = contract.Kept
	Ended         = contract.Ended
	Escaped       = contract.Escaped
	LeftForMember = contract.LeftForMember
	WouldRemove   = contract.WouldRemove
	Forgotten     = contract.Forgotten
)

// Dir is [contract.Dir].
func Dir() (string, error) { return contract.Dir() }

// ParseRecord is [contract.ParseRecord].
func ParseRecord(data []byte) (Record, error) { return contract.ParseRecord(data) }

// Judge is [contract.Judge].
func Judge(r Record) Liveness { return contract.Judge(r) }

// ValidRunID is [contract.ValidRunID].
func ValidRunID(id string) bool { return contract.ValidRunID(id) }

// ReuseName is [contract.ReuseName].
func ReuseName(hash string) string { return contract.ReuseName(hash) }

// ParseISO reads any ISO-8601 instant a member of the family writes
// (isotime.Parse).
func ParseISO(s string) (time.Time, error) { return isotime.Parse(s) }

// FormatISO formats t as rightsize-go writes an instant: UTC, milliseconds.
func FormatISO(t time.Time) string { return isotime.Format(t) }

// Self is this process's identity (procid.Self).
func Self() (Identity, error) { return procid.Self() }

// Lookup learns the identity of a live process (procid.Lookup).
func Lookup(pid int) (id Identity, ok bool, err error) { return procid.Lookup(pid) }

// JudgeLines judges the owner of a run that has lines and no record (a
// member's sweep deleted the record and left lines it does not read, or
// the Node member pruned it while alive), from when the lines were last
// written: before this boot, no process that could have written them is
// left. Otherwise Unknown: nothing names the owner.
func JudgeLines(written time.Time) Liveness { return judgeLines(written, procid.BootTime()) }

func judgeLines(written, boot time.Time) Liveness {
	if !written.IsZero() && !boot.IsZero() && written.Before(boot.Add(-StartWindow)) {
		return Liveness{State: Dead, Reason: fmt.Sprintf("no record, and its lines were last written %s, before this boot (%s): no process that wrote them is left",
			FormatISO(written), FormatISO(boot))}
	}
	return Liveness{State: Unknown, Reason: "no record: its owner is unknown"}
}
