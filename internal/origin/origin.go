// Package origin owns which test made a sandbox, a network or a local
// process: the test's name (testing.TB.Name) and the place of the call in
// the test's own code (file:line), found from the caller's stack as
// package testing finds the line of a t.Error; the labels and annotations
// that carry them on an engine; and the words that say so to a person.
//
// Where no single test made something (a suite's Setup, TestMain, a
// goroutine that outlived its test, parallel tests that cannot be told
// apart), Test says that instead of a name, in words with a space in
// them: no test's name has one (package testing writes a subtest's spaces
// as underscores), so a reader never takes them for a test.
//
// It imports nothing of the module, and it must never guess: what it
// cannot tell, it says it cannot.
package origin

import (
	"context"
	"maps"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Origin is who made something: the test, and where in its code.
type Origin struct {
	// Test is the test's name (TestCheckout/eu), or words saying why no
	// single test is named (NoTest, Setup, Either).
	Test string `json:"test,omitempty"`
	// Place is file:line of the call in the test's own code (the file's
	// base name, as testing prints it); "" when it is not known.
	Place string `json:"place,omitempty"`
}

// Labels of containers and networks (and annotations of pods) that carry
// an Origin.
const (
	LabelTest  = "dev.rightsize.test"
	LabelPlace = "dev.rightsize.test.place"
)

// Bounds of what an Origin carries: a table-driven test's name can be
// long, and a label or a line must stay small.
const (
	maxTest  = 300
	maxPlace = 200
)

// IsZero reports whether nothing is known of who made it.
func (o Origin) IsZero() bool { return o.Test == "" && o.Place == "" }

// String is "TestCheckout/eu at store_test.go:42", or the test alone
// when the place is not known; "" for the zero Origin.
func (o Origin) String() string {
	switch {
	case o.Place == "":
		return o.Test
	case o.Test == "":
		return "at " + o.Place
	}
	return o.Test + " at " + o.Place
}

// Bounded returns o with each field cut to its bound, on a rune boundary.
func (o Origin) Bounded() Origin {
	return Origin{Test: cut(o.Test, maxTest), Place: cut(o.Place, maxPlace)}
}

// Labels are the labels that carry o on a container or a network (and
// the annotations of a pod): nil when o is zero.
func (o Origin) Labels() map[string]string {
	if o.IsZero() {
		return nil
	}
	o = o.Bounded()
	l := map[string]string{}
	if o.Test != "" {
		l[LabelTest] = o.Test
	}
	if o.Place != "" {
		l[LabelPlace] = o.Place
	}
	return l
}

// AddLabels puts o's labels into l (over any of the same keys: they are
// rightsize's own), and returns l, made when nil and o is not zero.
func (o Origin) AddLabels(l map[string]string) map[string]string {
	if o.IsZero() {
		return l
	}
	if l == nil {
		l = map[string]string{}
	}
	maps.Copy(l, o.Labels())
	return l
}

// FromLabels reads an Origin from labels (or a pod's annotations).
func FromLabels(l map[string]string) Origin {
	return Origin{Test: l[LabelTest], Place: l[LabelPlace]}
}

// KubeLabels are the Kubernetes labels of o: a label value is at most 63
// characters of [A-Za-z0-9._-], starting and ending with a letter or a
// digit, so the test's name is there in that form (every other character
// made '_') only when it fits, and not at all otherwise; the place is
// left to the annotations, which hold both as they are (Labels).
func (o Origin) KubeLabels() map[string]string {
	v, ok := KubeLabelValue(o.Test)
	if !ok {
		return nil
	}
	return map[string]string{LabelTest: v}
}

// KubeLabelValue is s in the form a Kubernetes label value takes, and
// whether there is one: false when s is empty or longer than 63
// characters in that form.
func KubeLabelValue(s string) (string, bool) {
	if !utf8.ValidString(s) {
		return "", false
	}
	out := make([]byte, 0, len(s))
	for _, r := range s {
		if r < utf8.RuneSelf && (alnum(byte(r)) || r == '-' || r == '_' || r == '.') {
			out = append(out, byte(r))
		} else {
			out = append(out, '_')
		}
	}
	v := strings.TrimFunc(string(out), func(r rune) bool { return r >= utf8.RuneSelf || !alnum(byte(r)) })
	if v == "" || len(v) > 63 {
		return "", false
	}
	return v, true
}

func alnum(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' }

// The words said in place of a test's name.
//
// Setup: a suite's sandbox, started by a Setup of sandboxtest.Main (or,
// after it, shared by the suite). NoTest: made where no test ran: TestMain
// itself, a goroutine whose test had ended, or while no test ran at all.
// Either: parallel tests ran, and which of them made it cannot be told.

// Setup is the origin of what a suite's Setup starts, called at place;
// main names the function Main runs in (TestMain in a test binary).
func Setup(main, place string) Origin {
	return Origin{Test: "Setup (" + main + ")", Place: place}
}

// Suite is the origin of a suite's sandbox asked for after its Setup,
// called at place.
func Suite(main, place string) Origin {
	return Origin{Test: "the suite (" + main + "), after its Setup", Place: place}
}

// NoTest is the origin of what was made while no test ran, where says
// where it was made instead ("TestMain", "a goroutine of TestX, which
// had ended", "none was running").
func NoTest(where, place string) Origin {
	return Origin{Test: "no test (" + where + ")", Place: place}
}

// Either is the origin of what one of tests made, when which cannot be
// told.
func Either(tests []string) Origin {
	const show = 3
	var names string
	switch n := len(tests); {
	case n == 0:
		return NoTest("none was running", "")
	case n == 1:
		return Origin{Test: tests[0]}
	case n <= show:
		names = strings.Join(tests[:n-1], ", ") + " or " + tests[n-1]
	default:
		names = strings.Join(tests[:show], ", ") + " or " + strconv.Itoa(n-show) + " more"
	}
	return Origin{Test: names + " (parallel: could not tell which)"}
}

// Known reports whether o names exactly one test (rather than saying why
// it names none).
func (o Origin) Known() bool { return o.Test != "" && !strings.ContainsRune(o.Test, ' ') }

type ctxKey struct{}

// NewContext returns ctx carrying o: a backend labels what it creates
// under ctx with it (FromContext).
func NewContext(ctx context.Context, o Origin) context.Context {
	if o.IsZero() {
		return ctx
	}
	return context.WithValue(ctx, ctxKey{}, o)
}

// FromContext is the Origin ctx carries; zero when none.
func FromContext(ctx context.Context) Origin {
	o, _ := ctx.Value(ctxKey{}).(Origin)
	return o
}

// cut shortens s to at most n bytes, on a rune boundary, marking the cut.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n-len("…")]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "…"
}
