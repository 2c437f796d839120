package pretty

import (
	"bytes"
	"encoding/json"
	"runtime"
	"strings"
	"testing"
	"unicode/utf8"
)

// Within its bounds, Format indents as encoding/json does.
func TestFormatIndentsAsEncodingJSON(t *testing.T) {
	for _, in := range []string{
		`{}`, `[]`, `{"a":1}`, ` [1, 2 ,3] `, `{"a":{},"b":[],"c":[{}],"d":[[]]}`,
		`{"s":"a \"quoted\" {not, a: bracket} \\","u":"\u00e9 é 日本","n":-1.5e10,"t":true,"f":false,"z":null}`,
		"{\n\t\"pr\": 42,\r\n  \"title\": \"fix\"\n}",
		`{"action":"opened","issue":{"number":412,"labels":["bug","p2"],"user":{"login":"octocat"}}}`,
		strings.Repeat("[", MaxDepth) + "1" + strings.Repeat("]", MaxDepth),
	} {
		var want bytes.Buffer
		if err := json.Indent(&want, []byte(strings.TrimSpace(in)), "", "  "); err != nil {
			t.Fatal(err)
		}
		got := Format(in)
		if !got.JSON || got.Cut || got.Body != want.String() || got.Size != len(in) {
			t.Errorf("Format(%q) = %+v, want JSON %q", in, got, want.String())
		}
	}
}

// What is not a JSON object or array comes back as it came.
func TestFormatLeavesTextAlone(t *testing.T) {
	for _, in := range []string{"", "receipt sent", `"a string"`, `42`, `{"a":`, `{"a":1} trailing`, "[1,2]\xff"} {
		if got := Format(in); got.JSON || got.Cut || got.Body != in || got.Size != len(in) {
			t.Errorf("Format(%q) = %+v", in, got)
		}
	}
}

// Bytes made to be expensive to indent (deep nesting, or shallow nesting with
// many tiny values) come back short, never indented past MaxDepth, and cost
// little to make: the output is at most a small multiple of the input, and a
// megabyte is cut.
func TestFormatBoundsHostileInput(t *testing.T) {
	nest := func(depth int, inner string) string {
		return strings.Repeat("[", depth) + inner + strings.Repeat("]", depth)
	}
	cases := map[string]string{
		"20 KB of brackets":             nest(10_000, ""),
		"60 KB result, deep":            nest(10_000, `"`+strings.Repeat("x", 40_000)+`"`),
		"60 KB result, at the depth":    nest(MaxDepth, strings.TrimSuffix(strings.Repeat("0,", 30_000), ",")),
		"one past the depth":            nest(MaxDepth+1, "1"),
		"a megabyte of brackets":        nest(1<<19, ""),
		"a megabyte of objects":         strings.Repeat(`{"a":`, 200_000) + "1" + strings.Repeat("}", 200_000),
		"just over MaxIndent, flat":     "[" + strings.TrimSuffix(strings.Repeat("0,", MaxIndent/2+1), ",") + "]",
		"a megabyte of text, multibyte": strings.Repeat("é", 1<<19),
	}
	for name, in := range cases {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		got := Format(in)
		runtime.ReadMemStats(&after)
		if got.JSON {
			t.Errorf("%s: indented (%d bytes from %d)", name, len(got.Body), len(in))
		}
		if len(got.Body) > min(len(in), MaxOutput) {
			t.Errorf("%s: %d bytes shown of %d, want at most %d", name, len(got.Body), len(in), min(len(in), MaxOutput))
		}
		if got.Cut != (len(in) > MaxOutput) || got.Size != len(in) || !strings.HasPrefix(in, got.Body) || !utf8.ValidString(got.Body) {
			t.Errorf("%s: cut %v, size %d of %d, a prefix %v", name, got.Cut, got.Size, len(in), strings.HasPrefix(in, got.Body))
		}
		// Work, counted as bytes allocated rather than timed: a few times the
		// input (json.Valid's copy and its stack of open brackets), not its square.
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > uint64(8*min(len(in), MaxIndent)+1<<20) {
			t.Errorf("%s: formatting %d bytes allocated %d", name, len(in), alloc)
		}
	}
}

// JSON that is indented stays within its bounds: no line deeper than MaxDepth,
// no more than MaxOutput bytes.
func TestFormatIndentedWithinBounds(t *testing.T) {
	var b strings.Builder
	b.WriteString("[")
	for i := range 150 {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(strings.Repeat(`{"k":`, MaxDepth-1) + `"` + strings.Repeat("v", 200) + `"` + strings.Repeat("}", MaxDepth-1))
	}
	b.WriteString("]")
	in := b.String()
	got := Format(in)
	if len(in) > MaxIndent || !got.JSON {
		t.Fatalf("%d bytes of JSON at depth %d: indented %v", len(in), MaxDepth, got.JSON)
	}
	if len(got.Body) > min(growth*len(in)+slack, MaxOutput) {
		t.Errorf("%d bytes indented to %d", len(in), len(got.Body))
	}
	for _, line := range strings.Split(got.Body, "\n") {
		if lead := len(line) - len(strings.TrimLeft(line, " ")); lead > 2*MaxDepth {
			t.Fatalf("a line indented %d spaces: %q", lead, line)
		}
	}
}
