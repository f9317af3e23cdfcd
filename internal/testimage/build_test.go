package testimage

import (
	"debug/elf"
	"fmt"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/rightsize/rightsize-go/internal/image"
)

// recorder is a testing.TB whose Fatal ends only the goroutine that calls
// it, so that a test can see what Fatal was told.
type recorder struct {
	testing.TB
	fatal string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatal(args ...any) {
	r.fatal = fmt.Sprint(args...)
	runtime.Goexit()
}

func (r *recorder) get(im *lazyImage) string {
	done := make(chan string)
	go func() {
		defer close(done)
		done <- im.get(r)
	}()
	return <-done
}

func TestFailureIsMemoized(t *testing.T) {
	t.Setenv(EnvSkip, "")
	t.Setenv(EnvBusybox, t.TempDir()+"/nowhere")
	im := &lazyImage{kind: kindBusybox, noGate: true}
	var msgs []string
	for range 2 {
		r := &recorder{TB: t}
		if ref := r.get(im); ref != "" {
			t.Fatalf("got %q with no busybox", ref)
		}
		msgs = append(msgs, r.fatal)
	}
	if msgs[0] != msgs[1] {
		t.Errorf("second failure %q differs from the first %q", msgs[1], msgs[0])
	}
	// The variable is the user's choice: it is not passed over for
	// /bin/busybox or a pull, and the message says how to change it.
	for _, want := range []string{"nowhere", EnvBusybox, "unset it"} {
		if !strings.Contains(msgs[0], want) {
			t.Errorf("failure %q does not mention %q", msgs[0], want)
		}
	}
}

func TestDynamicBusyboxRefused(t *testing.T) {
	var dynamic string
	for _, p := range []string{"/bin/sh", "/bin/ls", "/usr/bin/env"} {
		if f, err := elf.Open(p); err == nil {
			for _, prog := range f.Progs {
				if prog.Type == elf.PT_INTERP {
					dynamic = p
				}
			}
			f.Close()
		}
		if dynamic != "" {
			break
		}
	}
	if dynamic == "" {
		t.Skip("no dynamically linked executable found to try")
	}
	t.Setenv(EnvBusybox, dynamic)
	_, err := findBusybox(t.Context())
	if err == nil || !strings.Contains(err.Error(), "dynamically linked") {
		t.Errorf("findBusybox with %s=%s = %v; want an error saying it is dynamically linked", EnvBusybox, dynamic, err)
	}
}

func TestTag(t *testing.T) {
	bb := &image.Busybox{Content: []byte("one")}
	cases := []struct {
		name   string
		a, b   string
		same   bool
		reason string
	}{
		{"stable", tag(kindBusybox, bb), tag(kindBusybox, bb), true, "the same inputs must find the image built before"},
		{"kind", tag(kindBusybox, bb), tag(kindNoShell, nil), false, "two kinds must not share a tag"},
		{"busybox", tag(kindBusybox, bb), tag(kindBusybox, &image.Busybox{Content: []byte("two")}), false, "another busybox is another image"},
	}
	hex12 := regexp.MustCompile(`^[0-9a-f]{12}$`)
	for _, c := range cases {
		if !hex12.MatchString(c.a) {
			t.Errorf("%s: tag %q is not 12 hex digits", c.name, c.a)
		}
		if (c.a == c.b) != c.same {
			t.Errorf("%s: tags %q and %q; %s", c.name, c.a, c.b, c.reason)
		}
	}
}
