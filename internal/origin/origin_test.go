package origin

import (
	"context"
	"maps"
	"strings"
	"testing"
)

func TestLabels(t *testing.T) {
	for _, tc := range []struct {
		o      Origin
		want   map[string]string
		reason string
	}{
		{Origin{}, nil, "nothing known: no label at all, not empty ones"},
		{Origin{Test: "TestCheckout/eu", Place: "store_test.go:42"}, map[string]string{LabelTest: "TestCheckout/eu", LabelPlace: "store_test.go:42"}, "both, as they are"},
		{Origin{Test: "TestX"}, map[string]string{LabelTest: "TestX"}, "no place: no place label"},
		{Origin{Test: strings.Repeat("é", 400)}, map[string]string{LabelTest: strings.Repeat("é", (maxTest-len("…"))/2) + "…"}, "a long name is cut on a rune boundary"},
	} {
		if got := tc.o.Labels(); !maps.Equal(got, tc.want) || (got == nil) != (tc.want == nil) {
			t.Errorf("%+v.Labels() = %q, want %q: %s", tc.o, got, tc.want, tc.reason)
		}
		if back := FromLabels(tc.o.Labels()); tc.want != nil && back != tc.o.Bounded() {
			t.Errorf("FromLabels(%+v.Labels()) = %+v", tc.o, back)
		}
	}
}

func TestKubeLabelValue(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		ok       bool
		reason   string
	}{
		{"TestCheckout", "TestCheckout", true, "valid as it is"},
		{"TestCheckout/eu", "TestCheckout_eu", true, "a slash is not a label character"},
		{"Setup (TestMain)", "Setup__TestMain", true, "the closing parenthesis is trimmed: a value ends with a letter or digit"},
		{"TestX/é", "TestX", true, "a non-ASCII character becomes '_', trimmed at the end"},
		{strings.Repeat("a", 63), strings.Repeat("a", 63), true, "63 is the limit"},
		{strings.Repeat("a", 64), "", false, "longer: no label, rather than a cut one that could name another test"},
		{"", "", false, "nothing"},
		{"///", "", false, "nothing left"},
		{"Test\xff", "", false, "not UTF-8"},
	} {
		got, ok := KubeLabelValue(tc.in)
		if got != tc.want || ok != tc.ok {
			t.Errorf("KubeLabelValue(%q) = %q, %v; want %q, %v: %s", tc.in, got, ok, tc.want, tc.ok, tc.reason)
		}
	}
	if l := (Origin{Test: strings.Repeat("a", 64), Place: "x_test.go:1"}).KubeLabels(); l != nil {
		t.Errorf("KubeLabels of a name with no label form = %q, want none (the annotations hold it)", l)
	}
}

func TestWords(t *testing.T) {
	for _, tc := range []struct {
		o         Origin
		want      string
		knownTest bool
	}{
		{Origin{Test: "TestCheckout/eu", Place: "store_test.go:42"}, "TestCheckout/eu at store_test.go:42", true},
		{Setup("TestMain", "main_test.go:12"), "Setup (TestMain) at main_test.go:12", false},
		{NoTest("TestMain", ""), "no test (TestMain)", false},
		{Either([]string{"TestA", "TestB"}), "TestA or TestB (parallel: could not tell which)", false},
		{Either([]string{"TestA", "TestB", "TestC", "TestD", "TestE"}), "TestA, TestB, TestC or 2 more (parallel: could not tell which)", false},
		{Either(nil), "no test (none was running)", false},
		{Either([]string{"TestA"}), "TestA", true},
	} {
		if got := tc.o.String(); got != tc.want {
			t.Errorf("String() = %q, want %q", got, tc.want)
		}
		if tc.o.Known() != tc.knownTest {
			t.Errorf("%q.Known() = %v, want %v: words said in place of a name hold a space, no test name does", tc.o.Test, !tc.knownTest, tc.knownTest)
		}
	}
}

func TestContext(t *testing.T) {
	o := Origin{Test: "TestX", Place: "x_test.go:1"}
	if got := FromContext(NewContext(context.Background(), o)); got != o {
		t.Errorf("FromContext = %+v, want %+v", got, o)
	}
	if got := FromContext(context.Background()); !got.IsZero() {
		t.Errorf("FromContext of a bare context = %+v, want zero", got)
	}
}
