package origin

import (
	"bytes"
	"runtime"
	"slices"
	"strconv"
	"strings"
)

// Creator is the origin of a create that reached this process's guard of
// every create (sandboxtest.GuardAll's proxy) while it is under way: it
// comes from no call of this module, so the stack that made it is looked
// for among every goroutine of the process (runtime.Stack).
//
// The goroutines waiting on a client call (an HTTP round trip, a child
// process such as `docker run`), outside this module's own code, are the
// ones that may be making it. Each belongs to the test whose goroutine
// started it, however many goroutines down: the one test they belong to
// is named, with the place of the call in that test's package. Several
// tests: Either. None, from TestMain's goroutines: NoTest("TestMain").
// None, from a goroutine a test started that outlived it: NoTest says
// whose. No waiting goroutine at all: the one test running, if there is
// one; Either or NoTest otherwise.
//
// A subtest's name is not on any stack: one seen only there is said as
// "a subtest of TestX", but a testify suite's method (TestX/TestMethod).
func Creator() Origin { return creator(parseStacks(allStacks())) }

// allStacks is runtime.Stack of every goroutine, whole.
func allStacks() []byte {
	buf := make([]byte, 64<<10)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) || len(buf) >= 64<<20 {
			return buf[:n]
		}
		buf = make([]byte, 2*len(buf))
	}
}

// A stackFrame is one call of a goroutine's stack.
type stackFrame struct {
	fn, file string
	line     int
}

func (f stackFrame) place() string {
	if f.file == "" {
		return ""
	}
	return f.file[strings.LastIndexAny(f.file, `/\`)+1:] + ":" + strconv.Itoa(f.line)
}

// A goroutine as runtime.Stack prints it.
type goroutine struct {
	id     int
	frames []stackFrame // innermost first
	// creator is the go statement that started it (fn is the function
	// that ran it); parent the goroutine that ran it, 0 when not said.
	creator stackFrame
	parent  int
}

// parseStacks reads runtime.Stack's text: blocks of "goroutine N [...]:",
// then a function line and a "\tfile:line +0x…" line per frame, then
// perhaps "created by F in goroutine M" and its line. Lines it does not
// understand are skipped.
func parseStacks(dump []byte) []goroutine {
	var out []goroutine
	var g *goroutine
	var pending *stackFrame // the frame whose file line comes next
	for line := range bytes.Lines(dump) {
		l := strings.TrimRight(string(line), "\r\n")
		switch {
		case strings.HasPrefix(l, "goroutine "):
			rest := l[len("goroutine "):]
			end := strings.IndexByte(rest, ' ')
			id, err := strconv.Atoi(rest[:max(end, 0)])
			if end < 0 || err != nil {
				g, pending = nil, nil
				continue
			}
			out = append(out, goroutine{id: id})
			g, pending = &out[len(out)-1], nil
		case g == nil || l == "":
			pending = nil
		case strings.HasPrefix(l, "\t"):
			if pending != nil {
				pending.file, pending.line = fileLine(l[1:])
			}
			pending = nil
		case strings.HasPrefix(l, "created by "):
			fn, parent, _ := strings.Cut(l[len("created by "):], " in goroutine ")
			g.creator = stackFrame{fn: fn}
			g.parent, _ = strconv.Atoi(parent)
			pending = &g.creator
		case strings.HasPrefix(l, "..."):
			pending = nil // frames elided
		default:
			fn := l
			if i := strings.LastIndexByte(l, '('); i > 0 && strings.HasSuffix(l, ")") {
				fn = l[:i]
			}
			g.frames = append(g.frames, stackFrame{fn: fn})
			pending = &g.frames[len(g.frames)-1]
		}
	}
	return out
}

// fileLine splits "/path/file.go:123 +0x1d".
func fileLine(s string) (string, int) {
	if i := strings.LastIndex(s, " +0x"); i >= 0 {
		s = s[:i]
	}
	i := strings.LastIndexByte(s, ':')
	if i < 0 {
		return s, 0
	}
	n, _ := strconv.Atoi(s[i+1:])
	return s[:i], n
}

// pkgOf is the package path of a function name as a stack prints it:
// "example.com/store_test.(*S).TestX.func1" → "example.com/store_test".
func pkgOf(fn string) string {
	slash := strings.LastIndexByte(fn, '/')
	dot := strings.IndexByte(fn[slash+1:], '.')
	if dot < 0 {
		return ""
	}
	return fn[:slash+1+dot]
}

// outerName is the function fn belongs to in its package, closures aside:
// "pkg.TestX.func1.2" → "TestX"; "pkg.(*S).TestX" → "(*S)".
func outerName(fn string) string {
	rest := strings.TrimPrefix(fn, pkgOf(fn)+".")
	name, _, _ := strings.Cut(rest, ".")
	return name
}

// isTestFunc reports whether name is a test, benchmark or fuzz target's:
// Test, then nothing or not a lower-case letter, as go test finds them.
func isTestFunc(name string) bool {
	for _, p := range []string{"Test", "Benchmark", "Fuzz"} {
		if rest, ok := strings.CutPrefix(name, p); ok {
			return rest == "" || rest[0] < 'a' || rest[0] > 'z'
		}
	}
	return false
}

// A testGoroutine is what a goroutine running under testing.tRunner says
// of its test.
type testGoroutine struct {
	// fn is the test's function ("" once it returned and the goroutine
	// waits in testing for its subtests or cleanups); pkg its package.
	fn, pkg string
	// root is the top-level test it is, or is under.
	root string
	// running: it runs its own code (it does not wait in testing.T.Run or
	// T.Parallel for another test).
	running bool
	// subtest: it was started by another test's T.Run.
	subtest bool
	// method is a testify suite method's name it runs, for a subtest of a
	// suite.
	method string
}

const testifySuite = "github.com/stretchr/testify/suite"

// testOf reads g as a test's goroutine; false when it is none (or is
// testing's own runner of the top-level tests).
func testOf(g goroutine, byID map[int]*goroutine) (testGoroutine, bool) {
	i := slices.IndexFunc(g.frames, func(f stackFrame) bool { return f.fn == "testing.tRunner" })
	if i <= 0 || i < len(g.frames)-1 {
		// A test's goroutine starts at tRunner; testing's runner of the
		// top-level tests calls it from M.Run.
		return testGoroutine{}, false
	}
	above := g.frames[i-1].fn
	t := testGoroutine{}
	if p := byID[g.parent]; p != nil && g.creator.fn == "testing.(*T).Run" {
		_, t.subtest = testOf(*p, byID)
	}
	switch {
	case strings.HasPrefix(above, "testing.tRunner."):
		// The test's function returned: it waits for its subtests or
		// runs its cleanups; its parent's T.Run says nothing of its
		// function, but a subtest's closure does.
	case pkgOf(above) == "testing":
		return testGoroutine{}, false
	default:
		t.fn, t.pkg = above, pkgOf(above)
		t.running = true
		// Waiting in testing (T.Run, T.Parallel) is not running.
		for _, f := range g.frames[:i-1] {
			if strings.HasPrefix(f.fn, "runtime.") || strings.HasPrefix(f.fn, "internal/") || strings.HasPrefix(f.fn, "sync.") {
				continue
			}
			t.running = pkgOf(f.fn) != "testing"
			break
		}
	}
	if t.pkg == testifySuite {
		for j := i - 2; j >= 0; j-- {
			f := g.frames[j]
			if name := f.fn[strings.LastIndexByte(f.fn, '.')+1:]; strings.HasPrefix(f.fn, pkgOf(f.fn)+".(") && isTestFunc(name) {
				t.method, t.pkg = name, pkgOf(f.fn)
				break
			}
		}
	}
	if name := outerName(t.fn); isTestFunc(name) {
		t.root = name
	}
	return t, true
}

// name is the test's name, as near as the stacks tell: exact for a
// top-level test and a suite's method; "a subtest of X" otherwise.
func (t testGoroutine) name(parent string) string {
	switch {
	case !t.subtest && t.fn != "" && t.root != "" && t.fn == t.pkg+"."+t.root:
		return t.root
	case t.method != "" && parent != "" && Origin{Test: parent}.Known():
		return parent + "/" + t.method
	case parent != "" && Origin{Test: parent}.Known():
		return "a subtest of " + parent
	case t.root != "":
		return "a subtest of " + t.root
	}
	return "a test whose name cannot be told"
}

// A claim is what one waiting goroutine says of who made the create.
type claim struct {
	test     string // the test it is under; "" when none
	pkg      string // that test's package, or TestMain's
	place    string
	testMain bool   // it is TestMain's (no test's)
	outlived string // the test that started it, which has ended
}

// creator decides from the goroutines (see Creator).
func creator(gs []goroutine) Origin {
	byID := map[int]*goroutine{}
	for i := range gs {
		byID[gs[i].id] = &gs[i]
	}
	// Each test goroutine's name, parents first (memoised).
	names := map[int]string{}
	var nameOf func(id int) (string, bool)
	nameOf = func(id int) (string, bool) {
		if n, ok := names[id]; ok {
			return n, n != ""
		}
		names[id] = "" // a cycle reads as no test
		g := byID[id]
		if g == nil {
			return "", false
		}
		t, ok := testOf(*g, byID)
		if !ok {
			return "", false
		}
		parent := ""
		if t.subtest {
			parent, _ = nameOf(g.parent)
		}
		if t.fn == "" && !t.subtest {
			// A top-level test whose function returned: its children
			// name it (created by pkg.TestX…).
			for _, c := range gs {
				if c.parent == id && isTestFunc(outerName(c.creator.fn)) {
					t.root, t.fn, t.pkg = outerName(c.creator.fn), pkgOf(c.creator.fn)+"."+outerName(c.creator.fn), pkgOf(c.creator.fn)
					break
				}
			}
		}
		n := t.name(parent)
		names[id] = n
		return n, true
	}
	mainPkg := ""
	for _, g := range gs {
		if i := slices.IndexFunc(g.frames, func(f stackFrame) bool { return f.fn == "main.main" }); i > 0 {
			mainPkg = pkgOf(g.frames[i-1].fn)
		}
	}

	var claims []claim
	for _, g := range gs {
		if !waiting(g) {
			continue
		}
		c := claim{}
		// The test it is under: its own goroutine's, or the nearest
		// goroutine above it that is a test's.
		for a, hops := &g, 0; a != nil && hops < 1000; a, hops = byID[a.parent], hops+1 {
			if n, ok := nameOf(a.id); ok {
				t, _ := testOf(*a, byID)
				c.test, c.pkg = n, t.pkg
				if c.pkg == "" {
					c.pkg = pkgOf(g.creator.fn)
				}
				break
			}
			// Started by a test's code whose goroutine is gone, or is no
			// longer in it.
			if root := outerName(a.creator.fn); c.outlived == "" && isTestFunc(root) {
				c.outlived, c.pkg = root, pkgOf(a.creator.fn)
			}
			if slices.ContainsFunc(a.frames, func(f stackFrame) bool { return f.fn == "main.main" }) {
				c.testMain = true
			}
			if a.parent == 0 {
				break
			}
		}
		if c.test != "" {
			c.outlived = ""
		}
		if c.test == "" && c.outlived == "" && !c.testMain && mainPkg != "" && outerName(g.creator.fn) == "TestMain" {
			c.testMain = true
		}
		if c.test == "" && c.outlived == "" {
			c.pkg = mainPkg
		}
		if ours(g, c.pkg) {
			continue
		}
		c.place = innermostIn(g, c.pkg)
		claims = append(claims, c)
	}

	var tests []string
	for _, c := range claims {
		if c.test != "" && !slices.Contains(tests, c.test) {
			tests = append(tests, c.test)
		}
	}
	switch {
	case len(tests) == 1:
		// Several goroutines of the test wait: the place is said only
		// when they all wait at one.
		o, seen := Origin{Test: tests[0]}, false
		for _, c := range claims {
			switch {
			case c.test != tests[0]:
			case !seen:
				o.Place, seen = c.place, true
			case c.place != o.Place:
				o.Place = ""
			}
		}
		return o
	case len(tests) > 1:
		slices.Sort(tests)
		return Either(tests)
	case len(claims) > 0:
		c := claims[0]
		switch {
		case c.outlived != "":
			return NoTest("a goroutine that outlived its test, started in "+c.outlived, c.place)
		case c.testMain:
			return NoTest("TestMain", c.place)
		}
	}
	// No goroutine is waiting on a client: the tests that run.
	tests = nil
	for _, g := range gs {
		if t, ok := testOf(g, byID); ok && t.running {
			if n, _ := nameOf(g.id); !slices.Contains(tests, n) {
				tests = append(tests, n)
			}
		}
	}
	slices.Sort(tests)
	return Either(tests)
}

// waiting reports whether g waits on a client call (an HTTP round trip,
// a child process): a create through the guard comes from such a call.
func waiting(g goroutine) bool {
	return slices.ContainsFunc(g.frames, func(f stackFrame) bool {
		return strings.HasPrefix(f.fn, "net/http.") && strings.Contains(f.fn, "oundTrip") ||
			f.fn == "os/exec.(*Cmd).Wait" || f.fn == "os.(*Process).Wait"
	})
}

// ours reports whether the call g waits on is this module's own, made
// below the code of package pkg (the test's, or TestMain's): what this
// module asks of an engine goes to it directly, never through the guard.
// This module's code above pkg's (Main running a Setup) is not.
func ours(g goroutine, pkg string) bool {
	for _, f := range g.frames {
		switch {
		case pkg != "" && pkgOf(f.fn) == pkg:
			return false
		case ownCode(f.fn, f.file):
			return true
		}
	}
	return pkgOf(g.creator.fn) != pkg && ownCode(g.creator.fn, g.creator.file)
}

// innermostIn is the place of g's innermost frame in package pkg (the
// go statement that started g, when none of its frames is).
func innermostIn(g goroutine, pkg string) string {
	if pkg == "" {
		return ""
	}
	for _, f := range g.frames {
		if pkgOf(f.fn) == pkg {
			return f.place()
		}
	}
	if pkgOf(g.creator.fn) == pkg {
		return g.creator.place()
	}
	return ""
}
