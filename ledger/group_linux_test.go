package ledger_test

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/rightsize/rightsize-go/ledger"
)

// getentRow is one line of getent(1): what the C library says, through
// every source the host has, as the independent answer to "who is in this
// group".
type getentRow []string

func getent(t *testing.T, db string, keys ...string) []getentRow {
	t.Helper()
	out, err := exec.Command("getent", append([]string{db}, keys...)...).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.ExitCode() == 2 {
			return nil // no such key
		}
		t.Skipf("getent %s: %v", db, err)
	}
	var rows []getentRow
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if l != "" {
			rows = append(rows, strings.Split(l, ":"))
		}
	}
	return rows
}

// groupMembers is every user in gid: those it is the primary group of,
// and those it lists.
func groupMembers(t *testing.T, gid int) []string {
	t.Helper()
	var out []string
	for _, p := range getent(t, "passwd") {
		if len(p) > 3 && p[3] == strconv.Itoa(gid) {
			out = append(out, p[0])
		}
	}
	for _, g := range getent(t, "group", strconv.Itoa(gid)) {
		if len(g) > 3 {
			for _, m := range strings.Split(g[3], ",") {
				if m != "" && !slices.Contains(out, m) {
					out = append(out, m)
				}
			}
		}
	}
	return out
}

// groupWritableLedger makes cache/runs as a member of the family does
// under umask 002: both folders mode 0775, of group gid.
func groupWritableLedger(t *testing.T, gid int) string {
	t.Helper()
	cache := filepath.Join(t.TempDir(), "rightsize")
	for _, p := range []string{cache, filepath.Join(cache, ledger.RunsDir)} {
		if err := os.MkdirAll(p, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Lchown(p, -1, gid); err != nil {
			t.Skipf("cannot give %s to group %d: %v", p, gid, err)
		}
		if err := os.Chmod(p, 0o775); err != nil {
			t.Fatal(err)
		}
	}
	// A record a member wrote there, group-writable too.
	if err := os.WriteFile(filepath.Join(cache, ledger.RunsDir, "abcd1234.json"), []byte(`{"pid":1,"startedIso":"2026-01-01T00:00:00.000Z","backend":"docker"}`), 0o664); err != nil {
		t.Fatal(err)
	}
	return cache
}

// TestGroupWritableLedger: the whole family makes its folders with the
// process umask; under 002 (a user with a private group, the Debian and
// Ubuntu default) they are mode 0775. Such a ledger is used when its
// group has no member but its owner (Debian ssh's rule for ~/.ssh), and
// refused, with today's clear error, when another user is in the group:
// as that group's primary group, or listed in it. Real folders, real
// groups of this host, judged against what getent(1) says.
func TestGroupWritableLedger(t *testing.T) {
	me := os.Geteuid()
	myName := ""
	for _, p := range getent(t, "passwd", strconv.Itoa(me)) {
		myName = p[0]
	}
	if myName == "" {
		t.Skipf("uid %d has no passwd entry", me)
	}
	others := func(members []string) []string {
		return slices.DeleteFunc(slices.Clone(members), func(m string) bool { return m == myName })
	}

	t.Run("a private group", func(t *testing.T) {
		gid := os.Getegid()
		if m := groupMembers(t, gid); !slices.Equal(m, []string{myName}) {
			t.Skipf("this user's group %d is not private here (its members: %q)", gid, m)
		}
		cache := groupWritableLedger(t, gid)
		if _, err := ledger.EnsureSubdir(cache, ledger.RunsDir); err != nil {
			t.Fatalf("a 0775 ledger of group %d, whose only member is %s: %v", gid, myName, err)
		}
		s, err := ledger.ScanRuns(cache)
		if err != nil || s.Len() != 1 {
			t.Fatalf("ScanRuns of the 0775 ledger: %v (%d runs, want the member's 1)", err, s.Len())
		}
		if _, err := ledger.NewRun(cache, ledger.Owner{Backend: "docker"}); err != nil {
			t.Errorf("NewRun in the 0775 ledger: %v", err)
		}
	})

	// A group another user is in: the first one found that way, or, as
	// root, one made for the test.
	find := func(t *testing.T, primary bool) (gid int, other string) {
		mine, _ := os.Getgroups()
		for _, g := range getent(t, "group") {
			if len(g) < 4 {
				continue
			}
			n, err := strconv.Atoi(g[2])
			if err != nil || n == os.Getegid() || (me != 0 && !slices.Contains(mine, n)) {
				continue // not one this process may give a folder to
			}
			var o []string
			if primary {
				for _, p := range getent(t, "passwd") {
					if len(p) > 3 && p[3] == g[2] && p[0] != myName {
						o = append(o, p[0])
					}
				}
			} else {
				o = others(strings.Split(g[3], ","))
				o = slices.DeleteFunc(o, func(s string) bool { return s == "" })
			}
			if len(o) > 0 {
				return n, o[0]
			}
		}
		if me != 0 {
			t.Skip("no group this user may give a folder to has another member")
		}
		return madeGroup(t, primary)
	}
	for _, tc := range []struct {
		name    string
		primary bool
		says    string
	}{
		{"another user's primary group", true, "primary group of user"},
		{"a group listing another user", false, "is a member of it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gid, other := find(t, tc.primary)
			cache := groupWritableLedger(t, gid)
			_, err := ledger.EnsureSubdir(cache, ledger.RunsDir)
			var ue *ledger.UnsafeDirError
			if !errors.As(err, &ue) {
				t.Fatalf("a 0775 ledger of group %d, which %s is in: %v; want an *UnsafeDirError", gid, other, err)
			}
			for _, want := range []string{cache, "mode 0775", "gid " + strconv.Itoa(gid), tc.says, strconv.Quote(other), "chmod 700"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
			if _, err := ledger.ScanRuns(cache); !errors.As(err, &ue) {
				t.Errorf("ScanRuns read a ledger another user may write: %v", err)
			}
		})
	}

	t.Run("world-writable", func(t *testing.T) {
		gid := os.Getegid()
		cache := groupWritableLedger(t, gid)
		if err := os.Chmod(cache, 0o777); err != nil {
			t.Fatal(err)
		}
		_, err := ledger.EnsureSubdir(cache, ledger.RunsDir)
		var ue *ledger.UnsafeDirError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), "writable by everyone") {
			t.Errorf("a 0777 cache dir: %v; want an *UnsafeDirError saying it is writable by everyone", err)
		}
	})
}

// madeGroup makes, as root, a group another new user is in (its primary
// group, or a member of it), both removed when the test ends.
func madeGroup(t *testing.T, primary bool) (gid int, user string) {
	t.Helper()
	for _, tool := range []string{"groupadd", "useradd", "groupdel", "userdel"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no group with another member here, and no %s to make one: %v", tool, err)
		}
	}
	var b [5]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	suffix := hex.EncodeToString(b[:])
	group, user := "rzg"+suffix, "rzu"+suffix
	if out, err := exec.Command("groupadd", group).CombinedOutput(); err != nil {
		t.Skipf("groupadd %s: %v: %s", group, err, out)
	}
	t.Cleanup(func() { exec.Command("groupdel", group).Run() })
	args := []string{"-M", "-s", "/usr/sbin/nologin"}
	if primary {
		args = append(args, "-N", "-g", group)
	} else {
		args = append(args, "-U", "-G", group) // a group of its own, and listed in this one
	}
	if out, err := exec.Command("useradd", append(args, user)...).CombinedOutput(); err != nil {
		t.Skipf("useradd %s: %v: %s", user, err, out)
	}
	t.Cleanup(func() { exec.Command("userdel", user).Run() })
	rows := getent(t, "group", group)
	if len(rows) != 1 {
		t.Fatalf("getent group %s: %q", group, rows)
	}
	gid, err := strconv.Atoi(rows[0][2])
	if err != nil {
		t.Fatal(fmt.Errorf("gid of %s: %w", group, err))
	}
	return gid, user
}
