package ledger

// An Outcome is what became of one sandbox, network, command or local
// process of a dead run: the one vocabulary of a sweep's report, the
// watchdog's, the fates of dead runs and the command line's output.
type Outcome string

// The outcomes.
const (
	// Removed: the engine removed it.
	Removed Outcome = "removed"
	// AlreadyGone: the engine had nothing of that name.
	AlreadyGone Outcome = "already gone"
	// NotOwned: something of that name exists that is not the run's (no
	// label of the run, or a keep-alive sandbox): left running, its name
	// dropped from the run's list.
	NotOwned Outcome = "not this run's"
	// Kept: it may still exist (the engine did not answer, a network still
	// in use, a process not ended): its name stays listed for a later
	// sweep.
	Kept Outcome = "kept"
	// Ended: a command in a sandbox, ended by its lease when the owner
	// died; a local process, ended by its watchdog or a sweep.
	Ended Outcome = "ended"
	// Escaped: a local process that left its command's session: not
	// signalled, its line stays listed.
	Escaped Outcome = "escaped"
	// LeftForMember: a network of another member's run that carries no run
	// label (the other members label only their containers): never removed
	// by Go, its line stays listed for that member's own sweep. It alone
	// does not make a sweep unclean.
	LeftForMember Outcome = "left for its member's sweep"
	// WouldRemove: a dry run would have asked for its removal.
	WouldRemove Outcome = "would be removed"
	// Forgotten: listed by a dead run that records no engine (another
	// member's), and found neither on the engine swept nor on any other
	// the run may have used, for a week: its name leaves the ledger with
	// the run, said once in the run's fate.
	Forgotten Outcome = "forgotten"
)

// Gone reports whether o leaves nothing of the item behind.
func (o Outcome) Gone() bool { return o == Removed || o == AlreadyGone || o == Ended }
