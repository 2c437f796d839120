package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"

	"github.com/switchboardhq/switchboard/agent"
	"github.com/switchboardhq/switchboard/internal/server"
	"github.com/switchboardhq/switchboard/modules"
)

// petsAPI answers every request with what it received, on 127.0.0.2: a loopback
// address the tests' egress policy names.
func petsAPI(t *testing.T) *httptest.Server {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Skipf("cannot listen on 127.0.0.2: %v", err)
	}
	srv := &httptest.Server{Listener: l, Config: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"path": r.URL.Path, "auth": r.Header.Get("Authorization")})
	})}}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

// writeRESTManifest writes pets.json, a rest capability of two operations.
func writeRESTManifest(t *testing.T, dir, baseURL string, edit func(map[string]any)) {
	t.Helper()
	op := func(name, method string, readOnly bool) map[string]any {
		return map[string]any{"name": name, "description": name + ".", "method": method, "path": "/pets/{id}",
			"inputSchema": map[string]any{"type": "object", "required": []string{"id"},
				"properties": map[string]any{"id": map[string]any{"type": "string", "in": "path"}}},
			"outputSchema": map[string]any{"type": "object"},
			"annotations":  map[string]any{"readOnlyHint": readOnly, "destructiveHint": !readOnly}}
	}
	m := map[string]any{"version": 1, "type": "rest", "name": "pets", "title": "Pets", "description": "Pets API.",
		"risk": "destructive", "base_url": baseURL, "auth": map[string]any{"type": "bearer", "env": "PETS_TOKEN"},
		"operations": []any{op("get_pet", "GET", true), op("delete_pet", "DELETE", false)}}
	if edit != nil {
		edit(m)
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "pets.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestRESTCapabilityThroughServe: a rest capability behind the same policy as a
// module's tools: grants, tool deny, forwarding, audit without arguments or the
// credential, and /readyz.
func TestRESTCapabilityThroughServe(t *testing.T) {
	api := petsAPI(t)
	manifests := t.TempDir()
	writeRESTManifest(t, manifests, api.URL+"/v1", nil)
	const token = "pets-token-canary-5e1"
	t.Setenv("PETS_TOKEN", token)
	ms := startModuleServer(t, server.Config{ModulesDir: manifests, EgressPolicy: `{"networks":["127.0.0.2/32"]}`})
	granted := ms.dial(ms.endpoint("granted", "--capabilities", "pets", "--tool-deny", "pets_delete_pet"))
	plain := ms.dial(ms.endpoint("plain"))

	if got := granted.moduleTools(); !slices.Equal(got, []string{"pets_get_pet"}) {
		t.Errorf("granted sees %v", got)
	}
	if got := plain.moduleTools(); len(got) != 0 {
		t.Errorf("plain sees %v", got)
	}
	for _, c := range []struct {
		who  *gatewayClient
		tool string
	}{{plain, "pets_get_pet"}, {granted, "pets_delete_pet"}} {
		// A refusal of a tool with an outputSchema is text alone.
		res, err := c.who.CallTool(context.Background(), mcp.CallToolRequest{Params: mcp.CallToolParams{Name: c.tool, Arguments: map[string]any{"id": "1"}}})
		if err != nil || !res.IsError || len(res.Content) == 0 || !strings.HasPrefix(res.Content[0].(mcp.TextContent).Text, agent.CodeForbidden) {
			t.Errorf("%s: %+v, %v; want forbidden", c.tool, res, err)
		}
	}
	const canary = "argument-canary-93c"
	got := granted.ok("pets_get_pet", map[string]any{"id": canary})
	// The API echoes the credential it was sent: the agent sees it redacted.
	if got["path"] != "/v1/pets/"+canary || got["auth"] != "[redacted]" {
		t.Fatalf("get_pet = %v", got)
	}

	rows := ms.audits("module.call")
	found := false
	for _, r := range rows {
		if strings.Contains(r.Detail+r.Target, canary) || strings.Contains(r.Detail+r.Target, token) {
			t.Errorf("audit row carries an argument or the credential: %+v", r)
		}
		found = found || r.Actor == "agent:granted" && r.Target == "pets_get_pet" && r.Outcome == "ok"
	}
	if !found {
		t.Errorf("no audit row for the call among %+v", rows)
	}
	if r := ms.readyz(); !r.Ready || r.module("pets").State != modules.StateUp {
		t.Errorf("readyz = %+v", r)
	}
}

// TestServeRefusesBadRESTManifest: serve does not start on an invalid rest
// manifest, and says which file and field.
func TestServeRefusesBadRESTManifest(t *testing.T) {
	t.Setenv("PETS_TOKEN", "x")
	for _, c := range []struct {
		name, want string
		edit       func(map[string]any)
	}{
		{"missing variable", `pets.json: field "auth.env": "NOT_SET_HERE" is not set`, func(m map[string]any) {
			m["auth"] = map[string]any{"type": "bearer", "env": "NOT_SET_HERE"}
		}},
		{"no annotations", `pets.json: field "operations[1].annotations": is required`, func(m map[string]any) {
			delete(m["operations"].([]any)[1].(map[string]any), "annotations")
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			writeRESTManifest(t, dir, "https://api.example.test", c.edit)
			code, _, stderr := cli(t, "", "serve", "--db", filepath.Join(t.TempDir(), "sb.db"), "--modules-dir", dir, "--listen", "127.0.0.1:0")
			if code == 0 || !strings.Contains(stderr, c.want) {
				t.Fatalf("serve exited %d: %s\nwant %s", code, stderr, c.want)
			}
		})
	}
}

// TestRemoteCapabilityThroughServe: a remote MCP server's tools reach a granted
// agent through serve; when the server goes away, /readyz, modules list and the
// agent's call say so, and the capability comes back after its backoff.
func TestRemoteCapabilityThroughServe(t *testing.T) {
	s := mcpserver.NewMCPServer("remote-test", "1.0.0")
	s.AddTool(mcp.NewTool("greet", mcp.WithString("name"), mcp.WithReadOnlyHintAnnotation(true)),
		func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText("hello " + req.GetString("name", "")), nil
		})
	upstream := httptest.NewServer(mcpserver.NewStreamableHTTPServer(s))
	manifests := t.TempDir()
	m := fmt.Sprintf(`{"version":1,"type":"remote","name":"remote","title":"Remote","description":"A remote MCP server.",
		"risk":"read","url":%q,"allow_private_network":true,"headers":{"Authorization":{"env":"REMOTE_TOKEN","prefix":"Bearer "}}}`, upstream.URL+"/mcp")
	if err := os.WriteFile(filepath.Join(manifests, "remote.json"), []byte(m), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("REMOTE_TOKEN", "remote-token")
	ms := startModuleServer(t, server.Config{ModulesDir: manifests})
	agentc := ms.dial(ms.endpoint("granted", "--capabilities", "remote"))
	if got := agentc.moduleTools(); !slices.Equal(got, []string{"remote_greet"}) {
		t.Fatalf("granted sees %v", got)
	}
	res, err := agentc.CallTool(context.Background(), mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "remote_greet", Arguments: map[string]any{"name": "ann"}}})
	if err != nil || res.IsError || res.Content[0].(mcp.TextContent).Text != "hello ann" {
		t.Fatalf("greet = %+v, %v", res, err)
	}

	addr := upstream.Listener.Addr().String()
	upstream.CloseClientConnections()
	upstream.Close()
	w := ms.nextWait()
	r := ms.readyz()
	if v := r.module("remote"); r.code != http.StatusServiceUnavailable || v.State != modules.StateBackoff || !strings.Contains(v.LastError, "remote server unreachable") {
		t.Fatalf("readyz while the server is down: %d %+v", r.code, v)
	}
	if _, code := agentc.call("remote_greet", map[string]any{"name": "x"}); code != agent.CodeUnavailable {
		t.Errorf("a call while down: %s, want unavailable", code)
	}
	code, out, _ := cli(t, "", "modules", "list", "--url", ms.base)
	if code != 0 || !strings.Contains(out, "remote") || !strings.Contains(out, "backoff") || !strings.Contains(out, "remote server unreachable") {
		t.Errorf("modules list while down (exit %d):\n%s", code, out)
	}

	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("cannot listen on %s again: %v", addr, err)
	}
	back := &httptest.Server{Listener: l, Config: &http.Server{Handler: mcpserver.NewStreamableHTTPServer(s)}}
	back.Start()
	t.Cleanup(func() { back.CloseClientConnections(); back.Close() })
	w.fire <- time.Now()
	ms.until("remote up again", func() bool { return ms.readyz().module("remote").State == modules.StateUp })
	res, err = agentc.CallTool(context.Background(), mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "remote_greet", Arguments: map[string]any{"name": "again"}}})
	if err != nil || res.IsError || res.Content[0].(mcp.TextContent).Text != "hello again" {
		t.Fatalf("greet after the comeback = %+v, %v", res, err)
	}
}
