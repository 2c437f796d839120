package modules

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestRenameDefKeepsEveryOtherByte(t *testing.T) {
	cases := []struct{ in, want string }{
		{`{"name":"echo","inputSchema":{"$schema":"x","type":"object"}}`,
			`{"name":"mod_echo","inputSchema":{"$schema":"x","type":"object"}}`},
		// Whitespace, key order and odd members survive untouched.
		{"{ \"inputSchema\" : {\"type\": \"object\",\n \"x-k\": [1.0, 2e3]},\n  \"name\" :  \"echo\" , \"_meta\":{\"name\":\"inner\"} }",
			"{ \"inputSchema\" : {\"type\": \"object\",\n \"x-k\": [1.0, 2e3]},\n  \"name\" :  \"mod_echo\" , \"_meta\":{\"name\":\"inner\"} }"},
		// Escapes in the old name do not confuse the splice.
		{`{"description":"say \"name\"","name":"e\u0063ho"}`, `{"description":"say \"name\"","name":"mod_echo"}`},
	}
	for _, tc := range cases {
		got, err := renameDef(json.RawMessage(tc.in), "mod_echo")
		if err != nil {
			t.Fatalf("renameDef(%s): %v", tc.in, err)
		}
		if string(got) != tc.want {
			t.Errorf("renameDef(%s)\n got %s\nwant %s", tc.in, got, tc.want)
		}
	}
	for _, bad := range []string{`[1]`, `{"title":"no name"}`, `"echo"`} {
		if _, err := renameDef(json.RawMessage(bad), "x"); err == nil {
			t.Errorf("renameDef(%s) succeeded", bad)
		}
	}
}

func TestHashDefIgnoresFormattingOnly(t *testing.T) {
	a, _ := hashDef(json.RawMessage(`{"name":"e","inputSchema":{"type":"object","required":["a"]}}`))
	b, _ := hashDef(json.RawMessage("{ \"inputSchema\": {\"required\": [\"a\"], \"type\": \"object\"},\n \"name\": \"e\" }"))
	c, _ := hashDef(json.RawMessage(`{"name":"e","inputSchema":{"type":"object","required":["b"]}}`))
	d, _ := hashDef(json.RawMessage(`{"name":"e","annotations":{"destructiveHint":true},"inputSchema":{"type":"object","required":["a"]}}`))
	if a != b {
		t.Error("reformatting changed the hash")
	}
	if a == c || a == d {
		t.Error("a changed schema or annotation kept the hash")
	}
	if len(a) != 64 {
		t.Errorf("hash %q is not hex SHA-256", a)
	}
}

func TestExposedName(t *testing.T) {
	for _, tc := range []struct{ module, upstream, want string }{
		{"everything", "echo", "everything_echo"},
		{"everything", "everything_echo", "everything_echo"},
		{"git", "github_list", "git_github_list"}, // "git" alone is not "git_"
		{"log_watcher", "log_watcher_add_exclude", "log_watcher_add_exclude"},
	} {
		if got := exposedName(tc.module, tc.upstream); got != tc.want {
			t.Errorf("exposedName(%q, %q) = %q, want %q", tc.module, tc.upstream, got, tc.want)
		}
	}
}

func TestSelectTools(t *testing.T) {
	listed := []upstreamTool{
		{Name: "a", Def: json.RawMessage(`{"name":"a","inputSchema":{"type":"object"}}`)},
		{Name: "m_b", Def: json.RawMessage(`{"name":"m_b","inputSchema":{"type":"object"}}`)},
		{Name: "c", Def: json.RawMessage(`{"name":"c","inputSchema":{"type":"object"}}`)},
	}
	m := Manifest{Name: "m", File: "m.json"}
	tools, refused, missing := selectTools(m, listed)
	if len(refused) != 0 || len(missing) != 0 {
		t.Fatal(refused, missing)
	}
	if got := exposedNames(tools); !slices.Equal(got, []string{"m_a", "m_b", "m_c"}) {
		t.Fatalf("names = %q", got)
	}

	m.IncludeTools = []string{"c", "m_b", "gone"}
	tools, refused, missing = selectTools(m, listed)
	if len(refused) != 0 {
		t.Fatal(refused)
	}
	if len(tools) != 2 || tools[0].Name != "m_b" || tools[1].Name != "m_c" || !slices.Equal(missing, []string{"gone"}) {
		t.Fatalf("include_tools selection = %+v, missing %q", tools, missing)
	}

	// A tool that cannot be exposed is refused on its own; the others are served.
	// Two tools that would share an exposed name are both refused.
	bad := append(slices.Clone(listed),
		upstreamTool{Name: "m_a", Def: json.RawMessage(`{"name":"m_a"}`)},
		upstreamTool{Name: strings.Repeat("x", 130), Def: json.RawMessage(`{"name":"x"}`)},
		upstreamTool{Name: "has space", Def: json.RawMessage(`{"name":"has space"}`)},
		upstreamTool{Name: "list", Def: json.RawMessage(`["not an object"]`)},
		upstreamTool{Name: "typed", Def: json.RawMessage(`{"name":"typed","description":5}`)},
		// MCP asks object schemas of both; the TypeScript SDK refuses a whole
		// listing with one that is not.
		upstreamTool{Name: "textonly", Def: json.RawMessage(`{"name":"textonly","inputSchema":{"type":"string"}}`)},
		upstreamTool{Name: "untyped", Def: json.RawMessage(`{"name":"untyped","inputSchema":{}}`)},
		upstreamTool{Name: "listout", Def: json.RawMessage(`{"name":"listout","inputSchema":{"type":"object"},"outputSchema":{"type":"array"}}`)},
		upstreamTool{Name: "strout", Def: json.RawMessage(`{"name":"strout","outputSchema":"object"}`)},
		// Absent or null schemas are fine: the gateway lists an empty object's.
		upstreamTool{Name: "bare", Def: json.RawMessage(`{"name":"bare","inputSchema":null,"outputSchema":null}`)},
		upstreamTool{Name: "counted", Def: json.RawMessage(`{"name":"counted","outputSchema":{"type":"object"}}`)},
	)
	tools, refused, _ = selectTools(Manifest{Name: "m"}, bad)
	if got := exposedNames(tools); !slices.Equal(got, []string{"m_b", "m_c", "m_bare", "m_counted"}) {
		t.Fatalf("served = %q, want m_b, m_c, m_bare and m_counted", got)
	}
	// The gateway's refusals of a tool that declares an outputSchema leave out
	// structuredContent: the catalog says which do.
	if tools[2].Output || !tools[3].Output {
		t.Fatalf("outputSchema declared: m_bare %v, m_counted %v", tools[2].Output, tools[3].Output)
	}
	var upstreams []string
	for _, r := range refused {
		upstreams = append(upstreams, r.Upstream)
	}
	if !slices.Equal(upstreams, []string{"a", "m_a", strings.Repeat("x", maxShownName) + "…", "has space", "list", "typed",
		"textonly", "untyped", "listout", "strout"}) {
		t.Fatalf("refused = %+v", refused)
	}
	for i, want := range []string{`would all be exposed as "m_a"`, `would all be exposed as "m_a"`,
		"is not a valid MCP tool name", `exposed name "m_has space" is not a valid MCP tool name`, "not a JSON object",
		"definition is not an MCP tool: json: cannot unmarshal number",
		`inputSchema has "type": "string", not "object"`, `inputSchema has "type": none, not "object"`,
		`outputSchema has "type": "array", not "object"`, "definition is not an MCP tool"} {
		if !strings.Contains(refused[i].Reason, want) {
			t.Errorf("refused %q: reason %q, want it to contain %q", refused[i].Upstream, refused[i].Reason, want)
		}
	}
}

func exposedNames(tools []toolEntry) []string {
	var names []string
	for _, tool := range tools {
		names = append(names, tool.Name)
	}
	return names
}

func TestBackoffDelay(t *testing.T) {
	want := []string{"5s", "10s", "20s", "40s", "1m20s", "2m40s", "5m0s", "5m0s"}
	for i, w := range want {
		if got := backoffDelay(i).String(); got != w {
			t.Errorf("backoffDelay(%d) = %s, want %s", i, got, w)
		}
	}
	if got := backoffDelay(1000).String(); got != "5m0s" {
		t.Errorf("backoffDelay(1000) = %s", got)
	}
}

// A definition is shown for review with nothing in it that a terminal would obey
// or that would reorder the text, and still says exactly what the module sent.
func TestReviewableDefinition(t *testing.T) {
	in := json.RawMessage("{\"name\":\"m_echo\",\"description\":\"Benign.\u009b8m mails your files\u009b0m \u202egnp.exe \U000e0001 café 日本\"}")
	out := Reviewable(in)
	for _, bad := range []string{"\u009b", "\u202e", "\U000e0001"} {
		if bytes.Contains(out, []byte(bad)) {
			t.Errorf("%q passed through: %s", bad, out)
		}
	}
	if !bytes.Contains(out, []byte(`\u009b8m`)) || !bytes.Contains(out, []byte(`\u202e`)) || !bytes.Contains(out, []byte(`\udb40\udc01`)) ||
		!bytes.Contains(out, []byte("café 日本")) {
		t.Errorf("not escaped as expected: %s", out)
	}
	var a, b any
	if err := json.Unmarshal(in, &a); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(out, &b); err != nil || !reflect.DeepEqual(a, b) {
		t.Fatalf("the shown definition says something else: %s (%v)", out, err)
	}
	// A byte that is not UTF-8 is never passed on raw, wherever it stands.
	for _, raw := range []string{"{\"description\":\"a\x9b2J\"}", "{\"description\":\"\u202e\x9b2J\"}"} {
		got := Reviewable(json.RawMessage(raw))
		if bytes.Contains(got, []byte{0x9b}) || !bytes.Contains(got, []byte(`\ufffd2J`)) {
			t.Errorf("reviewable(%q) = %q", raw, got)
		}
	}
	plain := json.RawMessage(`{"name":"m_echo","description":"Echo, café."}`)
	if got := Reviewable(plain); !bytes.Equal(got, plain) {
		t.Errorf("a printable definition changed: %s", got)
	}
	huge := json.RawMessage(`{"name":"m_echo","description":"` + strings.Repeat("x", maxShownDefinition) + `"}`)
	if got := Reviewable(huge); len(got) > 200 || !bytes.Contains(got, []byte("too large to show")) {
		t.Errorf("a huge definition was shown whole (%d bytes)", len(got))
	}
}

// A module's own text in a refusal is made safe to print and bounded.
func TestShownEscapesAndBounds(t *testing.T) {
	for in, want := range map[string]string{
		"plain_name":                             "plain_name",
		"has space":                              "has space",
		"esc\x1b[31mred":                         `esc\x1b[31mred`,
		"csi\u009b2J":                            `csi\u009b2J`,
		"rtl\u202eevil":                          `rtl\u202eevil`,
		"bad\xffbyte":                            `bad\xffbyte`,
		strings.Repeat("é", 100):                 strings.Repeat("é", maxShownName/2) + "…",
		strings.Repeat("a", 127) + "é":           strings.Repeat("a", 127) + "…", // not cut inside a character
		"bad\xffname" + strings.Repeat("a", 200): `bad\xffname` + strings.Repeat("a", maxShownName-8) + "…",
	} {
		if got := shown(in); got != want {
			t.Errorf("shown(%q) = %q, want %q", in, got, want)
		}
	}
}

// A status keeps the first maxRefusedShown refusals and the number of the rest;
// the warning is one line for a listing's refusals, and at most one a minute.
func TestRefusalsAreBoundedAndLoggedOnce(t *testing.T) {
	var logged strings.Builder
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	m := &module{sup: &Supervisor{opts: Options{Now: func() time.Time { return now }}},
		log: slog.New(slog.NewTextHandler(&logged, nil))}
	m.refusals.Every = time.Minute
	var all []RefusedTool
	for i := range maxRefusedShown + 4 {
		all = append(all, RefusedTool{Upstream: fmt.Sprintf("bad %d", i), Reason: "invalid"})
	}
	if !m.setRefused(listing{refused: all}) || len(m.refused) != maxRefusedShown || m.refusedMore != 4 {
		t.Fatalf("first listing: %d kept, %d more", len(m.refused), m.refusedMore)
	}
	if m.setRefused(listing{refused: all}) {
		t.Fatal("the same refusals again count as a change")
	}
	if !m.setRefused(listing{refused: all[1:]}) || m.refusedMore != 3 {
		t.Fatalf("one fewer: %d more", m.refusedMore)
	}
	m.logRefused(listing{refused: all})
	m.logRefused(listing{refused: all[1:]})
	if n := strings.Count(logged.String(), "module tools refused"); n != 1 {
		t.Fatalf("%d warnings within a minute, want 1:\n%s", n, logged.String())
	}
	now = now.Add(time.Minute)
	m.logRefused(listing{refused: all})
	if n := strings.Count(logged.String(), "module tools refused"); n != 2 || !strings.Contains(logged.String(), "refused=20") {
		t.Fatalf("after a minute: %d warnings:\n%s", n, logged.String())
	}
	// Refusals that clear do not use up the minute: the next ones are logged.
	now = now.Add(2 * time.Minute)
	m.logRefused(listing{})
	m.logRefused(listing{refused: all[:1]})
	if n := strings.Count(logged.String(), "module tools refused"); n != 3 {
		t.Fatalf("after the refusals cleared and came back: %d warnings:\n%s", n, logged.String())
	}
}

// Agents get the tool under the catalog's name, whatever other spelling of "name"
// a definition carries.
func TestMCPToolKeepsTheExposedName(t *testing.T) {
	tool, err := Tool{Name: "m_x", Definition: json.RawMessage(`{"name":"m_x","NAME":"other_deploy"}`)}.MCPTool()
	if err != nil || tool.Name != "m_x" {
		t.Fatalf("MCPTool = %q, %v; want m_x", tool.Name, err)
	}
}

// With include_tools, a selected tool that the listing refused (advertised twice)
// is refused, not missing, so start-up does not fail on it; what the manifest does
// not select is not reported.
func TestCatalogWithIncludeToolsAndRefusals(t *testing.T) {
	sess := fakeStdioModule(t, `[{"name":"dup"},{"name":"dup"},{"name":"other"},{"name":"other"},{"name":"ok"},"junk",
		{"name":"deploy","NAME":"x"}]`)
	m := &module{man: Manifest{Name: "m", IncludeTools: []string{"dup", "ok", "deploy"}},
		sup: &Supervisor{opts: Options{Pins: NewMemoryPins(), Now: time.Now}},
		log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := m.catalog(ctx, sess)
	if err != nil {
		t.Fatal(err)
	}
	if len(l.missing) != 0 || len(l.tools) != 1 || l.tools[0].Name != "m_ok" {
		t.Fatalf("missing %q, tools %+v", l.missing, l.tools)
	}
	if len(l.refused) != 2 || l.refused[0].Upstream != "deploy" || l.refused[1].Upstream != "dup" || l.uncounted != 0 {
		t.Fatalf("refused = %+v (%d uncounted), want deploy and dup", l.refused, l.uncounted)
	}
}

// A module's error text in the status keeps its quotes but nothing a terminal or a
// page would obey, and is bounded.
func TestShownTextEscapesAndBounds(t *testing.T) {
	for in, want := range map[string]string{
		`module answered error -32603: "boom" \ here`:         `module answered error -32603: "boom" \ here`,
		"csi\u009b2J rtl\u202e esc\x1b bad\xff tag\U000e0041": `csi\u009b2J rtl\u202e esc\u001b bad\xff tag\U000e0041`,
		strings.Repeat("é", 600):                              strings.Repeat("é", maxShownError/2) + "…",
	} {
		if got := shownText(in, maxShownError); got != want {
			t.Errorf("shownText(%q) = %q, want %q", in, got, want)
		}
	}
}
