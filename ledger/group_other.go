//go:build unix && !linux

package ledger

// groupOwnersAlone: only Linux distributions give each user a private
// group and make folders group-writable by default (umask 002); elsewhere
// a group-writable ledger folder is refused, as it always was.
func groupOwnersAlone(gid, uid uint32) (alone bool, why string) {
	return false, "a group-writable ledger folder is accepted on Linux only, where the group's members can be read"
}
