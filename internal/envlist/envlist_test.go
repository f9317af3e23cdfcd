package envlist

import (
	"runtime"
	"slices"
	"testing"
)

func TestMergeReplacesEveryEarlierValue(t *testing.T) {
	base := []string{"A=1", "B=2", "A=3", "C="}
	got := Merge(base, "A=9", "D=4", "A=10")
	want := []string{"B=2", "C=", "D=4", "A=10"}
	if !slices.Equal(got, want) {
		t.Errorf("Merge = %q, want %q", got, want)
	}
	if !slices.Equal(base, []string{"A=1", "B=2", "A=3", "C="}) {
		t.Errorf("Merge modified its base: %q", base)
	}
}

func TestMergeKeyCase(t *testing.T) {
	got := Merge([]string{"Path=x"}, "PATH=y")
	want := []string{"Path=x", "PATH=y"}
	if runtime.GOOS == "windows" {
		want = []string{"PATH=y"}
	}
	if !slices.Equal(got, want) {
		t.Errorf("on %s Merge = %q, want %q", runtime.GOOS, got, want)
	}
}

func TestWithout(t *testing.T) {
	got := Without([]string{"RZ_A=1", "HOME=/root", "RZ_B"}, func(k string) bool { return k == "RZ_A" || k == "RZ_B" })
	if !slices.Equal(got, []string{"HOME=/root"}) {
		t.Errorf("Without = %q", got)
	}
}
