package rightsize_test

import (
	"fmt"
	"go/types"
	"runtime/debug"
	"slices"
	"strings"
	"testing"

	"golang.org/x/tools/go/packages"
)

// The public packages name no internal type: every exported name, the
// exported fields and methods of their types, and the types those mention
// are ones a user can name too. An alias of an internal type, a field of
// one, or a function taking one would show in `go doc` as a type no user
// can write down.
func TestPublicAPINamesNoInternalType(t *testing.T) {
	public := publicPackages(t)
	if len(public) < 4 {
		t.Fatalf("public packages: %q; want at least the root, ledger, reaper and sandboxtest", public)
	}
	cfg := &packages.Config{Mode: packages.NeedName | packages.NeedTypes}
	if raceBuilt() {
		cfg.BuildFlags = []string{"-race"} // the test's own build: nothing compiles again
	}
	pkgs, err := packages.Load(cfg, public...)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pkgs {
		for _, e := range p.Errors {
			t.Errorf("%s: %v", p.PkgPath, e)
		}
		if p.Types == nil {
			continue
		}
		for _, why := range internalMentions(p.Types) {
			t.Errorf("%s: %s", p.PkgPath, why)
		}
	}
}

// publicPackages lists the module's importable packages that are not
// internal, and not commands.
func publicPackages(t *testing.T) []string {
	t.Helper()
	pkgs, err := packages.Load(&packages.Config{Mode: packages.NeedName}, "./...")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range pkgs {
		if p.Name != "main" && !isInternal(p.PkgPath) {
			out = append(out, p.PkgPath)
		}
	}
	slices.Sort(out)
	return out
}

func isInternal(path string) bool {
	return strings.Contains(path, "/internal/") || strings.HasSuffix(path, "/internal")
}

// internalMentions says, for each exported name of pkg whose API mentions
// a type of an internal package, where.
func internalMentions(pkg *types.Package) []string {
	var out []string
	say := func(where string, T types.Type) {
		if bad := mentions(T, map[types.Type]bool{}); bad != "" {
			out = append(out, fmt.Sprintf("%s mentions %s", where, bad))
		}
	}
	scope := pkg.Scope()
	for _, name := range scope.Names() {
		obj := scope.Lookup(name)
		if !obj.Exported() {
			continue
		}
		tn, ok := obj.(*types.TypeName)
		if !ok {
			say(name, obj.Type())
			continue
		}
		named, ok := types.Unalias(tn.Type()).(*types.Named)
		if !ok || named.Obj().Pkg() != pkg {
			// An alias of another package's type, or of a type literal.
			say(name, tn.Type())
			continue
		}
		switch u := named.Underlying().(type) {
		case *types.Struct:
			for i := range u.NumFields() {
				if f := u.Field(i); f.Exported() {
					say(name+"."+f.Name(), f.Type())
				}
			}
		case *types.Interface:
			for i := range u.NumMethods() {
				if m := u.Method(i); m.Exported() {
					say(name+"."+m.Name(), m.Type())
				}
			}
		default:
			say(name, u)
		}
		ms := types.NewMethodSet(types.NewPointer(named))
		for i := range ms.Len() {
			if m := ms.At(i).Obj(); m.Exported() {
				say(name+"."+m.Name(), m.Type())
			}
		}
	}
	return out
}

// mentions returns the first internal package's type T names, or "". A
// named type of another public package is that package's own business (its
// test checks it); only its type arguments are looked into.
func mentions(T types.Type, seen map[types.Type]bool) string {
	if seen[T] {
		return ""
	}
	seen[T] = true
	switch T := T.(type) {
	case *types.Alias:
		if p := T.Obj().Pkg(); p != nil && isInternal(p.Path()) {
			return p.Path() + "." + T.Obj().Name()
		}
		return mentions(types.Unalias(T), seen)
	case *types.Named:
		if p := T.Obj().Pkg(); p != nil && isInternal(p.Path()) {
			return p.Path() + "." + T.Obj().Name()
		}
		for i := range T.TypeArgs().Len() {
			if s := mentions(T.TypeArgs().At(i), seen); s != "" {
				return s
			}
		}
	case *types.Pointer:
		return mentions(T.Elem(), seen)
	case *types.Slice:
		return mentions(T.Elem(), seen)
	case *types.Array:
		return mentions(T.Elem(), seen)
	case *types.Chan:
		return mentions(T.Elem(), seen)
	case *types.Map:
		if s := mentions(T.Key(), seen); s != "" {
			return s
		}
		return mentions(T.Elem(), seen)
	case *types.Signature:
		for _, tup := range []*types.Tuple{T.Params(), T.Results()} {
			for i := range tup.Len() {
				if s := mentions(tup.At(i).Type(), seen); s != "" {
					return s
				}
			}
		}
	case *types.Struct:
		for i := range T.NumFields() {
			if s := mentions(T.Field(i).Type(), seen); s != "" {
				return s
			}
		}
	case *types.Interface:
		for i := range T.NumMethods() {
			if s := mentions(T.Method(i).Type(), seen); s != "" {
				return s
			}
		}
	}
	return ""
}

// raceBuilt reports whether this test binary was built with -race, as
// `make test` builds it.
func raceBuilt() bool {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, s := range bi.Settings {
		if s.Key == "-race" && s.Value == "true" {
			return true
		}
	}
	return false
}
