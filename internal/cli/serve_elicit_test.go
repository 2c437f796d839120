package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboardhq/switchboard/internal/server"
	"github.com/switchboardhq/switchboard/modules"
)

// The test module's elicit tool asks "Which one?" and answers with the action
// and the content it got back; every client here picks "b".
const picked = `accept {"pick":"b"}`

// A module tool's elicitation reaches the agent's client and its answer the
// module: under 2026-07-28 through input_required and the client's retry (the
// official Go SDK, which retries by itself), under 2025-11-25 and 2025-06-18 as
// elicitation/create on the session (mcp-go's client).
func TestModuleElicitationRelayed(t *testing.T) {
	_, manifests := testModuleDir(t)
	ms := startModuleServer(t, server.Config{ModulesDir: manifests})
	cred := ms.endpoint("asker", "--capabilities", "testmod")
	var asked []string
	answer := func(message string) map[string]any {
		asked = append(asked, message)
		return map[string]any{"pick": "b"}
	}

	c := sdk.NewClient(&sdk.Implementation{Name: "go-sdk-asker", Version: "1"}, &sdk.ClientOptions{
		ElicitationHandler: func(_ context.Context, req *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
			return &sdk.ElicitResult{Action: "accept", Content: answer(req.Params.Message)}, nil
		},
	})
	wire := &bearer{cred: cred}
	cs, err := c.Connect(t.Context(), &sdk.StreamableClientTransport{Endpoint: ms.base + "/mcp", HTTPClient: &http.Client{Transport: wire}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	res, err := cs.CallTool(t.Context(), &sdk.CallToolParams{Name: "testmod_elicit"})
	if err != nil {
		t.Fatal(err)
	}
	if text := sdkText(res); res.IsError || text != picked {
		t.Errorf("2026-07-28: isError %v, %q; want %q", res.IsError, text, picked)
	}
	if !wire.sawVersion(mcp.ProtocolVersion20260728) {
		t.Errorf("the Go SDK did not speak 2026-07-28: %v", wire.versions)
	}

	handler := client.WithElicitationHandler(elicitFunc(func(req mcp.ElicitationRequest) *mcp.ElicitationResult {
		return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: "accept", Content: answer(req.Params.Message)}}
	}))
	for _, version := range []string{mcp.ProtocolVersion20251125, mcp.ProtocolVersion20250618} {
		session := dialLegacy(t, ms, cred, version, handler)
		if text, isErr := callText(t, session, "testmod_elicit"); isErr || text != picked {
			t.Errorf("%s: isError %v, %q; want %q", version, isErr, text, picked)
		}
	}
	if len(asked) != 3 || asked[0] != "Which one?" || asked[2] != "Which one?" {
		t.Errorf("the clients were asked %q; want the module's question three times", asked)
	}
}

// A client that declared no elicitation capability is not asked: the module is
// told why, in words it passes on, under 2026-07-28 as under a session; nor is
// a 2025-03-26 session's, a revision without elicitation.
func TestModuleElicitationRefusedWithoutCapability(t *testing.T) {
	_, manifests := testModuleDir(t)
	ms := startModuleServer(t, server.Config{ModulesDir: manifests})
	cred := ms.endpoint("asker", "--capabilities", "testmod")

	tr, err := transport.NewStreamableHTTP(ms.base+"/mcp", transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + cred}))
	if err != nil {
		t.Fatal(err)
	}
	modern := client.NewClient(tr)
	t.Cleanup(func() { modern.Close() })
	if err := modern.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	init, err := modern.Initialize(t.Context(), mcp.InitializeRequest{Params: mcp.InitializeParams{ClientInfo: mcp.Implementation{Name: "asker", Version: "1"}}})
	if err != nil || init.ProtocolVersion != mcp.ProtocolVersion20260728 {
		t.Fatalf("stateless client settled on %v: %v", init, err)
	}
	for name, c := range map[string]*client.Client{"2026-07-28": modern, "session": dialLegacy(t, ms, cred, mcp.LATEST_LEGACY_PROTOCOL_VERSION)} {
		text, isErr := callText(t, c, "testmod_elicit")
		if !isErr || !strings.Contains(text, "declared no elicitation capability") {
			t.Errorf("%s: isError %v, %q; want a tool error saying the client declared no elicitation", name, isErr, text)
		}
	}
	// 2025-03-26 has no elicitation, whatever the client declares.
	old := dialLegacy(t, ms, cred, mcp.ProtocolVersion20250326, client.WithElicitationHandler(failingElicitor{}))
	if text, isErr := callText(t, old, "testmod_elicit"); !isErr || !strings.Contains(text, "speaks revision 2025-03-26, which has no elicitation") {
		t.Errorf("2025-03-26: isError %v, %q; want a tool error saying the revision has no elicitation", isErr, text)
	}
}

// Bad retries under 2026-07-28 are refused and leave the question waiting: an
// answer with another credential's requestState, an unknown state, a malformed
// answer. The right credential's answer then completes the call. A question left
// unanswered ends with the module call's timeout, and its state is unknown after.
func TestModuleElicitationBadRetries(t *testing.T) {
	_, manifests := testModuleDir(t)
	ms := startModuleServer(t, server.Config{ModulesDir: manifests})
	owner := ms.endpoint("owner", "--capabilities", "testmod")
	other := ms.endpoint("other", "--capabilities", "testmod")

	first := statelessCall(t, ms, owner, nil)
	if first.ResultType != mcp.ResultTypeInputRequired || first.RequestState == "" {
		t.Fatalf("first call: %+v; want input_required with a requestState", first)
	}
	q, ok := first.InputRequests["elicitation"]
	if !ok || q.Method != mcp.MethodElicitationCreate || q.Elicitation == nil || q.Elicitation.Message != "Which one?" {
		t.Fatalf("inputRequests %+v; want the module's elicitation", first.InputRequests)
	}
	good := map[string]any{"inputResponses": map[string]any{"elicitation": map[string]any{"action": "accept", "content": map[string]any{"pick": "b"}}},
		"requestState": first.RequestState}
	for name, c := range map[string]struct {
		cred  string
		retry map[string]any
		want  string
	}{
		"another credential": {other, good, "not_found"},
		"unknown state":      {owner, map[string]any{"inputResponses": good["inputResponses"], "requestState": "nope"}, "not_found"},
		"no answer":          {owner, map[string]any{"requestState": first.RequestState, "inputResponses": map[string]any{"other": map[string]any{}}}, "invalid_argument"},
		"bad action":         {owner, map[string]any{"requestState": first.RequestState, "inputResponses": map[string]any{"elicitation": map[string]any{"action": "maybe"}}}, "invalid_argument"},
	} {
		res := statelessCall(t, ms, c.cred, c.retry)
		if !res.IsError || !strings.HasPrefix(toolText(res), c.want+":") {
			t.Errorf("%s: %s; want a %s refusal", name, toolText(res), c.want)
		}
	}
	if res := statelessCall(t, ms, owner, good); res.IsError || toolText(res) != picked {
		t.Errorf("the owner's answer: isError %v, %s; want %q", res.IsError, toolText(res), picked)
	}
	if res := statelessCall(t, ms, owner, good); !res.IsError || !strings.HasPrefix(toolText(res), "not_found:") {
		t.Errorf("the same answer again: %s; want not_found, the call is over", toolText(res))
	}
}

func TestModuleElicitationExpires(t *testing.T) {
	_, manifests := testModuleDir(t)
	ms := startModuleServer(t, server.Config{ModulesDir: manifests}, func(o *modules.Options) { o.CallTimeout = 2 * time.Second })
	cred := ms.endpoint("owner", "--capabilities", "testmod")
	first := statelessCall(t, ms, cred, nil)
	if first.ResultType != mcp.ResultTypeInputRequired {
		t.Fatalf("first call: %+v; want input_required", first)
	}
	// The run ends with the module call's timeout, and is audited then.
	ms.poll("the unanswered call to end", func() bool { return len(ms.audits("module.call")) > 0 })
	retry := map[string]any{"inputResponses": map[string]any{"elicitation": map[string]any{"action": "decline"}}, "requestState": first.RequestState}
	if res := statelessCall(t, ms, cred, retry); !res.IsError || !strings.HasPrefix(toolText(res), "not_found:") {
		t.Errorf("answer after the call ended: %s; want not_found", toolText(res))
	}
}

// statelessCall calls testmod_elicit over 2026-07-28 by hand, declaring
// elicitation, with extra params (a retry's); it returns the tool result.
func statelessCall(t *testing.T, ms *moduleServer, cred string, extra map[string]any) *mcp.CallToolResult {
	t.Helper()
	params := map[string]any{"name": "testmod_elicit", "_meta": map[string]any{
		mcp.MetaKeyProtocolVersion: mcp.ProtocolVersion20260728, mcp.MetaKeyClientCapabilities: map[string]any{"elicitation": map[string]any{}}}}
	for k, v := range extra {
		params[k] = v
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, ms.base+"/mcp", bytes.NewReader(body))
	for k, v := range map[string]string{"Authorization": "Bearer " + cred, "Content-Type": "application/json",
		"Accept": "application/json, text/event-stream", mcp.HeaderProtocolVersion: mcp.ProtocolVersion20260728,
		mcp.HeaderMethod: "tools/call", mcp.HeaderName: "testmod_elicit"} {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var msg []byte
	for sc := bufio.NewScanner(resp.Body); sc.Scan(); {
		line := sc.Bytes()
		if data, ok := bytes.CutPrefix(line, []byte("data: ")); ok {
			line = data
		}
		if bytes.Contains(line, []byte(`"result"`)) || bytes.Contains(line, []byte(`"error"`)) {
			msg = append([]byte(nil), line...)
		}
	}
	var out struct {
		Result *mcp.CallToolResult `json:"result"`
		Error  json.RawMessage     `json:"error"`
	}
	if err := json.Unmarshal(msg, &out); err != nil || out.Result == nil {
		t.Fatalf("status %d, %s: %v", resp.StatusCode, msg, err)
	}
	return out.Result
}

func toolText(res *mcp.CallToolResult) string {
	text := ""
	for _, part := range res.Content {
		if tc, ok := part.(mcp.TextContent); ok {
			text += tc.Text
		}
	}
	return text
}

func callText(t *testing.T, c *client.Client, tool string) (string, bool) {
	t.Helper()
	res, err := c.CallTool(t.Context(), mcp.CallToolRequest{Params: mcp.CallToolParams{Name: tool}})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	return toolText(res), res.IsError
}

// dialLegacy opens a session of revision version with mcp-go's client.
func dialLegacy(t *testing.T, ms *moduleServer, cred, version string, opts ...client.ClientOption) *client.Client {
	t.Helper()
	tr, err := transport.NewStreamableHTTP(ms.base+"/mcp", transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + cred}))
	if err != nil {
		t.Fatal(err)
	}
	c := client.NewClient(tr, append(opts, client.WithProtocolVersion(version))...)
	t.Cleanup(func() { c.Close() })
	if err := c.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	req := mcp.InitializeRequest{Params: mcp.InitializeParams{ProtocolVersion: version,
		ClientInfo: mcp.Implementation{Name: "asker", Version: "1"}}}
	if init, err := c.Initialize(t.Context(), req); err != nil || init.ProtocolVersion != version {
		t.Fatalf("session settled on %v: %v", init, err)
	}
	return c
}

type elicitFunc func(mcp.ElicitationRequest) *mcp.ElicitationResult

func (f elicitFunc) Elicit(_ context.Context, req mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	return f(req), nil
}

// bearer adds the credential to the Go SDK's requests and notes their versions.
type bearer struct {
	cred     string
	mu       sync.Mutex
	versions []string
}

func (b *bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.cred)
	b.mu.Lock()
	b.versions = append(b.versions, r.Header.Get(mcp.HeaderProtocolVersion))
	b.mu.Unlock()
	return http.DefaultTransport.RoundTrip(r)
}

func (b *bearer) sawVersion(v string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, got := range b.versions {
		if got == v {
			return true
		}
	}
	return false
}

func sdkText(res *sdk.CallToolResult) string {
	text := ""
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			text += tc.Text
		}
	}
	return text
}

// A session client that fails to answer ends the call at once: the module is
// not left waiting for the call's timeout.
func TestModuleElicitationSessionClientFails(t *testing.T) {
	_, manifests := testModuleDir(t)
	ms := startModuleServer(t, server.Config{ModulesDir: manifests})
	cred := ms.endpoint("asker", "--capabilities", "testmod")
	session := dialLegacy(t, ms, cred, mcp.LATEST_LEGACY_PROTOCOL_VERSION, client.WithElicitationHandler(failingElicitor{}))
	if res, err := session.CallTool(t.Context(), mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "testmod_elicit"}}); err == nil && !res.IsError {
		t.Fatalf("call whose question failed: %s; want an error", toolText(res))
	}
	// The module call timeout is 5 minutes; the wait below gives up long before.
	ms.poll("the call to end", func() bool { return len(ms.audits("module.call")) > 0 })
}

type failingElicitor struct{}

func (failingElicitor) Elicit(context.Context, mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	return nil, errors.New("the user closed the window")
}

// Through `switchboard connect`, a stdio client that declared elicitation is
// asked on stdout and its answer on stdin reaches the module.
func TestConnectRelaysElicitation(t *testing.T) {
	_, manifests := testModuleDir(t)
	ms := startModuleServer(t, server.Config{ModulesDir: manifests})
	cred := ms.endpoint("bridged", "--capabilities", "testmod")
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	env := &environ{stdin: inR, stdout: outW, stderr: io.Discard, getenv: func(k string) string {
		if k == "SWITCHBOARD_CREDENTIAL" {
			return cred
		}
		return ""
	}}
	done := make(chan int, 1)
	go func() { done <- run(ctx, env, []string{"connect", "--url", ms.base + "/mcp"}) }()
	lines := make(chan map[string]any, 64)
	go func() {
		defer close(lines)
		for sc := bufio.NewScanner(outR); sc.Scan(); {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) == nil {
				lines <- m
			}
		}
	}()
	send := func(v string) {
		if _, err := io.WriteString(inW, v+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	await := func(match func(map[string]any) bool, what string) map[string]any {
		t.Helper()
		limit := time.After(waitLimit) // against a hang, not a measure of speed
		for {
			select {
			case m, ok := <-lines:
				if !ok {
					t.Fatalf("stdout closed waiting for %s", what)
				}
				if match(m) {
					return m
				}
			case <-limit:
				t.Fatalf("no %s on stdout", what)
			}
		}
	}
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{}},"clientInfo":{"name":"stdio-agent","version":"1"}}}`)
	await(func(m map[string]any) bool { return m["id"] == 1.0 }, "initialize result")
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"testmod_elicit","arguments":{}}}`)
	ask := await(func(m map[string]any) bool { return m["method"] == "elicitation/create" || m["id"] == 2.0 }, "the module's question")
	if ask["method"] != "elicitation/create" {
		t.Fatalf("the call ended without asking: %v", ask)
	}
	id, _ := json.Marshal(ask["id"])
	send(`{"jsonrpc":"2.0","id":` + string(id) + `,"result":{"action":"accept","content":{"pick":"b"}}}`)
	m := await(func(m map[string]any) bool { return m["id"] == 2.0 }, "the call's result")
	b, _ := json.Marshal(m["result"])
	var res mcp.CallToolResult
	if err := json.Unmarshal(b, &res); err != nil || res.IsError || toolText(&res) != picked {
		t.Errorf("the call through the bridge: %s; want %q", b, picked)
	}
	inW.Close()
	<-done
}
