package ledger_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rightsize/rightsize-go/ledger"
)

func readFixture(tb testing.TB, name string) []byte {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func mustTime(tb testing.TB, s string) time.Time {
	tb.Helper()
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		tb.Fatal(err)
	}
	return t.UTC()
}

// The fixtures are the contract: if one is re-saved by an editor (a final
// newline added, indentation changed) it no longer tests what it says.
func TestFixturesAreByteExact(t *testing.T) {
	tests := []struct {
		file   string
		want   string
		reason string
	}{
		{"records/node_docker.json", `{"pid":15899,"startedIso":"2026-11-29T20:36:06.950Z","backend":"docker"}`,
			"a real Node record, verbatim: compact, milliseconds, no trailing newline"},
		{"records/rust_docker.json", "{\n  \"pid\": 31337,\n  \"startedIso\": \"2026-11-29T20:30:38Z\",\n  \"backend\": \"docker\"\n}",
			"Rust pretty-prints (two-space indent) with whole seconds; serde_json writes no final newline"},
		{"records/kotlin_tenths.json", `{"pid":7001,"startedIso":"2026-11-29T20:31:02.5Z","backend":"docker"}` + "\n",
			"Kotlin writes compact JSON with as many fraction digits as the instant needs"},
		{"records/systemf_msb.json", `{"pid":20418,"startedIso":"2026-11-29T20:36:07.004Z","backend":"msb"}`,
			"the systemf member: JSON.stringify of {pid, startedIso, backend}, msb without its path, no trailing newline"},
	}
	for _, tc := range tests {
		if got := string(readFixture(t, tc.file)); got != tc.want {
			t.Errorf("%s changed (%s):\n got %q\nwant %q", tc.file, tc.reason, got, tc.want)
		}
	}
}

func TestParseRecordFamilyFormats(t *testing.T) {
	tests := []struct {
		file    string
		want    ledger.Record
		started string // the instant Started must give; "" for none
		reason  string
	}{
		{
			file:    "records/rust_docker.json",
			want:    ledger.Record{PID: 31337, StartedISO: "2026-11-29T20:30:38Z", Backend: "docker"},
			started: "2026-11-29T20:30:38Z",
			reason:  "Rust: pretty-printed, whole seconds, no final newline",
		},
		{
			file:    "records/rust_microsandbox.json",
			want:    ledger.Record{PID: 4021, StartedISO: "2026-11-29T20:30:38Z", Backend: "msb", MsbPath: "/home/dev/.microsandbox/bin/msb"},
			started: "2026-11-29T20:30:38Z",
			reason:  `Rust writes "microsandbox" for msb: it is the same backend and comes back canonical "msb"`,
		},
		{
			file:   "records/rust_empty_started.json",
			want:   ledger.Record{PID: 4022, StartedISO: "", Backend: "docker"},
			reason: `Rust writes "" when it could not learn the start time: a valid record with no start time`,
		},
		{
			file:    "records/kotlin_tenths.json",
			want:    ledger.Record{PID: 7001, StartedISO: "2026-11-29T20:31:02.5Z", Backend: "docker"},
			started: "2026-11-29T20:31:02.500Z",
			reason:  "Kotlin: compact with a one-digit fraction (.5Z is 500 ms)",
		},
		{
			file:    "records/kotlin_micros.json",
			want:    ledger.Record{PID: 7002, StartedISO: "2026-11-29T20:31:02.123456Z", Backend: "msb", MsbPath: "/opt/msb/bin/msb"},
			started: "2026-11-29T20:31:02.123456Z",
			reason:  "Kotlin: compact with a six-digit fraction, msb with its path",
		},
		{
			file:    "records/node_docker.json",
			want:    ledger.Record{PID: 15899, StartedISO: "2026-11-29T20:36:06.950Z", Backend: "docker"},
			started: "2026-11-29T20:36:06.950Z",
			reason:  "Node: compact, milliseconds, no trailing newline",
		},
		{
			file: "records/go_docker.json",
			want: ledger.Record{PID: 4242, StartedISO: "2026-11-29T20:30:38.120Z", Backend: "docker",
				StartTicks: 6394612, BootID: "b3e3261a-ab18-4769-97ff-640f9b9a701d", PidNamespace: "pid:[4026531836]",
				Endpoint: "unix:///var/run/docker.sock", Writer: "go"},
			started: "2026-11-29T20:30:38.120Z",
			reason:  "rightsize-go's own record: every Go field read back",
		},
		{
			file: "records/go_msb.json",
			want: ledger.Record{PID: 4243, StartedISO: "2026-11-29T20:30:38.120Z", Backend: "msb", MsbPath: "/usr/local/bin/msb",
				StartTicks: 6394612, BootID: "b3e3261a-ab18-4769-97ff-640f9b9a701d", PidNamespace: "pid:[4026531836]", Writer: "go"},
			started: "2026-11-29T20:30:38.120Z",
			reason:  "a Go msb record: msbPath between the family's fields and the Go ones, no endpoint",
		},
		{
			file:    "records/unknown_fields.json",
			want:    ledger.Record{PID: 5150, StartedISO: "2026-11-29T20:36:06.950Z", Backend: "docker"},
			started: "2026-11-29T20:36:06.950Z",
			reason:  "unknown extra fields of any JSON type are ignored, as all three languages do",
		},
	}
	for _, tc := range tests {
		t.Run(filepath.Base(tc.file), func(t *testing.T) {
			got, err := ledger.ParseRecord(readFixture(t, tc.file))
			if err != nil {
				t.Fatalf("ParseRecord: %v; want a record (%s)", err, tc.reason)
			}
			if got != tc.want {
				t.Errorf("ParseRecord = %+v\nwant %+v\n(%s)", got, tc.want, tc.reason)
			}
			st, err := got.Started()
			if err != nil {
				t.Fatalf("Started: %v (%s)", err, tc.reason)
			}
			if tc.started == "" {
				if !st.IsZero() {
					t.Errorf("Started = %v, want the zero time (%s)", st, tc.reason)
				}
			} else if want := mustTime(t, tc.started); !st.Equal(want) || st.Location() != time.UTC {
				t.Errorf("Started = %v, want %v in UTC (%s)", st, want, tc.reason)
			}
		})
	}
}

func TestParseRecordRejects(t *testing.T) {
	huge := append([]byte(`{"pid":15899,"startedIso":"2026-11-29T20:36:06.950Z","backend":"docker","pad":"`),
		bytes.Repeat([]byte("x"), ledger.MaxRecordSize)...)
	huge = append(huge, `"}`...)
	tests := []struct {
		name   string
		data   []byte
		errHas string // a part of the error the user must see
		reason string
	}{
		{"not json", readFixture(t, "bad/not_json.json"), "not valid JSON", "key=value text is not a record"},
		{"truncated", readFixture(t, "bad/truncated.json"), "not valid JSON", "a record cut short (a writer that did not write atomically, a full disk) is not a record"},
		{"binary", readFixture(t, "bad/binary.json"), "not valid JSON", "binary bytes are not a record"},
		{"empty", []byte{}, "not valid JSON", "an empty file is not a record"},
		{"json null", []byte("null"), "", "null is valid JSON but not an object with a pid"},
		{"json array", []byte(`[{"pid":15899,"backend":"docker"}]`), "", "a record is an object, not an array holding one"},
		{"pid missing", readFixture(t, "bad/pid_missing.json"), `"pid"`, "without a pid there is no owner to judge"},
		{"pid null", []byte(`{"pid":null,"backend":"docker"}`), `"pid"`, "a null pid is no pid"},
		{"pid zero", readFixture(t, "bad/pid_zero.json"), `"pid"`, "pid 0 is not a process (kill(0) would mean the whole group)"},
		{"pid negative", readFixture(t, "bad/pid_negative.json"), `"pid"`, "a negative pid is not a process (kill(-n) means a group)"},
		{"pid float", readFixture(t, "bad/pid_float.json"), `"pid"`, "a pid is an integer"},
		{"pid exponent", []byte(`{"pid":1e3,"backend":"docker"}`), `"pid"`, "no writer of the family writes a pid in exponent form"},
		{"pid string", readFixture(t, "bad/pid_string.json"), `"pid"`, "the contract says pid is a number; Node rejects a string (typeof), so must Go"},
		{"pid too large", []byte(`{"pid":4294967296,"backend":"docker"}`), `"pid"`, "no process id is that large"},
		{"keys in the wrong case", readFixture(t, "bad/keys_wrong_case.json"), `"pid"`, `keys are matched exactly, as JSON.parse, serde and kotlinx do: "PID" is not "pid"`},
		{"backend missing", readFixture(t, "bad/backend_missing.json"), `"backend"`, "the sweep matches backends: a record without one cannot be attributed"},
		{"backend empty", []byte(`{"pid":15899,"startedIso":"","backend":""}`), `"backend"`, "an empty backend is no backend"},
		{"backend not a string", []byte(`{"pid":15899,"backend":1}`), "backend", "a backend is a string"},
		{"trailing garbage", readFixture(t, "bad/trailing_garbage.json"), "after", "two objects in one file is not one record"},
		{"trailing brace", []byte(`{"pid":15899,"backend":"docker"}}`), "", "a stray closing brace is not whitespace"},
		{"startedIso garbage", readFixture(t, "bad/started_garbage.json"), "startedIso", "a start time that cannot be read cannot defeat pid reuse"},
		{"startedIso a number", []byte(`{"pid":15899,"startedIso":1732912566,"backend":"docker"}`), "startedIso", "startedIso is an ISO-8601 string, not epoch seconds"},
		{"startTicks a string", readFixture(t, "bad/ticks_string.json"), "startTicks", "startTicks is a number"},
		{"startTicks negative", []byte(`{"pid":15899,"backend":"docker","startTicks":-1}`), "startTicks", "ticks since boot are never negative"},
		{"over 1 MiB", huge, "bytes", "a record is well under 1 KiB: a bigger one is refused before it is decoded"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ledger.ParseRecord(tc.data)
			if err == nil {
				t.Fatalf("ParseRecord = %+v, nil; want an error (%s)", got, tc.reason)
			}
			if got != (ledger.Record{}) {
				t.Errorf("ParseRecord returned %+v with its error; want the zero Record", got)
			}
			if !strings.Contains(err.Error(), tc.errHas) {
				t.Errorf("error %q does not mention %q (%s)", err, tc.errHas, tc.reason)
			}
		})
	}
}

func TestParseRecordAccepts(t *testing.T) {
	tests := []struct {
		name   string
		data   string
		want   ledger.Record
		reason string
	}{
		{"CRLF and tabs", "{\r\n\t\"pid\": 7,\r\n\t\"startedIso\": \"2026-11-29T20:30:38Z\",\r\n\t\"backend\": \"docker\"\r\n}\r\n",
			ledger.Record{PID: 7, StartedISO: "2026-11-29T20:30:38Z", Backend: "docker"},
			"a record saved on Windows is still JSON: whitespace of any kind between tokens"},
		{"null startedIso", `{"pid":7,"startedIso":null,"backend":"docker"}`,
			ledger.Record{PID: 7, Backend: "docker"}, "null is read as no start time, like the empty string"},
		{"no startedIso", `{"pid":7,"backend":"msb"}`,
			ledger.Record{PID: 7, Backend: "msb"}, "a missing start time is an unknown start time, not a broken record"},
		{"offset instead of Z", `{"pid":7,"startedIso":"2026-11-29T21:30:38.5+01:00","backend":"docker"}`,
			ledger.Record{PID: 7, StartedISO: "2026-11-29T21:30:38.5+01:00", Backend: "docker"}, "ISO-8601 with an offset names the same instant"},
		{"no zone", `{"pid":7,"startedIso":"2026-11-29T20:30:38.123","backend":"docker"}`,
			ledger.Record{PID: 7, StartedISO: "2026-11-29T20:30:38.123", Backend: "docker"}, "the contract says UTC: a zone-less instant is read as UTC"},
		{"largest pid", `{"pid":2147483647,"backend":"docker"}`,
			ledger.Record{PID: 2147483647, Backend: "docker"}, "pids fit in 32 bits on every platform"},
		{"duplicate key", `{"pid":1,"pid":7,"backend":"docker"}`,
			ledger.Record{PID: 7, Backend: "docker"}, "the last of duplicate keys wins, as in JSON.parse"},
		{"other backend", `{"pid":7,"backend":"podman"}`,
			ledger.Record{PID: 7, Backend: "podman"}, "an unknown backend is kept as written: the sweep leaves other backends alone"},
	}
	for _, tc := range tests {
		got, err := ledger.ParseRecord([]byte(tc.data))
		if err != nil {
			t.Errorf("%s: ParseRecord: %v (%s)", tc.name, err, tc.reason)
			continue
		}
		if got != tc.want {
			t.Errorf("%s: ParseRecord = %+v, want %+v (%s)", tc.name, got, tc.want, tc.reason)
		}
		if _, err := got.Started(); err != nil {
			t.Errorf("%s: Started: %v (%s)", tc.name, err, tc.reason)
		}
	}
}

func TestMarshal(t *testing.T) {
	tests := []struct {
		name   string
		rec    ledger.Record
		want   string
		reason string
	}{
		{
			name: "go docker",
			rec: ledger.Record{PID: 4242, StartedISO: "2026-11-29T20:30:38.120Z", Backend: "docker",
				StartTicks: 6394612, BootID: "b3e3261a-ab18-4769-97ff-640f9b9a701d", PidNamespace: "pid:[4026531836]",
				Endpoint: "unix:///var/run/docker.sock", Writer: "go"},
			want:   string(readFixture(t, "records/go_docker.json")),
			reason: "the family's fields in their order, no msbPath for docker, then the Go fields, compact, final newline",
		},
		{
			name: "go msb",
			rec: ledger.Record{PID: 4243, StartedISO: "2026-11-29T20:30:38.120Z", Backend: "msb", MsbPath: "/usr/local/bin/msb",
				StartTicks: 6394612, BootID: "b3e3261a-ab18-4769-97ff-640f9b9a701d", PidNamespace: "pid:[4026531836]", Writer: "go"},
			want:   string(readFixture(t, "records/go_msb.json")),
			reason: "msbPath comes right after backend when set; an empty endpoint is omitted",
		},
		{
			name:   "family fields only",
			rec:    ledger.Record{PID: 15899, StartedISO: "2026-11-29T20:36:06.950Z", Backend: "docker"},
			want:   `{"pid":15899,"startedIso":"2026-11-29T20:36:06.950Z","backend":"docker"}` + "\n",
			reason: "with no Go fields the output is what Node writes (plus a newline)",
		},
		{
			name:   "unknown start",
			rec:    ledger.Record{PID: 1, Backend: "docker"},
			want:   `{"pid":1,"startedIso":"","backend":"docker"}` + "\n",
			reason: `startedIso is always present: "" is how the family says unknown`,
		},
	}
	for _, tc := range tests {
		got := tc.rec.Marshal()
		if string(got) != tc.want {
			t.Errorf("%s: Marshal =\n%s\nwant\n%s\n(%s)", tc.name, got, tc.want, tc.reason)
		}
		back, err := ledger.ParseRecord(got)
		if err != nil {
			t.Errorf("%s: ParseRecord(Marshal): %v", tc.name, err)
		} else if back != tc.rec {
			t.Errorf("%s: round trip = %+v, want %+v", tc.name, back, tc.rec)
		}
	}
}

func FuzzParseRecord(f *testing.F) {
	for _, dir := range []string{"testdata/records", "testdata/bad"} {
		entries, err := os.ReadDir(dir)
		if err != nil {
			f.Fatal(err)
		}
		for _, e := range entries {
			f.Add(readFixture(f, filepath.Join(filepath.Base(dir), e.Name())))
		}
	}
	for _, s := range []string{
		"", "{}", "null", "[]", `"x"`, "0", `{"pid":1,"backend":"docker"}`, `{"pid":1,"backend":"microsandbox","msbPath":"/m"}`,
		`{"pid":1e0,"backend":"docker"}`, `{"pid":1.0,"backend":"docker"}`, `{"pid":"1","backend":"docker"}`,
		`{"pid":2147483648,"backend":"docker"}`, `{"pid":1,"backend":"docker","startTicks":18446744073709551615}`,
		`{"pid":1,"backend":"docker","startTicks":18446744073709551616}`, `{"pid":1,"backend":"docker","startedIso":"2026-11-29T20:30:38+14:00"}`,
		`{"pid":1,"backend":"\u0000<>&\ud800"}`, "{\"pid\":1,\"backend\":\"\xff\"}", `{"pid":1,"Pid":2,"backend":"docker"}`,
		`{"pid":1,"backend":"docker"} `, `{"pid":1,"backend":"docker"}{}`, "\xef\xbb\xbf{\"pid\":1,\"backend\":\"docker\"}",
		`{"pid":1,"backend":"docker","startedIso":"2026-02-30T00:00:00Z"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := ledger.ParseRecord(data)
		if err != nil {
			if r != (ledger.Record{}) {
				t.Errorf("error %v came with a non-zero record %+v", err, r)
			}
			return
		}
		if r.PID <= 0 || r.Backend == "" || r.Backend == "microsandbox" {
			t.Errorf("accepted record %+v: pid must be positive, backend set and canonical", r)
		}
		if _, err := r.Started(); err != nil {
			t.Errorf("accepted record %+v whose startedIso does not parse: %v", r, err)
		}
		out := r.Marshal()
		back, err := ledger.ParseRecord(out)
		if err != nil {
			t.Fatalf("Marshal output %q does not parse: %v", out, err)
		}
		if back != r {
			t.Errorf("round trip changed the record:\n was %+v\n now %+v\n via %q", r, back, out)
		}
		if again := back.Marshal(); !bytes.Equal(again, out) {
			t.Errorf("Marshal is not stable: %q then %q", out, again)
		}
	})
}

func TestParseRecordErrorIsShort(t *testing.T) {
	big := `{"pid":{"x":"` + strings.Repeat("y", 100_000) + "\n\"},\"backend\":\"docker\"}"
	_, err := ledger.ParseRecord([]byte(big))
	if err == nil {
		t.Fatal("an object as pid was accepted")
	}
	if len(err.Error()) > 200 {
		t.Errorf("error is %d bytes long: a hostile value must be clipped before it reaches a report", len(err.Error()))
	}
}
