package modules

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func petstore(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "openapi", "petstore3.json"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// loadImported writes an imported manifest to a directory of its own and loads
// it as serve would, with PETSTORE_API_KEY set.
func loadImported(t *testing.T, manifest []byte) Manifest {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "petstore.json"), manifest, 0o600); err != nil {
		t.Fatal(err)
	}
	env := func(name string) (string, bool) { return "key", name == "PETSTORE_API_KEY" }
	ms, err := LoadDir(dir, LoadOptions{LookupEnv: env})
	if err != nil {
		t.Fatalf("the imported manifest does not load: %v\n%s", err, manifest)
	}
	return ms[0]
}

// TestImportOpenAPIPetstore imports the Swagger Petstore 3 document: the
// manifest loads, its operations are those that can be sent, and a call of one
// reaches the API with its path, query and body.
func TestImportOpenAPIPetstore(t *testing.T) {
	out, skipped, err := ImportOpenAPI(context.Background(), petstore(t), ImportOptions{Name: "petstore", BaseURL: "https://petstore3.example.test/api/v3"})
	if err != nil {
		t.Fatal(err)
	}
	var skippedIDs []string
	for _, s := range skipped {
		skippedIDs = append(skippedIDs, s.Operation)
	}
	// An octet-stream upload and a body that is a list cannot be sent as
	// arguments; updateUser's body has a property named as its path parameter.
	if !slices.Equal(skippedIDs, []string{"uploadFile", "createUsersWithListInput", "updateUser"}) {
		t.Errorf("skipped %+v", skipped)
	}
	m := loadImported(t, out)
	if m.BaseURL != "https://petstore3.example.test/api/v3" || m.Auth == nil || m.Auth.Type != "header" || m.Auth.Header != "api_key" || m.Risk != "destructive" {
		t.Errorf("manifest head = %s %+v %s", m.BaseURL, m.Auth, m.Risk)
	}
	ops := map[string]Operation{}
	for _, op := range m.Operations {
		op.InputSchema, op.OutputSchema = compact(t, op.InputSchema), compact(t, op.OutputSchema)
		ops[op.Name] = op
	}
	if len(ops) != 16 {
		t.Errorf("%d operations imported, want 16", len(ops))
	}
	get := ops["getPetById"]
	if get.Method != "GET" || get.Path != "/pet/{petId}" || !*get.Annotations.ReadOnlyHint || *get.Annotations.DestructiveHint ||
		!strings.Contains(string(get.OutputSchema), `"photoUrls"`) || !strings.Contains(string(get.InputSchema), `"in":"path"`) {
		t.Errorf("getPetById = %+v", get)
	}
	if del := ops["deletePet"]; !*del.Annotations.DestructiveHint || strings.Contains(string(del.InputSchema), `"api_key"`) {
		t.Errorf("deletePet = %s %+v: want destructive, the credential's header no argument", del.InputSchema, del.Annotations)
	}
	// $refs written out, OpenAPI's own keywords gone.
	add := string(ops["addPet"].InputSchema)
	if strings.Contains(add, "$ref") || strings.Contains(add, `"xml"`) || strings.Contains(add, `"example"`) ||
		!strings.Contains(add, `"category":{"in":"body"`) || !strings.Contains(add, `"required":["name","photoUrls"]`) {
		t.Errorf("addPet inputSchema = %s", add)
	}
}

// TestImportedPetstoreCalls: the imported manifest, unchanged, calls the API.
func TestImportedPetstoreCalls(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Skipf("cannot listen on 127.0.0.2: %v", err)
	}
	api := &httptest.Server{Listener: l, Config: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"name": r.Method + " " + r.URL.RequestURI() + " " + string(body),
			"photoUrls": []string{r.Header.Get("api_key")}})
	})}}
	api.Start()
	defer api.Close()
	out, _, err := ImportOpenAPI(context.Background(), petstore(t), ImportOptions{Name: "petstore", BaseURL: api.URL + "/api/v3"})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "petstore.json"), out, 0o600); err != nil {
		t.Fatal(err)
	}
	env := func(name string) (string, bool) { return "key-1", name == "PETSTORE_API_KEY" }
	ms, err := LoadDir(dir, LoadOptions{LookupEnv: env, EgressPolicy: restPolicy})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, ms, func(o *Options) { o.EgressPolicy, o.LookupEnv = restPolicy, env })
	h.start()
	for _, c := range []struct {
		tool string
		args any
		want string
	}{
		{"petstore_getPetById", map[string]any{"petId": 7}, "GET /api/v3/pet/7 "},
		{"petstore_findPetsByStatus", map[string]any{"status": "sold"}, "GET /api/v3/pet/findByStatus?status=sold "},
		{"petstore_addPet", map[string]any{"name": "Rex", "photoUrls": []string{}}, `POST /api/v3/pet {"name":"Rex","photoUrls":[]}`},
	} {
		res := h.restCall(c.tool, c.args)
		if res.Structured == nil { // an array answers: no outputSchema, text
			text := strings.TrimPrefix(res.Content[0].Text, "HTTP 200 OK\n\n")
			if err := json.Unmarshal([]byte(text), &res.Structured); err != nil {
				t.Fatalf("%s: %+v", c.tool, res)
			}
		}
		if res.IsError || res.Structured["name"] != c.want {
			t.Errorf("%s: %+v, want %q", c.tool, res, c.want)
		}
		if urls, _ := res.Structured["photoUrls"].([]any); len(urls) != 1 || urls[0] != "key-1" {
			t.Errorf("%s: api_key header = %v", c.tool, urls)
		}
	}
}

func compact(t *testing.T, raw json.RawMessage) json.RawMessage {
	t.Helper()
	if raw == nil {
		return nil
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestImportOpenAPISelectsOperations(t *testing.T) {
	out, _, err := ImportOpenAPI(context.Background(), petstore(t), ImportOptions{Name: "petstore", BaseURL: "http://localhost:8080/api/v3",
		Operations: []string{"getPetById", "findPetsByStatus"}})
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Risk       string
		Operations []struct{ Name string }
	}
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatal(err)
	}
	if m.Risk != "read" || len(m.Operations) != 2 || m.Operations[0].Name != "findPetsByStatus" {
		t.Errorf("manifest = %+v", m)
	}
	for _, c := range []struct {
		opts ImportOptions
		want string
	}{
		{ImportOptions{Name: "petstore", BaseURL: "http://x.test", Operations: []string{"nope"}}, `no operation "nope"`},
		{ImportOptions{Name: "petstore", BaseURL: "http://x.test", Operations: []string{"uploadFile"}}, "uploadFile cannot be imported"},
		{ImportOptions{Name: "petstore"}, `base URL "/api/v3"`},
		{ImportOptions{Name: "Pet-Store", BaseURL: "http://x.test"}, "--name"},
	} {
		if _, _, err := ImportOpenAPI(context.Background(), petstore(t), c.opts); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.opts, err, c.want)
		}
	}
	for _, bad := range []string{`{}`, `not json`, `{"openapi":"3.0.2","info":{"title":"x","version":"1"},"paths":{"/a":{"get":{"responses":{"200":{"description":"ok","content":{"application/json":{"schema":{"$ref":"other.json#/X"}}}}}}}}}`} {
		if _, _, err := ImportOpenAPI(context.Background(), []byte(bad), ImportOptions{Name: "x", BaseURL: "http://x.test"}); err == nil {
			t.Errorf("%s imported", bad)
		}
	}
}

// TestImportOpenAPIPublishedPetstore imports the Swagger Petstore as published
// (testdata/openapi/swagger-petstore-3.0.json, from the npm package
// @readme/oas-examples 8.2.2, 3.0/json/petstore.json): what cannot be sent is
// named with its reason, and the manifest written from the rest loads.
func TestImportOpenAPIPublishedPetstore(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "openapi", "swagger-petstore-3.0.json"))
	if err != nil {
		t.Fatal(err)
	}
	out, skipped, err := ImportOpenAPI(context.Background(), b, ImportOptions{Name: "petstore"})
	if err != nil {
		t.Fatal(err)
	}
	reasons := map[string]string{}
	for _, s := range skipped {
		reasons[s.Operation] = s.Reason
	}
	// A form, a file upload, two list bodies, and a body property named as a path parameter.
	for _, op := range []string{"updatePetWithForm", "uploadFile", "createUsersWithArrayInput", "createUsersWithListInput", "updateUser"} {
		if reasons[op] == "" {
			t.Errorf("%s was not skipped with a reason: %+v", op, skipped)
		}
	}
	m := loadImported(t, out)
	if m.BaseURL != "http://petstore.swagger.io/v2" || len(m.Operations)+len(skipped) != 20 {
		t.Errorf("base_url %s, %d operations and %d skipped, want the document's 20", m.BaseURL, len(m.Operations), len(skipped))
	}
	for _, op := range m.Operations {
		if op.Name == "getPetById" && (op.Method != "GET" || op.Path != "/pet/{petId}" ||
			!strings.Contains(string(compact(t, op.InputSchema)), `"in":"path"`) || !strings.Contains(string(op.InputSchema), `"petId"`)) {
			t.Errorf("getPetById = %s %s %s", op.Method, op.Path, op.InputSchema)
		}
	}
}

// TestImportOpenAPIServerVariables: a server URL with {variables} becomes the
// URL their defaults make, not a base URL whose path holds "{ver}".
func TestImportOpenAPIServerVariables(t *testing.T) {
	doc := func(server string) []byte {
		return []byte(`{"openapi":"3.0.3","info":{"title":"V","version":"1"},"servers":[` + server + `],
		"paths":{"/items":{"get":{"operationId":"list","responses":{"200":{"description":"ok"}}}}}}`)
	}
	out, _, err := ImportOpenAPI(context.Background(),
		doc(`{"url":"https://api.example.test/{ver}/{tenant}","variables":{"ver":{"default":"v2"},"tenant":{"default":"acme","enum":["acme","other"]}}}`),
		ImportOptions{Name: "v"})
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		BaseURL string `json:"base_url"`
	}
	if err := json.Unmarshal(out, &m); err != nil || m.BaseURL != "https://api.example.test/v2/acme" {
		t.Fatalf("base_url %q (%v), want the variables' defaults in it", m.BaseURL, err)
	}
}

// TestImportOpenAPISaysWhenNoCredentialFits: a document whose security schemes
// none can be written as auth (an API key in the query, OAuth) gets a manifest
// with no credential, and the import says so rather than leaving it silent.
func TestImportOpenAPISaysWhenNoCredentialFits(t *testing.T) {
	doc := func(scheme string) []byte {
		return []byte(`{"openapi":"3.0.3","info":{"title":"S","version":"1"},"servers":[{"url":"https://api.example.test"}],
		"components":{"securitySchemes":{"k":` + scheme + `}},"security":[{"k":[]}],
		"paths":{"/items":{"get":{"operationId":"list","responses":{"200":{"description":"ok"}}}}}}`)
	}
	for _, scheme := range []string{`{"type":"apiKey","in":"query","name":"api_key"}`,
		`{"type":"oauth2","flows":{"clientCredentials":{"tokenUrl":"https://x.test/t","scopes":{}}}}`} {
		out, skipped, err := ImportOpenAPI(context.Background(), doc(scheme), ImportOptions{Name: "s"})
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(out), `"auth"`) {
			t.Fatalf("%s: a manifest with auth:\n%s", scheme, out)
		}
		said := slices.ContainsFunc(skipped, func(s Skipped) bool {
			return s.Operation == "" && strings.Contains(s.Reason, `"k"`) && strings.Contains(s.Reason, "no credential")
		})
		if !said {
			t.Errorf("%s: the import left the credential out silently: %+v", scheme, skipped)
		}
	}
	// A scheme that fits is written, and nothing is said.
	_, skipped, err := ImportOpenAPI(context.Background(), doc(`{"type":"http","scheme":"bearer"}`), ImportOptions{Name: "s"})
	if err != nil || len(skipped) != 0 {
		t.Fatalf("a bearer scheme: %+v, %v", skipped, err)
	}
}

// TestImportOpenAPILeavesOutUnsendableParameters: an operation with a
// parameter a rest capability cannot send as the document says (an object in
// the query, a list in the path or a header, a list joined by commas) is left
// out and named, not written as a tool whose every call would fail or be
// misread.
func TestImportOpenAPILeavesOutUnsendableParameters(t *testing.T) {
	for _, c := range []struct{ param, want string }{
		{`{"name":"filter","in":"query","style":"deepObject","explode":true,"schema":{"type":"object"}}`, "filter"},
		{`{"name":"ids","in":"path","required":true,"schema":{"type":"array","items":{"type":"integer"}}}`, "cannot be an array"},
		{`{"name":"X-Tags","in":"header","schema":{"type":"array","items":{"type":"string"}}}`, "cannot be an array"},
		{`{"name":"csv","in":"query","explode":false,"schema":{"type":"array","items":{"type":"string"}}}`, "csv"},
	} {
		doc := []byte(`{"openapi":"3.0.3","info":{"title":"S","version":"1"},"servers":[{"url":"https://api.example.test"}],
		"paths":{"/items/{ids}":{"get":{"operationId":"bad","parameters":[` + c.param + `,
		{"name":"ids","in":"path","required":true,"schema":{"type":"string"}}],"responses":{"200":{"description":"ok"}}}},
		"/other":{"get":{"operationId":"good","responses":{"200":{"description":"ok"}}}}}}`)
		if strings.Contains(c.param, `"in":"path"`) {
			doc = bytes.Replace(doc, []byte(`,
		{"name":"ids","in":"path","required":true,"schema":{"type":"string"}}`), nil, 1)
		}
		out, skipped, err := ImportOpenAPI(context.Background(), doc, ImportOptions{Name: "s"})
		if err != nil {
			t.Fatalf("%s: %v", c.param, err)
		}
		if strings.Contains(string(out), `"bad"`) || len(skipped) != 1 || skipped[0].Operation != "bad" ||
			!strings.Contains(skipped[0].Reason, c.want) {
			t.Errorf("%s: skipped %+v; want bad left out, naming %q\n%s", c.param, skipped, c.want, out)
		}
	}
}
