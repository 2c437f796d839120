package modules

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// restAPI is the pets API on 127.0.0.2, a loopback address the tests' egress
// policy names (127.0.0.1 stays outside it).
func restAPI(t *testing.T) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	echo := func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		if r.Method == http.MethodPost {
			w.WriteHeader(http.StatusCreated)
		}
		_ = json.NewEncoder(w).Encode(map[string]any{
			"method": r.Method, "path": r.URL.Path, "rawPath": r.URL.EscapedPath(), "query": r.URL.RawQuery,
			"auth": r.Header.Get("Authorization"), "sentToken": r.Header.Get("Authorization") == "Bearer tok", "trace": r.Header.Get("X-Trace"), "body": string(body),
			"contentType": r.Header.Get("Content-Type"),
		})
	}
	mux.HandleFunc("/v1/", echo)
	mux.HandleFunc("/v1/fail", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "upstream exploded: "+strings.Repeat("x", 2000), http.StatusServiceUnavailable)
	})
	mux.HandleFunc("/v1/echo_fail", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "refused key="+r.Header.Get("X-Api-Key"), http.StatusInternalServerError)
	})
	mux.HandleFunc("/v1/text", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, "plain words")
	})
	mux.HandleFunc("/v1/slow", func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	mux.HandleFunc("/v1/endless", func(w http.ResponseWriter, r *http.Request) {
		chunk := []byte(strings.Repeat("y", 1024))
		for r.Context().Err() == nil {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	})
	mux.HandleFunc("/v1/redirect", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, r.URL.Query().Get("to"), http.StatusFound)
	})
	l, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Skipf("cannot listen on 127.0.0.2: %v", err)
	}
	srv := &httptest.Server{Listener: l, Config: &http.Server{Handler: mux}}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

const restPolicy = `{"networks":["127.0.0.2/32"]}`

// loadREST writes m and loads it as serve would.
func loadREST(t *testing.T, m map[string]any) Manifest {
	t.Helper()
	dir := t.TempDir()
	writeManifest(t, dir, "pets.json", m)
	ms, err := LoadDir(dir, LoadOptions{LookupEnv: testEnv, EgressPolicy: restPolicy})
	if err != nil {
		t.Fatal(err)
	}
	return ms[0]
}

func restHarness(t *testing.T, man Manifest, pins *MemoryPins) *harness {
	h := newHarness(t, []Manifest{man}, func(o *Options) {
		o.EgressPolicy, o.LookupEnv = restPolicy, testEnv
		if pins != nil {
			o.Pins = pins
		}
	})
	if pins != nil {
		h.pins = pins
	}
	h.start()
	return h
}

// result is a tools/call result as a REST call answers it.
type result struct {
	IsError    bool           `json:"isError"`
	Structured map[string]any `json:"structuredContent"`
	Content    []struct {
		Text string `json:"text"`
	} `json:"content"`
}

func (h *harness) restCall(tool string, args any) result {
	h.t.Helper()
	raw, err := h.sup.Call(context.Background(), tool, mustJSON(h.t, args))
	if err != nil {
		h.t.Fatalf("Call %s: %v", tool, err)
	}
	var res result
	if err := json.Unmarshal(raw, &res); err != nil || len(res.Content) == 0 {
		h.t.Fatalf("Call %s: result %s: %v", tool, raw, err)
	}
	return res
}

func TestRESTToolsAreListedPrefixedWithTheirAnnotations(t *testing.T) {
	h := restHarness(t, loadREST(t, restManifest("https://api.example.test/v1")), nil)
	tool, ok := h.tool("pets_get_pet")
	if !ok || !tool.Available || !tool.HasOutputSchema {
		t.Fatalf("pets_get_pet = %+v, %v; tools %+v", tool, ok, h.sup.Tools())
	}
	mt, err := tool.MCPTool()
	if err != nil {
		t.Fatal(err)
	}
	if mt.Annotations.ReadOnlyHint == nil || !*mt.Annotations.ReadOnlyHint || *mt.Annotations.DestructiveHint {
		t.Errorf("annotations = %+v", mt.Annotations)
	}
	if s := string(mt.RawInputSchema); strings.Contains(s, `"in"`) || !strings.Contains(s, `"X-Trace"`) {
		t.Errorf("inputSchema shown to agents = %s; want the bindings left out", s)
	}
	if n := len(h.auditsOf("module.tool_pinned")); n != 6 {
		t.Errorf("first-sight pins = %d, want 6", n)
	}
	if st := h.status("pets"); st.State != StateUp || st.PID != 0 {
		t.Errorf("status = %+v", st)
	}
}

func TestRESTCallsBuildTheRequestFromTheArguments(t *testing.T) {
	api := restAPI(t)
	h := restHarness(t, loadREST(t, restManifest(api.URL+"/v1")), nil)

	res := h.restCall("pets_get_pet", map[string]any{"id": "42", "verbose": true, "tag": []string{"a b", "c"}, "X-Trace": "t-1"})
	got := res.Structured
	if res.IsError || got["path"] != "/v1/pets/42" || got["query"] != "tag=a+b&tag=c&verbose=true" ||
		got["sentToken"] != true || got["auth"] != redactedMark || got["trace"] != "t-1" || got["method"] != "GET" {
		t.Fatalf("get_pet answered %+v", res)
	}
	res = h.restCall("pets_add_pet", map[string]any{"name": "Rex", "age": 3})
	if res.IsError || !strings.HasPrefix(res.Content[0].Text, "HTTP 201 Created\n\n") ||
		!strings.Contains(res.Content[0].Text, `"body":"{\"age\":3,\"name\":\"Rex\"}\n"`) &&
			!strings.Contains(res.Content[0].Text, `"body":"{\"age\":3,\"name\":\"Rex\"}"`) {
		t.Fatalf("add_pet answered %+v", res)
	}

	// A path argument stays one segment of the API's path, on the API's host.
	for id, rawPath := range map[string]string{
		"../admin":                  "/v1/pets/..%2Fadmin",
		"%2F":                       "/v1/pets/%252F",
		"http://169.254.169.254/x":  "/v1/pets/http:%2F%2F169.254.169.254%2Fx",
		"a?admin=1#frag":            "/v1/pets/a%3Fadmin=1%23frag",
		"//evil.test/":              "/v1/pets/%2F%2Fevil.test%2F",
		"caf\u00e9 and a space/too": "/v1/pets/caf%C3%A9%20and%20a%20space%2Ftoo",
	} {
		res := h.restCall("pets_get_pet", map[string]any{"id": id})
		if res.IsError || res.Structured["rawPath"] != rawPath || res.Structured["query"] != "" {
			t.Errorf("id %q: %+v, want the raw path %s", id, res, rawPath)
		}
	}
	for _, id := range []string{"..", ".", ""} {
		if res := h.restCall("pets_get_pet", map[string]any{"id": id}); !res.IsError || !strings.Contains(res.Content[0].Text, "cannot be a path segment") {
			t.Errorf("id %q: %+v, want refused", id, res)
		}
	}
}

func TestRESTCallErrorsAreToolErrors(t *testing.T) {
	api := restAPI(t)
	h := restHarness(t, loadREST(t, restManifest(api.URL+"/v1")), nil)
	cases := []struct {
		name, tool string
		args       map[string]any
		want       []string
	}{
		{"an error status", "pets_fail", nil, []string{"HTTP 503 Service Unavailable", "upstream exploded: xxx", "…"}},
		{"a slow answer", "pets_slow", nil, []string{"no answer within 1s"}},
		{"an endless body", "pets_endless", nil, []string{"over the 4096-byte cap"}},
		{"a redirect to 127.0.0.1", "pets_redirect", map[string]any{"to": "http://127.0.0.1:9/"}, []string{"127.0.0.1 is a loopback address"}},
		{"a redirect to the metadata address", "pets_redirect", map[string]any{"to": "http://169.254.169.254/latest/meta-data/"},
			[]string{"169.254.169.254 is a link-local address"}},
		{"a missing argument", "pets_get_pet", map[string]any{}, []string{"do not match the input schema", "id"}},
		{"a wrong type", "pets_add_pet", map[string]any{"name": "Rex", "age": -1}, []string{"do not match the input schema"}},
		{"an unknown argument", "pets_add_pet", map[string]any{"name": "Rex", "owner": "me"}, []string{`"owner" is not a parameter`}},
		{"a line break in a header", "pets_get_pet", map[string]any{"id": "1", "X-Trace": "a\r\nHost: evil"}, []string{"line break"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := h.restCall(tc.tool, tc.args)
			text := res.Content[0].Text
			if !res.IsError {
				t.Fatalf("answered %+v, want a tool error", res)
			}
			for _, w := range tc.want {
				if !strings.Contains(text, w) {
					t.Errorf("error %q, want %q in it", text, w)
				}
			}
			if strings.Contains(text, "tok") && !strings.Contains(tc.name, "status") {
				t.Errorf("error %q holds the credential", text)
			}
		})
	}
	if st := h.status("pets"); st.State != StateUp {
		t.Errorf("after the errors the capability is %s, want up", st.State)
	}
}

func TestRESTRefusesLoopbackUnlessAllowed(t *testing.T) {
	api := restAPI(t)
	m := restManifest(strings.Replace(api.URL, "127.0.0.2", "127.0.0.1", 1) + "/v1")
	h := restHarness(t, loadREST(t, m), nil)
	if res := h.restCall("pets_get_pet", map[string]any{"id": "1"}); !res.IsError || !strings.Contains(res.Content[0].Text, "loopback") {
		t.Fatalf("a call to 127.0.0.1: %+v, want refused", res)
	}
	// allow_private_network lets it reach loopback (127.0.0.1 listens on no port
	// of ours here, so the refusal gives way to a connection error).
	m["allow_private_network"] = true
	h = restHarness(t, loadREST(t, m), nil)
	if res := h.restCall("pets_get_pet", map[string]any{"id": "1"}); !res.IsError || strings.Contains(res.Content[0].Text, "loopback address") {
		t.Fatalf("with allow_private_network: %+v, want past the policy", res)
	}
}

func TestRESTChangedOperationIsWithheldUntilApproved(t *testing.T) {
	api := restAPI(t)
	pins := NewMemoryPins()
	m := restManifest(api.URL + "/v1")
	h := restHarness(t, loadREST(t, m), pins)
	before, _ := h.tool("pets_add_pet")
	if err := h.sup.Close(context.Background()); err != nil {
		t.Fatal(err)
	}

	// The operator's manifest now says add_pet deletes things, and adds a tool.
	operation(m, 1)["annotations"] = map[string]any{"readOnlyHint": false, "destructiveHint": true}
	extra := map[string]any{"name": "wipe", "description": "Wipe.", "method": "DELETE", "path": "/pets",
		"inputSchema": map[string]any{"type": "object"}, "annotations": map[string]any{"readOnlyHint": false, "destructiveHint": true}}
	m["operations"] = append(m["operations"].([]any), extra)
	h = restHarness(t, loadREST(t, m), pins)
	after, _ := h.tool("pets_add_pet")
	wipe, _ := h.tool("pets_wipe")
	if !after.Withheld || after.Available || after.Hash == before.Hash || !wipe.Withheld {
		t.Fatalf("after the change: add_pet %+v, wipe %+v; want both withheld", after, wipe)
	}
	if _, err := h.sup.Call(context.Background(), "pets_add_pet", json.RawMessage(`{"name":"x"}`)); err == nil {
		t.Fatal("a withheld operation was called")
	}
	if err := h.sup.Approve(context.Background(), "pets", "add_pet", after.Hash); err != nil {
		t.Fatal(err)
	}
	if res := h.restCall("pets_add_pet", map[string]any{"name": "Rex"}); res.IsError {
		t.Fatalf("approved add_pet: %+v", res)
	}
}

func TestRESTManifestExampleInDocsLoads(t *testing.T) {
	// The example docs/modules.md shows is a manifest that loads.
	doc, err := os.ReadFile(filepath.Join("..", "docs", "modules.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(doc), "```json\n{\"version\": 1, \"type\": \"rest\"")
	if !ok {
		t.Fatal("docs/modules.md shows no rest manifest")
	}
	body, _, _ := strings.Cut(after, "```")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "pets.json"), []byte(`{"version": 1, "type": "rest"`+body), 0o600); err != nil {
		t.Fatal(err)
	}
	env := func(name string) (string, bool) { return "x", name == "PETSTORE_TOKEN" }
	if _, err := LoadDir(dir, LoadOptions{LookupEnv: env}); err != nil {
		t.Fatal(err)
	}
}

// TestRESTAnswerOutsideTheOutputSchemaIsAToolError: MCP asks a tool with an
// outputSchema for structuredContent that matches it; an answer that does not
// is a tool error, not a result a client would refuse.
func TestRESTAnswerOutsideTheOutputSchemaIsAToolError(t *testing.T) {
	api := restAPI(t)
	m := restManifest(api.URL + "/v1")
	operation(m, 0)["outputSchema"] = map[string]any{"type": "object", "required": []string{"name"}}
	operation(m, 2)["path"], operation(m, 2)["outputSchema"] = "/text", map[string]any{"type": "object"}
	h := restHarness(t, loadREST(t, m), nil)
	res := h.restCall("pets_get_pet", map[string]any{"id": "1"})
	if !res.IsError || res.Structured != nil || !strings.Contains(res.Content[0].Text, "does not match the operation's outputSchema") {
		t.Fatalf("an answer without the required name: %+v", res)
	}
	res = h.restCall("pets_fail", nil)
	if !res.IsError || !strings.Contains(res.Content[0].Text, "200 OK, but the answer is not a JSON object (text/plain") {
		t.Fatalf("a text answer: %+v", res)
	}
}

// TestRESTChangedRequestIsWithheld: an operation whose description, schemas
// and annotations stay as approved, but that now sends another method, to
// another path, or an argument to another place, is a changed operation: it
// waits for approval, and modules list shows the change.
func TestRESTChangedRequestIsWithheld(t *testing.T) {
	api := restAPI(t)
	for _, c := range []struct {
		name string
		edit func(op map[string]any)
		want string
	}{
		{"method", func(op map[string]any) { op["method"] = "DELETE" }, `"method": "DELETE"`},
		{"path", func(op map[string]any) { op["path"] = "/admin/pets/{id}" }, `"path": "/admin/pets/{id}"`},
		{"argument's place", func(op map[string]any) {
			op["inputSchema"].(map[string]any)["properties"].(map[string]any)["verbose"].(map[string]any)["in"] = "header"
		}, `"verbose": "header"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			pins := NewMemoryPins()
			m := restManifest(api.URL + "/v1")
			h := restHarness(t, loadREST(t, m), pins)
			before, _ := h.tool("pets_get_pet")
			if err := h.sup.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			c.edit(operation(m, 0))
			h = restHarness(t, loadREST(t, m), pins)
			after, _ := h.tool("pets_get_pet")
			if !after.Withheld || after.Hash == before.Hash {
				t.Fatalf("after the %s changed: withheld %v, hash %s (was %s); want it withheld", c.name, after.Withheld, after.Hash, before.Hash)
			}
			if def := string(h.status("pets").Tools[0].Definition); !strings.Contains(def, c.want) {
				t.Errorf("the definition to review does not show the %s (%s):\n%s", c.name, c.want, def)
			}
		})
	}
}
