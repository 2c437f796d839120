package ingest

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// TestBodyLookupAgreesWithEncodingJSON checks the rules' body scanner against
// encoding/json (refLookup, the decoding it replaced) on bodies that are odd
// on purpose: duplicate names, escapes, bad UTF-8, deep nesting, bodies that
// are not JSON at all.
func TestBodyLookupAgreesWithEncodingJSON(t *testing.T) {
	for _, body := range lookupBodies() {
		l := newLookup([]byte(body)) // one per body, for every pointer, as Rules.Apply
		for _, p := range lookupPointers {
			got, gotOK := l.get(p)
			want, wantOK := refGet([]byte(body), p)
			if gotOK != wantOK || !reflect.DeepEqual(got, want) {
				t.Errorf("body %.60q, pointer %q: got %#v, %v; encoding/json finds %#v, %v", body, p, got, gotOK, want, wantOK)
			}
		}
	}
}

// FuzzBodyLookup runs the same comparison on bodies the fuzzer makes
// (go test ./ingest -run '^$' -fuzz FuzzBodyLookup).
func FuzzBodyLookup(f *testing.F) {
	for _, body := range lookupBodies() {
		f.Add(body)
	}
	f.Fuzz(func(t *testing.T, body string) {
		l := newLookup([]byte(body))
		for _, p := range lookupPointers {
			got, gotOK := l.get(p)
			want, wantOK := refGet([]byte(body), p)
			if gotOK != wantOK || !reflect.DeepEqual(got, want) {
				t.Errorf("body %q, pointer %q: got %#v, %v; encoding/json finds %#v, %v", body, p, got, gotOK, want, wantOK)
			}
		}
	})
}

var lookupPointers = [][]string{
	{"a"}, {"a", "b"}, {"a", "0"}, {"a", "1"}, {"a", "01"}, {"a", "-1"}, {"0"}, {"1", "a"},
	{"number"}, {"repository", "full_name"}, {"é"}, {"a/b"}, {"~"}, {""}, {"\ufffd"},
	{"a", "b", "x"}, {"a/b", "x"}, {"a", "b/x"}, {"a/b/x"},
} // no empty pointer: a rule's never is (parsePointer)

func lookupBodies() []string {
	deep := strings.Repeat("[", maxJSONDepth) + strings.Repeat("]", maxJSONDepth)
	deeper := strings.Repeat("[", maxJSONDepth+1) + strings.Repeat("]", maxJSONDepth+1)
	deepObj := `{"a":` + strings.Repeat(`{"b":`, maxJSONDepth-1) + "1" + strings.Repeat("}", maxJSONDepth)
	return []string{
		`{"repository":{"full_name":"octo/repo"},"number":42,"pad":[{"k":"v"},{}]}`,
		`{"a":1,"a":2}`, `{"a":{"b":1},"a":{"c":2}}`, `{"a":[10,[20],{"b":30}]}`,
		` {"a" : { "b" : "x" } } `, `{"a":{"b":"x"}} x`, `{"a":{"b":"x"}`, `{"a":{"b":"x",}}`,
		`{"\u0061":1}`, `{"\u00e9":"e"}`, `{"é":"e"}`, `{"a\/b":1}`, `{"a/b":1}`, `{"~":true}`,
		`{"":null}`, `{"a":"\ud800"}`, `{"a":"\x01"}`, "{\"\xff\":1}", "{\"a\":\"\xff\"}",
		`{"a":-0}`, `{"a":"x"}`, `{"a":"x\"y"}`, `{"a":"é"}`, `{"a":-1.5e-3}`, `{"a":12345678901234567890}`, `{"a":01}`, `{"a":1.}`, `{"a":1.5e}`, `{"a":1.5E+3}`, `{"a":-}`, `{"a":.5}`,
		`{"a":tru}`, `{"a":true}`, `{"a":false}`, `{"a":nul}`, `{"a":"\q"}`, `{"a":"\u12"}`,
		`[{"a":1},[2]]`, `["x"]`, `"a"`, `42`, ``, `   `, `{`, `[`, `{"a"}`, `{"a":}`, `{,}`, `[1,]`,
		`{"a":{"b":{"x":1}},"a/b":{"x":2},"a/b/x":3}`, `{"a/b":{"x":2},"a":{"b":{"x":1},"b/x":4}}`,
		"\f{\"a\":1}", "{\"a\":1}\v", "\u00a0{\"a\":1}", "{\"a\":1}\u0085", " \t\r\n{\"a\":1}\n",
		`{"\u00e9":1,"é":2}`, `{"a":"\ud83d\ude00"}`, `{"\ud83d\ude00":1}`, `{"\ud83d":1}`, "{\"\xed\xa0\x80\":1}",
		`{"a":1e3}`, `{"a":1.0}`, `{"a":-0.0e-0}`, `{"a":"\u0000"}`, `{"\u007e":1}`, `{"\/":1}`,
		`{"a":[1,2,3,4,5,6,7,8,9,10,11]}`, deep, deeper, deepObj, `not json`, "\x00\x01",
	}
}

// refGet is the lookup the rules used before bodyLookup: encoding/json
// decoding each object and array on the pointer's path.
func refGet(body []byte, p []string) (any, bool) {
	if !json.Valid(body) { // a body that is not one JSON value has nothing in it
		return nil, false
	}
	cur := json.RawMessage(body)
	for _, tok := range p {
		cur = bytes.TrimSpace(cur)
		if len(cur) == 0 {
			return nil, false
		}
		switch cur[0] {
		case '{':
			var obj map[string]json.RawMessage
			if json.Unmarshal(cur, &obj) != nil {
				return nil, false
			}
			v, ok := obj[tok]
			if !ok {
				return nil, false
			}
			cur = v
		case '[':
			var arr []json.RawMessage
			if json.Unmarshal(cur, &arr) != nil {
				return nil, false
			}
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(arr) || (len(tok) > 1 && tok[0] == '0') || tok[0] == '+' || tok[0] == '-' {
				return nil, false
			}
			cur = arr[i]
		default:
			return nil, false
		}
	}
	// Decoded here as bodyLookup's decodeValue did before it took plain
	// strings and numbers as they are: that shortcut is checked too.
	dec := json.NewDecoder(bytes.NewReader(cur))
	dec.UseNumber()
	var v any
	err := dec.Decode(&v)
	return v, err == nil
}

// TestBodyLookupUnescapesNamesOnce: a name with an escape or a byte past ASCII
// is unescaped once per body, not again for each pointer that looks through
// its object (1,000 such names, 20 pointers: 20,000 decodes before).
func TestBodyLookupUnescapesNamesOnce(t *testing.T) {
	members := make([]string, 1000)
	for i := range members {
		members[i] = `"é` + strconv.Itoa(i) + `":0`
	}
	l := newLookup([]byte("{" + strings.Join(members, ",") + `,"\u0061":1}`))
	if v, ok := l.get([]string{"a"}); !ok || v != json.Number("1") {
		t.Fatalf("get /a = %#v, %v; want 1", v, ok)
	}
	allocs := testing.AllocsPerRun(20, func() { l.get([]string{"missing"}) })
	if allocs > 10 {
		t.Errorf("a pointer that finds nothing among 1,000 escaped names allocated %.0f times; want at most 10 (the names unescaped once)", allocs)
	}
}
