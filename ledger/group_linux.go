package ledger

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// The files group membership is read from. Variables, so that a test can
// point them at fixtures.
var (
	etcPasswd   = "/etc/passwd"
	etcGroup    = "/etc/group"
	nsswitch    = "/etc/nsswitch.conf"
	userdbDirs  = []string{"/etc/userdb", "/run/userdb", "/run/host/userdb", "/usr/local/lib/userdb", "/usr/lib/userdb"}
	groupsMu    sync.Mutex
	groupsCache = map[[2]uint32]groupAnswer{}
)

type groupAnswer struct {
	alone bool
	why   string
	// files is what the files were when the answer was read: a change
	// to any of them (a user added, a group made anew) reads them again.
	files string
}

// filesState names the state of the files an answer is read from.
func filesState() string {
	var b strings.Builder
	for _, p := range []string{etcPasswd, etcGroup, nsswitch} {
		if fi, err := os.Stat(p); err == nil {
			fmt.Fprintf(&b, "%d.%d;", fi.ModTime().UnixNano(), fi.Size())
		} else {
			b.WriteString("-;")
		}
	}
	return b.String()
}

// groupOwnersAlone reports whether gid has no member but uid, as Debian's
// ssh asks of a group-writable ~/.ssh: no other user has gid as primary
// group or is listed in it, and uid is in it. A user private group (the
// Debian and Ubuntu default, where umask 002 makes every folder group-
// writable) passes; a shared group does not. What cannot be read is a
// no: group membership from a directory service (LDAP, SSSD, NIS) is not
// in the files, so such a group is refused. why says, for an error, what
// disqualifies the group. The answer is kept while the files stay as they
// were.
func groupOwnersAlone(gid, uid uint32) (alone bool, why string) {
	key, files := [2]uint32{gid, uid}, filesState()
	groupsMu.Lock()
	defer groupsMu.Unlock()
	if a, ok := groupsCache[key]; ok && a.files == files {
		return a.alone, a.why
	}
	alone, why = readGroupAlone(gid, uid)
	groupsCache[key] = groupAnswer{alone, why, files}
	return alone, why
}

func readGroupAlone(gid, uid uint32) (bool, string) {
	if src := foreignSources(); src != "" {
		return false, "group membership on this host also comes from " + src + ", which rightsize cannot read"
	}
	passwd, err := readDB(etcPasswd)
	if err != nil {
		return false, err.Error()
	}
	group, err := readDB(etcGroup)
	if err != nil {
		return false, err.Error()
	}
	me, members := "", 0
	for _, f := range passwd {
		if len(f) < 4 {
			continue
		}
		u, uerr := strconv.ParseUint(f[2], 10, 32)
		g, gerr := strconv.ParseUint(f[3], 10, 32)
		if uerr != nil || gerr != nil {
			continue
		}
		if uint32(u) == uid && me == "" {
			me = f[0]
		}
		if uint32(g) != gid {
			continue
		}
		if uint32(u) != uid {
			return false, fmt.Sprintf("it is the primary group of user %q (uid %d) too", clipString(f[0]), u)
		}
		members++
	}
	if me == "" {
		return false, fmt.Sprintf("uid %d has no entry in %s", uid, etcPasswd)
	}
	listed := false
	for _, f := range group {
		if len(f) < 4 {
			continue
		}
		if g, err := strconv.ParseUint(f[2], 10, 32); err != nil || uint32(g) != gid {
			continue
		}
		listed = true
		for _, m := range strings.Split(f[3], ",") {
			switch m = strings.TrimSpace(m); {
			case m == "":
			case m != me:
				return false, fmt.Sprintf("user %q is a member of it", clipString(m))
			default:
				members++
			}
		}
	}
	if !listed {
		return false, fmt.Sprintf("gid %d is not in %s, so its members cannot be read", gid, etcGroup)
	}
	if name := groupName(group, gid); name != "" {
		// systemd-userdb adds members with drop-in files the group file
		// does not show.
		for _, d := range userdbDirs {
			ms, _ := filepath.Glob(filepath.Join(d, "*:"+name+".membership"))
			for _, m := range ms {
				if user := strings.TrimSuffix(filepath.Base(m), ":"+name+".membership"); user != me {
					return false, fmt.Sprintf("user %q is a member of it (%s)", clipString(user), m)
				}
			}
		}
	}
	if members == 0 {
		return false, "no user is a member of it, not even its owner"
	}
	return true, ""
}

// foreignSources names the sources of users and groups that
// /etc/nsswitch.conf lists besides the files ("" when there are none):
// files, compat (the files, with NIS lines this reader refuses) and
// systemd (dynamic users, which never share a user's group) are read here.
func foreignSources() string {
	b, err := os.ReadFile(nsswitch)
	if err != nil {
		return "" // no nsswitch.conf: the C library reads the files
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		line, _, _ = strings.Cut(line, "#")
		db, srcs, ok := strings.Cut(line, ":")
		if !ok || (strings.TrimSpace(db) != "passwd" && strings.TrimSpace(db) != "group") {
			continue
		}
		for _, s := range strings.Fields(srcs) {
			if strings.HasPrefix(s, "[") || strings.HasSuffix(s, "]") {
				continue // an action, [NOTFOUND=return]
			}
			switch s {
			case "files", "compat", "systemd":
			default:
				out = append(out, s)
			}
		}
	}
	return strings.Join(out, ", ")
}

// readDB reads a colon-separated database file (/etc/passwd, /etc/group)
// into its lines' fields. A line that includes entries from elsewhere (the
// compat mode's + and -) makes the file unreadable here.
func readDB(path string) ([][]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cannot read %s: %v", path, err)
	}
	var out [][]string
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if line[0] == '+' || line[0] == '-' {
			return nil, fmt.Errorf("%s includes entries from NIS (%q), which rightsize cannot read", path, clipString(line))
		}
		out = append(out, strings.Split(line, ":"))
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("cannot read %s: %v", path, err)
	}
	return out, nil
}

func groupName(group [][]string, gid uint32) string {
	for _, f := range group {
		if len(f) >= 3 {
			if g, err := strconv.ParseUint(f[2], 10, 32); err == nil && uint32(g) == gid {
				return f[0]
			}
		}
	}
	return ""
}
