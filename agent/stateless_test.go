package agent

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/switchboardhq/switchboard/store"
)

// dialStateless connects mcp-go's client, which settles on 2026-07-28 by itself.
func (e *env) dialStateless(cred string) *agentClient {
	e.t.Helper()
	tr, err := transport.NewStreamableHTTP(e.url, transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + cred}))
	if err != nil {
		e.t.Fatal(err)
	}
	c := client.NewClient(tr)
	if err := c.Start(context.Background()); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { c.Close() })
	res, err := c.Initialize(context.Background(), mcp.InitializeRequest{Params: mcp.InitializeParams{ClientInfo: mcp.Implementation{Name: "stateless", Version: "1"}}})
	if err != nil || res.ProtocolVersion != statelessVersion {
		e.t.Fatalf("stateless dial: %v (settled on %v)", err, res)
	}
	return &agentClient{Client: c, init: res, notes: make(chan mcp.JSONRPCNotification, 1), url: e.url, cred: cred}
}

// modernBody is a stateless request's body: params with the revision in _meta.
func modernBody(id int, method, params string) string {
	meta := `"_meta":{"` + mcp.MetaKeyProtocolVersion + `":"2026-07-28","` + mcp.MetaKeyClientCapabilities + `":{}}`
	if params == "" {
		params = "{" + meta + "}"
	} else {
		params = "{" + meta + "," + strings.TrimPrefix(params, "{")
	}
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`, id, method, params)
}

// modernHeaders are the headers of a stateless request of method (and name).
func modernHeaders(method, name string) map[string]string {
	h := map[string]string{mcp.HeaderProtocolVersion: "2026-07-28", mcp.HeaderMethod: method}
	if name != "" {
		h[mcp.HeaderName] = name
	}
	return h
}

// modernCall calls a tool over the stateless revision and returns its result.
func (e *env) modernCall(cred, tool string, args any) (res struct {
	ResultType        string          `json:"resultType"`
	IsError           bool            `json:"isError"`
	StructuredContent json.RawMessage `json:"structuredContent"`
}) {
	e.t.Helper()
	a, _ := json.Marshal(args)
	resp, body := e.raw(http.MethodPost, cred, "", modernBody(1, "tools/call", fmt.Sprintf(`{"name":%q,"arguments":%s}`, tool, a)),
		modernHeaders("tools/call", tool))
	var rpc struct {
		Result *json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal([]byte(body), &rpc); err != nil || resp.StatusCode != http.StatusOK || rpc.Result == nil {
		e.t.Fatalf("%s: HTTP %d %s", tool, resp.StatusCode, body)
	}
	if err := json.Unmarshal(*rpc.Result, &res); err != nil {
		e.t.Fatal(err)
	}
	return res
}

// A client of 2026-07-28 discovers the server without a handshake and learns
// the lease contract from it; it lists its own endpoint's tools, with the
// revision's result type and cache hints, in a stable order; and it drains a
// todo, each request on its own credential and no session.
func TestStatelessDiscoverListAndDrain(t *testing.T) {
	e := newEnv(t)
	_, cred := e.endpoint("modern", []string{"inbox"}, nil, func(s *store.EndpointSpec) { s.DefaultLeaseTTL = ptr(120) })
	_, narrow := e.endpoint("narrow", []string{"other"}, []string{VerbListTodos})

	resp, body := e.raw(http.MethodPost, cred, "", modernBody(1, "server/discover", ""), modernHeaders("server/discover", ""))
	var disc struct {
		Result struct {
			SupportedVersions []string `json:"supportedVersions"`
			Instructions      string   `json:"instructions"`
			ResultType        string   `json:"resultType"`
			Capabilities      struct {
				Experimental map[string]any `json:"experimental"`
			} `json:"capabilities"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(body), &disc); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("discover: HTTP %d %s", resp.StatusCode, body)
	}
	if resp.Header.Get("Mcp-Session-Id") != "" {
		t.Fatalf("discover minted a session: %q", resp.Header.Get("Mcp-Session-Id"))
	}
	if !slices.Equal(disc.Result.SupportedVersions, SupportedProtocolVersions) || disc.Result.ResultType != "complete" {
		t.Fatalf("discover: %s", body)
	}
	if _, ok := disc.Result.Capabilities.Experimental["claude/channel"]; !ok {
		t.Fatalf("discover lacks the claude/channel capability: %s", body)
	}
	for _, want := range []string{"lease of 120 seconds", "Lease contract", "pass lease_seq", "subscriptions/listen"} {
		if !strings.Contains(disc.Result.Instructions, want) {
			t.Errorf("discover's instructions lack %q: %s", want, disc.Result.Instructions)
		}
	}
	// A client without a session is promised nothing sent to one.
	if strings.Contains(disc.Result.Instructions, "the session is") {
		t.Errorf("discover's instructions speak of the client's session: %s", disc.Result.Instructions)
	}

	listed := func(cred string) []string {
		resp, body := e.raw(http.MethodPost, cred, "", modernBody(2, "tools/list", ""), modernHeaders("tools/list", ""))
		var l struct {
			Result struct {
				Tools []struct {
					Name        string `json:"name"`
					Description string `json:"description"`
				} `json:"tools"`
				ResultType string `json:"resultType"`
				TTL        *int   `json:"ttlMs"`
				CacheScope string `json:"cacheScope"`
			} `json:"result"`
		}
		if err := json.Unmarshal([]byte(body), &l); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("tools/list: HTTP %d %s", resp.StatusCode, body)
		}
		if l.Result.ResultType != "complete" || l.Result.TTL == nil || l.Result.CacheScope == "" {
			t.Fatalf("tools/list lacks resultType, ttlMs or cacheScope: %s", body)
		}
		var names []string
		for _, tl := range l.Result.Tools {
			names = append(names, tl.Name)
			if tl.Name == VerbClaimNext && !strings.Contains(tl.Description, "120 seconds") {
				t.Errorf("claim_next is not defined for its endpoint: %s", tl.Description)
			}
		}
		return names
	}
	// Interleaved: nothing of one credential's list reaches the other's.
	full, small, again := listed(cred), listed(narrow), listed(cred)
	if !slices.IsSorted(full) || !slices.Equal(full, again) || !slices.Contains(full, VerbClaimNext) {
		t.Fatalf("tools of the full endpoint: %v then %v", full, again)
	}
	if !slices.Equal(small, []string{VerbListTodos}) {
		t.Fatalf("tools of the narrow endpoint: %v", small)
	}

	todo := e.addTodo("inbox", `{"n":1}`)
	claim := e.modernCall(cred, VerbClaimNext, map[string]any{})
	var claimed struct {
		Todo struct {
			ID int64 `json:"id"`
		} `json:"todo"`
		LeaseSeq int64 `json:"lease_seq"`
	}
	if err := json.Unmarshal(claim.StructuredContent, &claimed); err != nil || claimed.Todo.ID != todo.ID || claim.ResultType != "complete" {
		t.Fatalf("claim_next: %+v", claim)
	}
	// The narrow credential has no such tool.
	resp, body = e.raw(http.MethodPost, narrow, "", modernBody(3, "tools/call", `{"name":"claim_next","arguments":{}}`),
		modernHeaders("tools/call", VerbClaimNext))
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "not found") {
		t.Fatalf("claim_next by an endpoint without the verb: HTTP %d %s", resp.StatusCode, body)
	}
	// No session: complete without lease_seq is refused, with it done.
	if res := e.modernCall(cred, VerbComplete, map[string]any{"todo_id": todo.ID}); !res.IsError {
		t.Fatalf("complete without lease_seq: %+v", res)
	}
	if res := e.modernCall(cred, VerbComplete, map[string]any{"todo_id": todo.ID, "lease_seq": claimed.LeaseSeq}); res.IsError {
		t.Fatalf("complete: %s", res.StructuredContent)
	}
	if got := e.todo(todo.ID); got.State != store.StateDone {
		t.Fatalf("todo is %s, want done", got.State)
	}
}

// Each refusal of the revision's rules comes before anything is done: the
// todo stays pending, and the answer is the spec's error.
func TestStatelessBadInput(t *testing.T) {
	e := newEnv(t)
	_, cred := e.endpoint("modern", []string{"inbox"}, nil)
	e.endpoint("elsewhere", []string{"secret"}, nil)
	todo := e.addTodo("inbox", `{}`)
	claim := `{"name":"claim_next","arguments":{}}`
	noVersion := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"claim_next","arguments":{}}}`
	for _, c := range []struct {
		name   string
		body   string
		header map[string]string
		code   int
	}{
		{"version in _meta differs from the header", strings.Replace(modernBody(1, "tools/call", claim), `"2026-07-28"`, `"2025-11-25"`, 1),
			modernHeaders("tools/call", "claim_next"), mcp.HEADER_MISMATCH},
		{"no version in _meta", noVersion, modernHeaders("tools/call", "claim_next"), mcp.INVALID_PARAMS},
		{"no client capabilities in _meta", strings.Replace(modernBody(1, "tools/call", claim), `,"`+mcp.MetaKeyClientCapabilities+`":{}`, "", 1),
			modernHeaders("tools/call", "claim_next"), mcp.INVALID_PARAMS},
		{"a version not served", strings.Replace(modernBody(1, "tools/call", claim), `"2026-07-28"`, `"2099-01-01"`, 1),
			map[string]string{mcp.HeaderProtocolVersion: "2099-01-01", mcp.HeaderMethod: "tools/call", mcp.HeaderName: "claim_next"},
			mcp.UNSUPPORTED_PROTOCOL_VERSION},
		{"no version header", modernBody(1, "tools/call", claim), map[string]string{mcp.HeaderMethod: "tools/call", mcp.HeaderName: "claim_next"},
			mcp.HEADER_MISMATCH},
		{"Mcp-Name names another tool", modernBody(1, "tools/call", claim), modernHeaders("tools/call", "list_todos"), mcp.HEADER_MISMATCH},
		{"Mcp-Method names another method", modernBody(1, "tools/call", claim), modernHeaders("tools/list", ""), mcp.HEADER_MISMATCH},
		{"an Mcp-Session-Id", modernBody(1, "tools/call", claim),
			map[string]string{mcp.HeaderProtocolVersion: "2026-07-28", mcp.HeaderMethod: "tools/call", mcp.HeaderName: "claim_next", "Mcp-Session-Id": "x"},
			mcp.INVALID_REQUEST},
		{"a Last-Event-ID", modernBody(1, "tools/call", claim),
			map[string]string{mcp.HeaderProtocolVersion: "2026-07-28", mcp.HeaderMethod: "tools/call", mcp.HeaderName: "claim_next", "Last-Event-ID": "7"},
			mcp.HEADER_MISMATCH},
		{"a listen for a queue out of scope", modernBody(1, "subscriptions/listen", `{"notifications":{"claude/channel":{"queues":["inbox","secret"]}}}`),
			modernHeaders("subscriptions/listen", ""), mcp.INVALID_PARAMS},
		// A member twice or misspelt, which encoding/json would take, is refused
		// as mcp-go refuses it: before the capabilities and the headers.
		{"a listen with notifications twice", modernBody(1, "subscriptions/listen",
			`{"notifications":{"claude/channel":{"queues":["secret"]}},"notifications":{"claude/channel":{"queues":["inbox"]}}}`),
			modernHeaders("subscriptions/listen", ""), mcp.INVALID_REQUEST},
		{"a listen with Notifications", modernBody(1, "subscriptions/listen", `{"Notifications":{"claude/channel":{"queues":["inbox"]}}}`),
			modernHeaders("subscriptions/listen", ""), mcp.INVALID_REQUEST},
		{"a call with name twice", modernBody(1, "tools/call", `{"name":"list_todos","name":"claim_next","arguments":{}}`),
			map[string]string{mcp.HeaderProtocolVersion: "2026-07-28"}, mcp.INVALID_REQUEST},
		{"a call with Method", strings.Replace(modernBody(1, "tools/call", claim), `"method"`, `"Method"`, 1),
			modernHeaders("tools/call", "claim_next"), mcp.INVALID_REQUEST},
		// A body whose name is not a string, which the agent's envelope cannot
		// read, still meets the refusal of a session.
		{"an Mcp-Session-Id, a name that is a number", modernBody(1, "tools/list", `{"name":5}`),
			map[string]string{mcp.HeaderProtocolVersion: "2026-07-28", mcp.HeaderMethod: "tools/list", "Mcp-Session-Id": "x"},
			mcp.INVALID_REQUEST},
	} {
		resp, body := e.raw(http.MethodPost, cred, "", c.body, c.header)
		var rpc struct {
			Error *struct {
				Code int `json:"code"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(body), &rpc); err != nil || rpc.Error == nil || rpc.Error.Code != c.code || resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s: HTTP %d %s; want 400 with code %d", c.name, resp.StatusCode, body, c.code)
		}
	}
	if got := e.todo(todo.ID); got.State != store.StatePending || got.Attempts != 0 {
		t.Fatalf("a refused request touched the todo: %+v", got)
	}
	// GET and DELETE are not part of the revision.
	for _, m := range []string{http.MethodGet, http.MethodDelete} {
		if resp, _ := e.raw(m, cred, "", "", map[string]string{mcp.HeaderProtocolVersion: "2026-07-28"}); resp.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("%s: HTTP %d, want 405", m, resp.StatusCode)
		}
	}
}

// sseStream is an open subscriptions/listen answer, read event by event.
type sseStream struct {
	resp   *http.Response
	events chan json.RawMessage
}

// listenStateless opens a subscriptions/listen stream with the given notifications.
func (e *env) listenStateless(cred, notifications string) *sseStream {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	e.t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.url,
		strings.NewReader(modernBody(7, "subscriptions/listen", `{"notifications":`+notifications+`}`)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+cred)
	for k, v := range modernHeaders("subscriptions/listen", "") {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	s := &sseStream{resp: resp, events: make(chan json.RawMessage, 64)}
	go func() {
		defer close(s.events)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<16), 1<<20)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				s.events <- json.RawMessage(data)
			}
		}
	}()
	return s
}

// next returns the stream's next message's method (or "result" or "error") and
// params (or the result or the error).
func (s *sseStream) next(t testing.TB) (string, map[string]any) {
	t.Helper()
	select {
	case ev, ok := <-s.events:
		if !ok {
			return "", nil
		}
		var m struct {
			Method string         `json:"method"`
			Params map[string]any `json:"params"`
			Result map[string]any `json:"result"`
			Error  map[string]any `json:"error"`
		}
		if err := json.Unmarshal(ev, &m); err != nil {
			t.Fatalf("event %s: %v", ev, err)
		}
		switch {
		case m.Error != nil:
			return "error", m.Error
		case m.Method == "":
			return "result", m.Result
		}
		return m.Method, m.Params
	case <-time.After(10 * time.Second):
		t.Fatal("no event on the listen stream")
	}
	return "", nil
}

// A listener hears the doorbell for the queues it asked for, tagged with its
// subscription, and the lease-default change as a list change; a revoked
// credential's stream ends.
func TestStatelessListenDoorbell(t *testing.T) {
	e := newEnv(t)
	ep, cred := e.endpoint("listener", []string{"inbox", "later"}, nil)
	s := e.listenStateless(cred, `{"toolsListChanged":true,"claude/channel":{"queues":["inbox"]}}`)
	if s.resp.StatusCode != http.StatusOK {
		t.Fatalf("listen: HTTP %d", s.resp.StatusCode)
	}
	method, params := s.next(t)
	if method != mcp.MethodNotificationSubscriptionsAcknowledged {
		t.Fatalf("first message %s %v, want the acknowledgement", method, params)
	}
	if n := e.ag.Stats().Listeners; n != 1 {
		t.Fatalf("Stats().Listeners = %d, want 1", n)
	}
	e.addTodo("later", `{}`) // not asked for: no ring
	todo := e.addTodo("inbox", `{}`)
	method, params = s.next(t)
	meta, _ := params["meta"].(map[string]any)
	tag, _ := params["_meta"].(map[string]any)
	if method != ChannelMethod || meta["todo_id"] != fmt.Sprint(todo.ID) || meta["queue"] != "inbox" || tag[mcp.MetaKeySubscriptionID] != float64(7) {
		t.Fatalf("ring: %s %v", method, params)
	}
	if res := e.modernCall(cred, VerbSetDefaultLease, map[string]any{"default_lease_ttl_seconds": 90}); res.IsError {
		t.Fatalf("set_default_lease: %s", res.StructuredContent)
	}
	if method, _ = s.next(t); method != string(mcp.MethodNotificationToolsListChanged) {
		t.Fatalf("after set_default_lease: %s, want tools/list_changed", method)
	}
	if err := e.st.RevokeEndpoint(context.Background(), ep.ID, "human:test"); err != nil {
		t.Fatal(err)
	}
	e.ag.Revalidate(context.Background())
	s.wantEnded(t, "the credential was revoked")
}

// wantEnded checks that the server ended the stream, its last message the
// listen's error answer saying why.
func (s *sseStream) wantEnded(t testing.TB, why string) {
	t.Helper()
	method, params := s.next(t)
	msg, _ := params["message"].(string)
	if method != "error" || params["code"] != float64(listenEndedCode) || !strings.Contains(msg, why) {
		t.Fatalf("ended stream's last message: %s %v, want the listen's error saying %q", method, params, why)
	}
	if method, _ = s.next(t); method != "" {
		t.Fatalf("after the listen's answer: %s, want the stream ended", method)
	}
}

// A stateless call of a verb is answered by the fast path, as mcp-go answers
// it: the same JSON, result type and server info included, a refusal too.
func TestStatelessFastPathAnswersAsMCPGo(t *testing.T) {
	e := newEnv(t)
	_, cred := e.endpoint("modern", []string{"inbox"}, nil)
	e.addTodo("inbox", `{"n":1}`)
	for _, call := range []struct{ tool, args string }{
		{VerbListTodos, `{"queue":"inbox"}`},
		{VerbListTodos, `{"queue":"elsewhere"}`},
		{VerbComplete, `{"todo_id":"x"}`},
	} {
		answers := map[bool]any{}
		for _, off := range []bool{false, true} {
			e.ag.fastOff.Store(off)
			before := e.ag.fastAnswered.Load()
			resp, body := e.raw(http.MethodPost, cred, "", modernBody(4, "tools/call", fmt.Sprintf(`{"name":%q,"arguments":%s}`, call.tool, call.args)),
				modernHeaders("tools/call", call.tool))
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("%s %s (fast path off: %v): HTTP %d %s", call.tool, call.args, off, resp.StatusCode, body)
			}
			if fast := e.ag.fastAnswered.Load() != before; fast == off {
				t.Fatalf("%s %s: fast path off %v, yet it answered %v", call.tool, call.args, off, fast)
			}
			var v any
			if err := json.Unmarshal([]byte(body), &v); err != nil {
				t.Fatal(err)
			}
			answers[off] = v
		}
		fast, slow := fmt.Sprint(answers[false]), fmt.Sprint(answers[true])
		if fast != slow || !strings.Contains(fast, "resultType:complete") || !strings.Contains(fast, mcp.MetaKeyServerInfo) {
			t.Errorf("%s %s:\nfast   %s\nmcp-go %s", call.tool, call.args, fast, slow)
		}
	}
}

// Module tools answer a stateless call as they answer one in a session: the
// grant, the rate limit and the audit apply to the request's own credential,
// and a tool a module adds later is callable on the next request.
func TestStatelessModuleToolsAndLimits(t *testing.T) {
	e := newModuleEnv(t, ModuleOptions{}, fakeTool("alpha", "alpha_one"), fakeTool("beta", "beta_one"))
	_, cred := e.endpoint("stateless-modules", []string{"q"}, nil, grant([]string{"alpha"}, nil, nil),
		func(s *store.EndpointSpec) { s.RatePerSecond, s.RateBurst = ptr(1.0/3600), ptr(3) })
	var out struct {
		Tool string `json:"tool"`
	}
	res := e.modernCall(cred, "alpha_one", map[string]any{"text": "hi"})
	if err := json.Unmarshal(res.StructuredContent, &out); err != nil || res.IsError || out.Tool != "alpha_one" || res.ResultType != "complete" {
		t.Fatalf("alpha_one: %+v", res)
	}
	if res := e.modernCall(cred, "beta_one", map[string]any{}); !res.IsError || !strings.Contains(string(res.StructuredContent), CodeForbidden) {
		t.Fatalf("beta_one (not granted): %+v", res)
	}
	e.cat.mu.Lock()
	e.cat.tools = append(e.cat.tools, fakeTool("alpha", "alpha_two"))
	e.cat.mu.Unlock()
	e.ag.RefreshGranted(t.Context(), map[string]bool{"alpha": true}) // as Modules.Run does on a catalog change
	if res := e.modernCall(cred, "alpha_two", map[string]any{}); res.IsError {
		t.Fatalf("alpha_two, added later: %+v", res)
	}
	// The burst of 3 is spent: the next call of any tool is refused.
	if res := e.modernCall(cred, "alpha_one", map[string]any{}); !res.IsError || !strings.Contains(string(res.StructuredContent), CodeRateLimited) {
		t.Fatalf("a call past the burst: %+v", res)
	}
	rows, err := e.st.ListAudit(t.Context(), store.AuditFilter{Action: "module.call"})
	if err != nil || len(rows) < 2 || rows[0].Actor != "agent:stateless-modules" {
		t.Fatalf("audit: %v %+v", err, rows)
	}
}

// A stateless request the agent checks before mcp-go sees it (checkModern) is
// answered as a bare mcp-go server answers it: the HTTP status, the error code
// and the id written back, whatever its shape. (The agent refuses one thing
// mcp-go ignores, an Mcp-Session-Id, on purpose: not here.)
func TestStatelessRefusalsAnswerAsMCPGo(t *testing.T) {
	e := newEnv(t)
	_, cred := e.endpoint("modern", []string{"inbox"}, nil)
	bare := server.NewMCPServer("bare", "1")
	bare.AddTool(mcp.NewTool(VerbListTodos), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("ok"), nil
	})
	hs := httptest.NewServer(server.NewStreamableHTTPServer(bare))
	t.Cleanup(hs.Close)
	pv, cc := `"`+mcp.MetaKeyProtocolVersion+`":"2026-07-28"`, `"`+mcp.MetaKeyClientCapabilities+`":{}`
	// meta opens params with a _meta of members; the body closes params.
	meta := func(members ...string) string { return `{"_meta":{` + strings.Join(members, ",") + `}` }
	call := `,"name":"list_todos","arguments":{"queue":"inbox"}}}`
	callHeaders := modernHeaders("tools/call", VerbListTodos)
	for _, c := range []struct {
		name, body string
		header     map[string]string
	}{
		{"a plain call", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":` + meta(pv, cc) + call, callHeaders},
		{"capabilities under another case", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":` +
			meta(pv, strings.ToLower(cc)) + call, callHeaders},
		{"the version under another case", `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":` +
			meta(strings.ToUpper(pv), cc) + call, callHeaders},
		{"capabilities mcp-go cannot read", `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":` +
			meta(pv, `"`+mcp.MetaKeyClientCapabilities+`":{"roots":5}`) + call, callHeaders},
		{"jsonrpc 1.0, no capabilities", `{"jsonrpc":"1.0","id":5,"method":"tools/list","params":` + meta(pv) + `}}`,
			modernHeaders("tools/list", "")},
		{"a notification, no capabilities", `{"jsonrpc":"2.0","method":"notifications/initialized","params":` + meta(pv) + `}}`,
			modernHeaders("notifications/initialized", "")},
		{"a notification, another Mcp-Method", `{"jsonrpc":"2.0","method":"notifications/initialized","params":` + meta(pv, cc) + `}}`,
			modernHeaders("tools/list", "")},
		{"a bool id, Method twice", `{"jsonrpc":"2.0","id":true,"method":"tools/list","Method":"x","params":` + meta(pv, cc) + `}}`,
			modernHeaders("tools/list", "")},
		{"an object id, no capabilities", `{"jsonrpc":"2.0","id":{"b":1,"a":[2]},"method":"tools/list","params":` + meta(pv) + `}}`,
			modernHeaders("tools/list", "")},
		{"a bool id, Last-Event-ID", `{"jsonrpc":"2.0","id":false,"method":"tools/list","params":` + meta(pv, cc) + `}}`,
			map[string]string{mcp.HeaderProtocolVersion: "2026-07-28", mcp.HeaderMethod: "tools/list", "Last-Event-ID": "1"}},
		{"a response, Last-Event-ID", `{"jsonrpc":"2.0","id":6,"result":{"x":1},"params":` + meta(pv, cc) + `}}`,
			map[string]string{mcp.HeaderProtocolVersion: "2026-07-28", "Last-Event-ID": "1"}},
		{"an empty response", `{"jsonrpc":"2.0","id":7,"result":{},"params":` + meta(pv, cc) + `}}`,
			map[string]string{mcp.HeaderProtocolVersion: "2026-07-28"}},
		{"-0 as id, the version under another case", `{"jsonrpc":"2.0","id":-0,"method":"tools/list","params":` +
			meta(strings.ToUpper(pv), cc) + `}}`, modernHeaders("tools/list", "")},
		// subscriptions/listen, which the agent serves: what mcp-go cannot read
		// of it is refused as mcp-go refuses it.
		{"a listen asking a known notification by a number", `{"jsonrpc":"2.0","id":8,"method":"subscriptions/listen","params":` +
			meta(pv, cc) + `,"notifications":{"promptsListChanged":5}}}`, modernHeaders("subscriptions/listen", "")},
		{"a listen whose notifications are a number", `{"jsonrpc":"2.0","id":"l","method":"subscriptions/listen","params":` +
			meta(pv, cc) + `,"notifications":5}}`, modernHeaders("subscriptions/listen", "")},
		{"a listen asking tools by a string", `{"jsonrpc":"2.0","id":[1],"method":"subscriptions/listen","params":` +
			meta(pv, cc) + `,"notifications":{"toolsListChanged":"x"}}}`, modernHeaders("subscriptions/listen", "")},
	} {
		type answer struct {
			ID    json.RawMessage
			Error *struct{ Code int }
		}
		read := func(resp *http.Response, body string) (a answer) {
			if i := strings.LastIndex(body, "data: "); i >= 0 {
				body = body[i+len("data: "):]
			}
			if strings.TrimSpace(body) != "" {
				if err := json.Unmarshal([]byte(body), &a); err != nil {
					t.Fatalf("%s: %v: %s", c.name, err, body)
				}
			}
			return a
		}
		ours, oursBody := e.raw(http.MethodPost, cred, "", c.body, c.header)
		req, _ := http.NewRequest(http.MethodPost, hs.URL, strings.NewReader(c.body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		for k, v := range c.header {
			req.Header.Set(k, v)
		}
		theirs, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(theirs.Body)
		theirs.Body.Close()
		a, m := read(ours, oursBody), read(theirs, string(b))
		if ours.StatusCode != theirs.StatusCode || (a.Error == nil) != (m.Error == nil) ||
			(a.Error != nil && (a.Error.Code != m.Error.Code || string(a.ID) != string(m.ID))) {
			t.Errorf("%s: the agent answers HTTP %d %s\nmcp-go answers HTTP %d %s", c.name, ours.StatusCode, oursBody, theirs.StatusCode, b)
		}
	}
}
