package origin

import (
	"path/filepath"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"unsafe"
)

// Namer is what Of needs of a test; testing.TB has it.
type Namer interface{ Name() string }

// Of is the origin of a call made into this module by test tb: tb's name,
// and the place of the first caller outside this module's own code (a
// _test.go file of the module is a test's code), skipping the functions tb
// marked as helpers with t.Helper, as testing does for the line of a
// t.Error.
func Of(tb Namer) Origin {
	return Origin{Test: tb.Name(), Place: callerPlace(helperMarks(tb))}
}

// Caller is the place of the first caller outside this module's own code,
// for a call that no test made (a suite's Setup).
func Caller() string { return callerPlace(nil) }

// module is this module's path, from this package's: a fork under another
// path still knows its own code.
var module = strings.TrimSuffix(reflect.TypeFor[Origin]().PkgPath(), "/internal/origin")

// ownCode reports whether a frame is this module's code, rather than a
// test's: a function of the module's packages, outside its _test.go files.
func ownCode(fn, file string) bool {
	return (strings.HasPrefix(fn, module+"/") || strings.HasPrefix(fn, module+".")) && !strings.HasSuffix(file, "_test.go")
}

// callerPlace walks the stack up from the caller of this package: past
// the module's own code, then past helpers, and stops at the frame below
// testing's runner (the test function itself, which testing stops at
// too).
func callerPlace(helpers map[string]bool) string {
	var pcs [64]uintptr
	n := runtime.Callers(3, pcs[:])
	frames := runtime.CallersFrames(pcs[:n])
	var last runtime.Frame
	for {
		f, more := frames.Next()
		if f.Function == "testing.tRunner" {
			return place(last)
		}
		if !ownCode(f.Function, f.File) && f.Function != "" && !strings.HasPrefix(f.Function, "runtime.") {
			if !helpers[f.Function] {
				return place(f)
			}
			last = f
		}
		if !more {
			return place(last)
		}
	}
}

func place(f runtime.Frame) string {
	if f.File == "" {
		return ""
	}
	return filepath.Base(f.File) + ":" + strconv.Itoa(f.Line)
}

// Package testing keeps the functions a test marked as helpers in
// common.helperPCs, under common.mu, and offers no way to ask for them:
// they are read here, under that lock, through reflection. On a Go whose
// testing keeps them otherwise, or for a TB that is not testing's, no
// helper is known and the place is the first caller outside the module
// (TestHelperMarks pins this against the Go the module is built with).
var (
	rwMutexType = reflect.TypeFor[sync.RWMutex]()
	pcSetType   = reflect.TypeFor[map[uintptr]struct{}]()
)

// helperMarks returns the names of the functions tb, and the tests it is a
// subtest of, marked as helpers; nil when none can be read.
func helperMarks(tb any) map[string]bool {
	v := reflect.ValueOf(tb)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Type().Elem().Kind() != reflect.Struct || v.Type().Elem().PkgPath() != "testing" {
		return nil
	}
	c := v.Elem().FieldByName("common")
	var out map[string]bool
	for depth := 0; depth < 64 && c.IsValid() && c.Kind() == reflect.Struct; depth++ {
		mu, pcs := c.FieldByName("mu"), c.FieldByName("helperPCs")
		if !mu.IsValid() || mu.Type() != rwMutexType || !mu.CanAddr() || !pcs.IsValid() || pcs.Type() != pcSetType {
			return out
		}
		lock := (*sync.RWMutex)(unsafe.Pointer(mu.UnsafeAddr()))
		lock.RLock()
		keys := pcs.MapKeys()
		lock.RUnlock()
		for _, k := range keys {
			if out == nil {
				out = map[string]bool{}
			}
			out[funcName(uintptr(k.Uint()))] = true
		}
		// A test's parent is set when the test is made, and never changes.
		p := c.FieldByName("parent")
		if !p.IsValid() || p.Kind() != reflect.Pointer || p.IsNil() || p.Type().Elem() != c.Type() {
			break
		}
		c = p.Elem()
	}
	return out
}

// names caches funcName: a helper's pc is looked up at every call.
var names sync.Map // uintptr → string

// funcName is the function of pc as testing names it (pcToName): the
// innermost of an inlined call.
func funcName(pc uintptr) string {
	if n, ok := names.Load(pc); ok {
		return n.(string)
	}
	f, _ := runtime.CallersFrames([]uintptr{pc}).Next()
	names.Store(pc, f.Function)
	return f.Function
}
