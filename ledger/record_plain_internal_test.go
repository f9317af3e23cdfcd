package ledger

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// The quick reader of plain records (scanPlain) must read what it accepts
// exactly as encoding/json does, and leave everything else to it. Checked
// against decode on the fixtures, on edge cases of JSON's grammar, and by
// fuzzing:
//
//	go test -run '^$' -fuzz FuzzScanPlain -fuzztime 1m ./ledger
func FuzzScanPlain(f *testing.F) {
	for _, dir := range []string{"testdata/records", "testdata/bad"} {
		entries, err := os.ReadDir(dir)
		if err != nil {
			f.Fatal(err)
		}
		for _, e := range entries {
			b, err := os.ReadFile(filepath.Join(dir, e.Name()))
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b)
		}
	}
	for _, s := range plainCases {
		f.Add([]byte(s.data))
	}
	f.Fuzz(func(t *testing.T, data []byte) { checkPlain(t, data) })
}

// plainCases: whether scanPlain takes each, and why.
var plainCases = []struct {
	data   string
	plain  bool
	reason string
}{
	{`{"pid":1,"startedIso":"2026-11-29T20:36:06.950Z","backend":"docker"}`, true, "Node's record"},
	{"{\n  \"pid\": 1,\n  \"startedIso\": \"\",\n  \"backend\": \"microsandbox\"\n}\n", true, "Rust's, pretty-printed"},
	{" \t\r\n{ } \n", true, "an empty object, white space around"},
	{`{"pid":1,"pid":2}`, true, "a repeated key: the later wins, as in a decoded map"},
	{`{"pid":-0,"x":null,"y":"","z":0}`, true, "null, an empty string, zeros"},
	{`{"pid":1,"backend":"docker","other":"a b ~"}`, true, "an unknown key"},
	{``, false, "nothing"},
	{`null`, false, "not an object"},
	{`[]`, false, "not an object"},
	{`{"pid":1}{}`, false, "data after the object"},
	{`{"pid":1} x`, false, "data after the object"},
	{`{"pid":1,}`, false, "a trailing comma"},
	{`{"pid":01}`, false, "a leading zero"},
	{`{"pid":1.0}`, false, "a fraction"},
	{`{"pid":1e3}`, false, "an exponent"},
	{`{"pid":-}`, false, "a sign alone"},
	{`{"pid":1-2}`, false, "a number with a tail"},
	{`{"pid":true}`, false, "a boolean"},
	{`{"pid":nul}`, false, "a cut literal"},
	{`{"pid":{"a":1}}`, false, "an object value"},
	{`{"pid":[1]}`, false, "an array value"},
	{`{"p\u0069d":1}`, false, "an escape in a key"},
	{`{"backend":"dock\"er"}`, false, "an escape in a value"},
	{"{\"backend\":\"d\xc3\xb6cker\"}", false, "UTF-8 beyond ASCII"},
	{"{\"backend\":\"\xff\"}", false, "invalid UTF-8"},
	{"{\"backend\":\"a\tb\"}", false, "a control character in a string"},
	{"{\"backend\":\"a\x7fb\"}", false, "DEL"},
	{`{"pid":1`, false, "cut short"},
	{`{"pid" 1}`, false, "no colon"},
	{`{pid:1}`, false, "a bare key"},
	{"\xef\xbb\xbf{}", false, "a byte order mark"},
	{"{}\x00", false, "a NUL after the object"},
	{"{}\v", false, "white space JSON does not allow"},
}

func TestScanPlain(t *testing.T) {
	for _, c := range plainCases {
		var f recordFields
		if got := f.scanPlain([]byte(c.data)); got != c.plain {
			t.Errorf("scanPlain(%q) = %v, want %v: %s", c.data, got, c.plain, c.reason)
		}
		checkPlain(t, []byte(c.data))
	}
}

// checkPlain: when scanPlain takes data, decode takes it too and finds the
// same values; every string value decode finds unquotes as encoding/json
// does.
func checkPlain(t *testing.T, data []byte) {
	t.Helper()
	var quick, slow recordFields
	ok := quick.scanPlain(data)
	err := slow.decode(data)
	if ok && err != nil {
		t.Fatalf("scanPlain took %q, which encoding/json refuses: %v", data, err)
	}
	if err != nil {
		return
	}
	for i := range recordKeys {
		pair := [2]json.RawMessage{quick[i], slow[i]}
		if ok && (!bytes.Equal(pair[0], pair[1]) || (pair[0] == nil) != (pair[1] == nil)) {
			t.Errorf("%q: field %d is %q read quickly, %q by encoding/json", data, i, pair[0], pair[1])
		}
		if v := pair[1]; len(v) > 0 && v[0] == '"' {
			var want, got string
			werr := json.Unmarshal(v, &want)
			gerr := unquote(v, &got)
			if got != want || (werr == nil) != (gerr == nil) {
				t.Errorf("unquote(%q) = %q, %v; encoding/json gives %q, %v", v, got, gerr, want, werr)
			}
		}
	}
}
