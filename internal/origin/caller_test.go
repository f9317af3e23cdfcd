package origin

import (
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
)

// line is file:line of its caller.
func line() string {
	_, file, n, _ := runtime.Caller(1)
	return filepath.Base(file) + ":" + strconv.Itoa(n)
}

func TestOfPlace(t *testing.T) {
	o, want := Of(t), line()
	if o.Test != "TestOfPlace" || o.Place != want {
		t.Errorf("Of(t) = %+v, want TestOfPlace at %s", o, want)
	}
}

// startish stands for a user's helper around sandboxtest.Start.
func startish(t *testing.T) Origin {
	t.Helper()
	return Of(t)
}

// notHelper is a function of the test's that does not say it is a helper.
func notHelper(t *testing.T) (Origin, string) { return Of(t), line() }

// TestHelperMarks pins what Of reads of package testing: the functions a
// test marked with t.Helper, as testing keeps them in this Go. A Go whose
// testing keeps them otherwise fails here (and Of then names the helper's
// line, as it does for a function not marked).
func TestHelperMarks(t *testing.T) {
	o, want := startish(t), line()
	if o.Place != want {
		t.Errorf("through a helper marked with t.Helper: place %q, want the test's call of it, %s", o.Place, want)
	}
	o, want = notHelper(t)
	if o.Place != want {
		t.Errorf("through a function not marked: place %q, want its own line, %s", o.Place, want)
	}
	t.Run("eu", func(t *testing.T) {
		o, want := startish(t), line()
		if o.Test != "TestHelperMarks/eu" || o.Place != want {
			t.Errorf("in a subtest: %+v, want TestHelperMarks/eu at %s", o, want)
		}
	})
}

// TestHelperTestItself: a test function that marks itself a helper is
// where testing stops, and so does Of.
func TestHelperTestItself(t *testing.T) {
	t.Helper()
	o, want := Of(t), line()
	if o.Place != want {
		t.Errorf("place %q, want %s", o.Place, want)
	}
}

// fakeTB is a TB that is not testing's: its name is taken, no helper is
// known.
type fakeTB struct{}

func (fakeTB) Name() string { return "fake" }

func TestOfOtherTB(t *testing.T) {
	o, want := Of(fakeTB{}), line()
	if o.Test != "fake" || o.Place != want {
		t.Errorf("Of(fakeTB) = %+v, want fake at %s", o, want)
	}
}

func BenchmarkOf(b *testing.B) {
	for b.Loop() {
		startish2(b)
	}
}

func startish2(b *testing.B) Origin {
	b.Helper()
	return Of(b)
}
