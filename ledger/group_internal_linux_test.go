package ledger

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// readGroupAlone on crafted files: what makes a group-writable ledger
// folder the user's alone, and every way the answer is no, each with
// what the error will say.
func TestReadGroupAlone(t *testing.T) {
	const (
		passwd = "root:x:0:0:root:/root:/bin/bash\nann:x:1000:1000::/home/ann:/bin/sh\nbob:x:1001:1001::/home/bob:/bin/sh\nsvc:x:990:1002::/:/usr/sbin/nologin\n"
		group  = "root:x:0:\nann:x:1000:\nbob:x:1001:\nshared:x:1002:ann\ndev:x:1003:ann,bob\nempty:x:1004:\nlisted:x:1005:ann\n"
	)
	for _, tc := range []struct {
		name          string
		passwd, group string
		nss           string // "" for none
		userdb        string // a membership drop-in's name
		gid, uid      uint32
		alone         bool
		says          string
		reason        string
	}{
		{name: "private group", gid: 1000, uid: 1000, alone: true, reason: "ann's own group, no other member: Debian's user private group"},
		{name: "listed alone", gid: 1005, uid: 1000, alone: true, reason: "a group that lists only its owner"},
		{name: "nsswitch files systemd", nss: "passwd: files systemd\ngroup:  files [SUCCESS=merge] systemd\n", gid: 1000, uid: 1000, alone: true,
			reason: "Debian's and Ubuntu's default sources: the files, and systemd's dynamic users"},
		{name: "another's primary group", gid: 1002, uid: 1000, says: `"svc"`, reason: "svc has it as primary group: it may write there"},
		{name: "another member", gid: 1003, uid: 1000, says: `user "bob" is a member`, reason: "dev lists bob"},
		{name: "no member", gid: 1004, uid: 1000, says: "no user is a member", reason: "ssh refuses a group with no member too: it is a setgid program's"},
		{name: "not in the file", gid: 4242, uid: 1000, says: "not in", reason: "a group from elsewhere: its members are unknown"},
		{name: "owner not in passwd", gid: 1004, uid: 2000, says: "no entry", reason: "whose the group is cannot be told"},
		{name: "ldap", nss: "passwd: files ldap\ngroup: files ldap\n", gid: 1000, uid: 1000, says: "ldap", reason: "a directory may add members the files do not show"},
		{name: "sss for groups only", nss: "passwd: files\ngroup: files sss\n", gid: 1000, uid: 1000, says: "sss", reason: "either database from elsewhere is enough to refuse"},
		{name: "nis lines", group: group + "+:::\n", gid: 1000, uid: 1000, says: "NIS", reason: "compat mode's + pulls in entries this reader cannot see"},
		{name: "userdb membership", userdb: "bob:ann.membership", gid: 1000, uid: 1000, says: `user "bob"`, reason: "systemd-userdb adds members with drop-in files"},
		{name: "own userdb membership", userdb: "ann:ann.membership", gid: 1000, uid: 1000, alone: true, reason: "the owner's own membership changes nothing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			write := func(name, data string) string {
				p := filepath.Join(dir, name)
				if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
					t.Fatal(err)
				}
				return p
			}
			p, g := tc.passwd, tc.group
			if p == "" {
				p = passwd
			}
			if g == "" {
				g = group
			}
			saved := []string{etcPasswd, etcGroup, nsswitch}
			savedDB := userdbDirs
			t.Cleanup(func() { etcPasswd, etcGroup, nsswitch, userdbDirs = saved[0], saved[1], saved[2], savedDB })
			etcPasswd, etcGroup = write("passwd", p), write("group", g)
			nsswitch = filepath.Join(dir, "no-nsswitch.conf")
			if tc.nss != "" {
				nsswitch = write("nsswitch.conf", tc.nss)
			}
			userdbDirs = []string{filepath.Join(dir, "userdb")}
			if tc.userdb != "" {
				if err := os.Mkdir(userdbDirs[0], 0o755); err != nil {
					t.Fatal(err)
				}
				write(filepath.Join("userdb", tc.userdb), "")
			}
			alone, why := readGroupAlone(tc.gid, tc.uid)
			if alone != tc.alone {
				t.Fatalf("alone = %v (%s), want %v: %s", alone, why, tc.alone, tc.reason)
			}
			if !alone && !strings.Contains(why, tc.says) {
				t.Errorf("why %q does not say %q (%s)", why, tc.says, tc.reason)
			}
		})
	}
}
