package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/switchboardhq/switchboard/internal/testkit"
	"github.com/switchboardhq/switchboard/store"
)

const initializeBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25",` +
	`"capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`

const listToolsBody = `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}`

// raw sends one HTTP request to /mcp and returns the response with its body read.
func (e *env) raw(method, cred, session, body string, header map[string]string) (*http.Response, string) {
	e.t.Helper()
	req, err := http.NewRequest(method, e.url, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	if body == "" {
		req.Body = nil
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if cred != "" {
		req.Header.Set("Authorization", "Bearer "+cred)
	}
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	}
	for k, v := range header {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	if method == http.MethodGet {
		// A GET that is let through streams until the session ends; read
		// only the status.
		ctx, cancel := context.WithCancel(context.Background())
		req = req.WithContext(ctx)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			e.t.Fatal(err)
		}
		cancel()
		resp.Body.Close()
		return resp, ""
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func TestAuthentication(t *testing.T) {
	e := newEnv(t)
	ep, cred := e.endpoint("authed", []string{"inbox"}, nil)

	for name, c := range map[string]string{"no credential": "", "unknown credential": store.CredentialPrefix + "nope"} {
		resp, _ := e.raw(http.MethodPost, c, "", initializeBody, nil)
		if resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
			t.Errorf("%s: %d, WWW-Authenticate %q", name, resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
		}
	}

	// A revoked credential fails from the next request on, mid-session.
	c := e.dial(cred, false)
	c.ok(t, VerbListTodos, nil, nil)
	if err := e.st.RevokeEndpoint(t.Context(), ep.ID, "human:test"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.call(VerbListTodos, nil); err == nil {
		t.Fatal("a revoked credential still worked")
	}
	resp, _ := e.raw(http.MethodPost, cred, c.GetSessionId(), listToolsBody, nil)
	if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") == "" {
		t.Fatalf("revoked credential: %d %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}
}

// A session belongs to the credential that opened it: another endpoint cannot
// post in it, listen on it or end it.
func TestSessionHijackRejected(t *testing.T) {
	e := newEnv(t)
	_, credA := e.endpoint("alice", []string{"inbox"}, nil)
	_, credB := e.endpoint("mallory", []string{"inbox"}, nil)
	alice := e.dial(credA, false)
	sid := alice.GetSessionId()
	if sid == "" {
		t.Fatal("no session id")
	}
	for _, method := range []string{http.MethodPost, http.MethodGet, http.MethodDelete} {
		body := ""
		if method == http.MethodPost {
			body = listToolsBody
		}
		resp, _ := e.raw(method, credB, sid, body, nil)
		if resp.StatusCode != http.StatusForbidden && resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s with another endpoint's session: %d", method, resp.StatusCode)
		}
	}
	// Mallory's own client pointed at alice's session fails too.
	tr, err := transport.NewStreamableHTTP(e.url, transport.WithSession(sid),
		transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + credB}))
	if err != nil {
		t.Fatal(err)
	}
	mc := client.NewClient(tr, client.WithSession())
	if err := mc.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer mc.Close()
	if _, err := mc.ListTools(t.Context(), mcp.ListToolsRequest{}); err == nil {
		t.Error("mallory listed tools in alice's session")
	}
	// Alice's session is untouched.
	alice.ok(t, VerbListTodos, nil, nil)

	// Unknown session ids are 404 (initialize again); GET needs a session.
	if resp, _ := e.raw(http.MethodPost, credA, "sb-unknown", listToolsBody, nil); resp.StatusCode != http.StatusNotFound {
		t.Errorf("unknown session: %d", resp.StatusCode)
	}
	if resp, _ := e.raw(http.MethodGet, credA, "", "", nil); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("GET without a session: %d", resp.StatusCode)
	}
	// A call without a session is the spec's 400, not the 404 that would tell the
	// client a session it never had has ended; only initialize starts one.
	for _, body := range []string{listToolsBody, `{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":1,"method":"ping"}`} {
		resp, text := e.raw(http.MethodPost, credA, "", body, nil)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(text, "only initialize starts a session") {
			t.Errorf("POST %s without a session: %d %q", body, resp.StatusCode, text)
		}
	}
	// Alice ends her session; its id stops working.
	if resp, _ := e.raw(http.MethodDelete, credA, sid, "", nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("DELETE own session: %d", resp.StatusCode)
	}
	if resp, _ := e.raw(http.MethodPost, credA, sid, listToolsBody, nil); resp.StatusCode != http.StatusNotFound {
		t.Errorf("ended session: %d", resp.StatusCode)
	}
}

func TestOriginAndHostChecks(t *testing.T) {
	e := newEnv(t, func(c *envConfig) {
		c.agent.BaseURL = "https://switchboard.example.net"
		c.agent.AllowedOrigins = []string{"https://console.example.net"}
	})
	_, cred := e.endpoint("browser", []string{"inbox"}, nil)
	cases := []struct {
		name   string
		header map[string]string
		want   int
	}{
		{"no Origin", nil, http.StatusOK},
		{"same origin as the base URL", map[string]string{"Origin": "https://switchboard.example.net"}, http.StatusOK},
		{"allowed origin", map[string]string{"Origin": "https://console.example.net"}, http.StatusOK},
		{"foreign origin", map[string]string{"Origin": "https://evil.example"}, http.StatusForbidden},
		{"null origin", map[string]string{"Origin": "null"}, http.StatusForbidden},
		// The test server listens on loopback: a rebinding page's Host is refused,
		// the public host (a local reverse proxy) is not.
		{"rebinding Host", map[string]string{"Host": "evil.example"}, http.StatusForbidden},
		{"public Host via a local proxy", map[string]string{"Host": "switchboard.example.net"}, http.StatusOK},
	}
	for _, tc := range cases {
		resp, body := e.raw(http.MethodPost, cred, "", initializeBody, tc.header)
		if resp.StatusCode != tc.want {
			t.Errorf("%s: %d %s, want %d", tc.name, resp.StatusCode, body, tc.want)
		}
	}
	// The Origin check comes before authentication: a foreign page learns nothing.
	// The refusal names the origin and where to allow it, for the developer.
	resp, body := e.raw(http.MethodPost, "", "", initializeBody, map[string]string{"Origin": "https://evil.example"})
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, `"https://evil.example"`) || !strings.Contains(body, "--allowed-origins") {
		t.Errorf("foreign origin without credential: %d %s", resp.StatusCode, body)
	}
}

// A browser client from an allowed origin gets through CORS: its preflight is
// answered with the methods and headers an MCP client sends, and every answer,
// a 401 included, lets its page read it (and a new session's id). A foreign
// origin's preflight is refused and says nothing of CORS.
func TestBrowserClientOfAnAllowedOrigin(t *testing.T) {
	const console, evil = "https://console.example.net", "https://evil.example"
	e := newEnv(t, func(c *envConfig) { c.agent.AllowedOrigins = []string{console} })
	_, cred := e.endpoint("browser", []string{"inbox"}, nil)
	preflight := map[string]string{"Origin": console, "Access-Control-Request-Method": "POST",
		"Access-Control-Request-Headers": "authorization,content-type,mcp-protocol-version,mcp-method,mcp-name"}
	resp, body := e.raw(http.MethodOptions, "", "", "", preflight)
	allowed := strings.ToLower(resp.Header.Get("Access-Control-Allow-Headers"))
	if resp.StatusCode/100 != 2 || resp.Header.Get("Access-Control-Allow-Origin") != console ||
		!strings.Contains(resp.Header.Get("Access-Control-Allow-Methods"), "POST") {
		t.Fatalf("preflight of an allowed origin: %d %v %s", resp.StatusCode, resp.Header, body)
	}
	for _, h := range []string{"authorization", "content-type", "mcp-session-id", "mcp-protocol-version", "mcp-method", "mcp-name"} {
		if !strings.Contains(allowed, h) {
			t.Errorf("preflight allows headers %q, not %s", allowed, h)
		}
	}
	preflight["Origin"] = evil
	if resp, _ := e.raw(http.MethodOptions, "", "", "", preflight); resp.StatusCode != http.StatusForbidden ||
		resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("preflight of a foreign origin: %d %v", resp.StatusCode, resp.Header)
	}

	resp, body = e.raw(http.MethodPost, cred, "", initializeBody, map[string]string{"Origin": console})
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Access-Control-Allow-Origin") != console ||
		!strings.Contains(resp.Header.Get("Access-Control-Expose-Headers"), "Mcp-Session-Id") {
		t.Fatalf("initialize from an allowed origin: %d %v %s", resp.StatusCode, resp.Header, body)
	}
	resp, _ = e.raw(http.MethodPost, "sb_wrong", "", initializeBody, map[string]string{"Origin": console})
	if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("Access-Control-Allow-Origin") != console {
		t.Errorf("a 401 to an allowed origin: %d %v", resp.StatusCode, resp.Header)
	}
}

// A 2026-07-28 call of a tool whose schema marks a parameter with x-mcp-header (a
// module's tool may) carries it in an Mcp-Param-<name> header: the preflight of an
// allowed origin allows the ones its browser asks for, or the browser would not
// send the call. Headers outside MCP's stay refused.
func TestBrowserPreflightAllowsToolParamHeaders(t *testing.T) {
	const console = "https://console.example.net"
	e := newEnv(t, func(c *envConfig) { c.agent.AllowedOrigins = []string{console} })
	resp, body := e.raw(http.MethodOptions, "", "", "", map[string]string{"Origin": console,
		"Access-Control-Request-Method":  "POST",
		"Access-Control-Request-Headers": "authorization,content-type,mcp-method,mcp-name,mcp-param-region,mcp-param-tenant_id,x-other"})
	allowed := map[string]bool{}
	for _, h := range strings.Split(resp.Header.Get("Access-Control-Allow-Headers"), ",") {
		allowed[strings.ToLower(strings.TrimSpace(h))] = true
	}
	if resp.StatusCode != http.StatusNoContent || !allowed["mcp-param-region"] || !allowed["mcp-param-tenant_id"] || allowed["x-other"] {
		t.Fatalf("preflight asking for mcp-param-region and x-other: %d, allows %q %s", resp.StatusCode,
			resp.Header.Get("Access-Control-Allow-Headers"), body)
	}
}

// A browser on this machine names a loopback listener by any of its loopback
// names: those origins are this server, on its own port, whatever the base URL.
// Another port is another local server; another host, a rebinding page.
func TestLoopbackOriginsOfThisListener(t *testing.T) {
	e := newEnv(t)
	_, cred := e.endpoint("local", []string{"inbox"}, nil)
	port := e.srv.Listener.Addr().(*net.TCPAddr).Port
	other := port + 1
	if other > 65535 {
		other = port - 1
	}
	cases := []struct {
		origin string
		want   int
	}{
		{fmt.Sprintf("http://localhost:%d", port), http.StatusOK},
		{fmt.Sprintf("http://127.0.0.1:%d", port), http.StatusOK},
		{fmt.Sprintf("http://[::1]:%d", port), http.StatusOK},
		{fmt.Sprintf("http://LOCALHOST:%d", port), http.StatusOK},
		{fmt.Sprintf("http://localhost:%d", other), http.StatusForbidden},
		{"http://localhost", http.StatusForbidden},
		{fmt.Sprintf("http://evil.example:%d", port), http.StatusForbidden},
		{fmt.Sprintf("http://192.168.1.10:%d", port), http.StatusForbidden},
		{fmt.Sprintf("ftp://localhost:%d", port), http.StatusForbidden},
		{fmt.Sprintf("http://localhost:%d/page", port), http.StatusForbidden},
	}
	for _, tc := range cases {
		resp, body := e.raw(http.MethodPost, cred, "", initializeBody, map[string]string{"Origin": tc.origin})
		if resp.StatusCode != tc.want {
			t.Errorf("Origin %s: %d %s, want %d", tc.origin, resp.StatusCode, body, tc.want)
		}
	}
}

func TestOversizedRequestRejected(t *testing.T) {
	e := newEnv(t)
	_, cred := e.endpoint("big", []string{"inbox"}, nil)
	c := e.dial(cred, false)
	td := e.addTodo("inbox", "p")
	c.ok(t, VerbClaim, map[string]any{"todo_id": td.ID}, nil)
	huge := `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"complete","arguments":{"todo_id":` +
		jsonInt(td.ID) + `,"result":"` + strings.Repeat("x", 1<<20) + `"}}}`
	resp, _ := e.raw(http.MethodPost, cred, c.GetSessionId(), huge, nil)
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("1 MiB+ body: %d", resp.StatusCode)
	}
	// Without a Content-Length the bound still holds.
	req, _ := http.NewRequest(http.MethodPost, e.url, io.MultiReader(strings.NewReader(huge)))
	req.ContentLength = -1
	req.Header.Set("Authorization", "Bearer "+cred)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Mcp-Session-Id", c.GetSessionId())
	r2, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	r2.Body.Close()
	if r2.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("chunked 1 MiB+ body: %d", r2.StatusCode)
	}
	if got := e.todo(td.ID); got.State != store.StateClaimed {
		t.Fatalf("the oversized call reached the store: %s", got.State)
	}
}

// A POST body that stalls is answered 408 once the body deadline passes, and one
// refused before its body is read is answered at once; both close the connection
// instead of waiting on the body. answerLimit only bounds a broken build.
func TestStalledBodyAnswered(t *testing.T) {
	const answerLimit = 10 * time.Second
	e := newEnv(t, func(c *envConfig) { c.agent.BodyTimeout = 200 * time.Millisecond })
	_, cred := e.endpoint("slow", []string{"inbox"}, nil)
	header := func(cred, origin string) http.Header {
		h := http.Header{"Content-Type": {"application/json"}, "Accept": {"application/json, text/event-stream"}}
		if cred != "" {
			h.Set("Authorization", "Bearer "+cred)
		}
		if origin != "" {
			h.Set("Origin", origin)
		}
		return h
	}
	cases := []struct {
		name     string
		h        http.Header
		declared int64
		want     int
	}{
		{"authenticated, body stalls", header(cred, ""), int64(len(initializeBody)), http.StatusRequestTimeout},
		{"no credential", header("", ""), int64(len(initializeBody)), http.StatusUnauthorized},
		{"unknown credential", header(store.CredentialPrefix+"nope", ""), 100 << 10, http.StatusUnauthorized},
		{"foreign origin", header(cred, "https://evil.example"), int64(len(initializeBody)), http.StatusForbidden},
	}
	for _, c := range cases {
		resp, body, closed := testkit.StalledPost(t, e.url, c.h, c.declared, []byte(initializeBody[:1]), answerLimit)
		if resp.StatusCode != c.want || !closed {
			t.Errorf("%s: %d %q, connection closed %v; want %d, closed", c.name, resp.StatusCode, body, closed, c.want)
		}
	}
}

func jsonInt(v int64) string { b, _ := json.Marshal(v); return string(b) }

// /mcp serves 2026-07-28 beside the session-ful revisions: a request of a later,
// unknown revision is told which to use; mcp-go's default client settles on
// 2026-07-28 and holds no session; one that asks for 2025-11-25 gets a session.
func TestProtocolVersionsServed(t *testing.T) {
	e := newEnv(t)
	_, cred := e.endpoint("modern", []string{"inbox"}, nil)
	discover := `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"_meta":{"` + mcp.MetaKeyProtocolVersion +
		`":"2099-01-01","` + mcp.MetaKeyClientCapabilities + `":{}}}}`
	resp, body := e.raw(http.MethodPost, cred, "", discover,
		map[string]string{mcp.HeaderProtocolVersion: "2099-01-01", mcp.HeaderMethod: "server/discover"})
	var rpc struct {
		Error struct {
			Data mcp.UnsupportedProtocolVersionData `json:"data"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &rpc); err != nil || resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("discover of an unknown revision: %d %s", resp.StatusCode, body)
	}
	if !slices.Equal(rpc.Error.Data.Supported, SupportedProtocolVersions) {
		t.Fatalf("supported = %v, want %v", rpc.Error.Data.Supported, SupportedProtocolVersions)
	}

	for _, want := range []string{mcp.ProtocolVersion20260728, mcp.ProtocolVersion20251125} {
		tr, err := transport.NewStreamableHTTP(e.url, transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + cred}))
		if err != nil {
			t.Fatal(err)
		}
		opts := []client.ClientOption{}
		if want != mcp.ProtocolVersion20260728 {
			opts = append(opts, client.WithProtocolVersion(want))
		}
		c := client.NewClient(tr, opts...) // prefers 2026-07-28 by default
		if err := c.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		res, err := c.Initialize(t.Context(), mcp.InitializeRequest{Params: mcp.InitializeParams{ClientInfo: mcp.Implementation{Name: "default", Version: "1"}}})
		if err != nil {
			t.Fatal(err)
		}
		if res.ProtocolVersion != want || (c.GetSessionId() == "") != (want == mcp.ProtocolVersion20260728) {
			t.Fatalf("client settled on %q with session %q, want %s", res.ProtocolVersion, c.GetSessionId(), want)
		}
		if _, ok := res.Capabilities.Experimental["claude/channel"]; !ok {
			t.Fatalf("%s: capabilities lack experimental claude/channel: %+v", want, res.Capabilities.Experimental)
		}
		if _, err := c.ListTools(t.Context(), mcp.ListToolsRequest{}); err != nil {
			t.Fatalf("%s: tools/list: %v", want, err)
		}
	}
}

// A JSON-RPC batch is refused as one, Invalid Request, on every revision: not
// as a body that is not JSON, which would send a client looking for a bug in
// its encoder. Nothing in it is done.
func TestBatchRefusedAsBatch(t *testing.T) {
	e := newEnv(t)
	_, cred := e.endpoint("batcher", []string{"inbox"}, nil)
	todo := e.addTodo("inbox", `{}`)
	claim := `{"name":"claim_next","arguments":{}}`
	session := e.rawSession(cred)
	for _, c := range []struct {
		name, session, body string
		header              map[string]string
	}{
		{"stateless", "", "[" + modernBody(1, "tools/call", claim) + "," + modernBody(2, "tools/list", "") + "]",
			modernHeaders("tools/call", "claim_next")},
		{"in a session", session, "[" + callBody("1", "claim_next", map[string]any{}) + "," + listToolsBody + "]",
			map[string]string{mcp.HeaderProtocolVersion: "2025-11-25"}},
		{"without a session", "", " [" + initializeBody + "]", nil},
		{"empty", session, "[]", nil},
	} {
		resp, body := e.raw(http.MethodPost, cred, c.session, c.body, c.header)
		var rpc struct {
			ID    json.RawMessage `json:"id"`
			Error *struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(body), &rpc); err != nil || resp.StatusCode != http.StatusBadRequest || rpc.Error == nil ||
			rpc.Error.Code != mcp.INVALID_REQUEST || !strings.Contains(rpc.Error.Message, "batches are not supported") ||
			string(rpc.ID) != "null" {
			t.Errorf("%s batch: HTTP %d %s; want 400, Invalid Request, batches not supported", c.name, resp.StatusCode, body)
		}
	}
	if got := e.todo(todo.ID); got.State != store.StatePending {
		t.Fatalf("a refused batch claimed the todo: %+v", got)
	}
}

// A request whose id is null is refused, Invalid Request, on every revision:
// it is not a notification (that has no id member), and answering it 202 left
// its client waiting for an answer. Nothing in it is done.
func TestNullIDRefused(t *testing.T) {
	e := newEnv(t)
	_, cred := e.endpoint("nulls", []string{"inbox"}, nil)
	todo := e.addTodo("inbox", `{}`)
	session := e.rawSession(cred)
	claim := `{"name":"claim_next","arguments":{}}`
	for _, c := range []struct {
		name, session, body string
		header              map[string]string
	}{
		{"stateless", "", strings.Replace(modernBody(1, "tools/call", claim), `"id":1`, `"id":null`, 1),
			modernHeaders("tools/call", "claim_next")},
		{"in a session", session, callBody("null", "claim_next", map[string]any{}), nil},
		{"an initialize", "", strings.Replace(initializeBody, `"id":1`, `"id":null`, 1), nil},
	} {
		resp, body := e.raw(http.MethodPost, cred, c.session, c.body, c.header)
		var rpc struct {
			ID    json.RawMessage `json:"id"`
			Error *struct {
				Code int `json:"code"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(body), &rpc); err != nil || resp.StatusCode != http.StatusBadRequest || rpc.Error == nil ||
			rpc.Error.Code != mcp.INVALID_REQUEST || string(rpc.ID) != "null" {
			t.Errorf("%s, id null: HTTP %d %s; want 400, Invalid Request", c.name, resp.StatusCode, body)
		}
	}
	if got := e.todo(todo.ID); got.State != store.StatePending {
		t.Fatalf("a refused request claimed the todo: %+v", got)
	}
	// A notification (no id at all) is still taken.
	if resp, body := e.raw(http.MethodPost, cred, session, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, nil); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("a notification: %d %s", resp.StatusCode, body)
	}
}

// A null id is refused whatever else the request holds: params this server
// cannot read (a name that is a number) left it to mcp-go, which took it for a
// notification, answered 202, and left its client waiting.
func TestNullIDRefusedWhateverItsParams(t *testing.T) {
	e := newEnv(t)
	_, cred := e.endpoint("nulls", []string{"inbox"}, nil)
	session := e.rawSession(cred)
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{"name":5}}`,
		`{"jsonrpc":"2.0","id":null,"method":"resources/read","params":{"uri":5}}`,
	} {
		resp, got := e.raw(http.MethodPost, cred, session, body, map[string]string{mcp.HeaderProtocolVersion: "2025-06-18"})
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(got, `"code":-32600`) {
			t.Errorf("%s: HTTP %d %q; want 400, Invalid Request", body, resp.StatusCode, got)
		}
	}
	// A client's error response with a null id (it could not parse a request of
	// the server's) is a response, not a request: not refused as one.
	resp, got := e.raw(http.MethodPost, cred, session, `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}`,
		map[string]string{mcp.HeaderProtocolVersion: "2025-06-18"})
	if strings.Contains(got, nullIDRefusal) {
		t.Errorf("a null-id error response: HTTP %d %q, refused as a request", resp.StatusCode, got)
	}
}

func TestRateLimited(t *testing.T) {
	e := newEnv(t)
	// Two tokens, refilled once an hour: the third call in a row is over.
	_, cred := e.endpoint("hasty", []string{"inbox"}, nil, func(s *store.EndpointSpec) {
		s.RatePerSecond, s.RateBurst = ptr(1.0/3600), ptr(2)
	})
	c := e.dial(cred, false)
	c.ok(t, VerbListTodos, nil, nil)
	c.ok(t, VerbListTodos, nil, nil)
	if code := c.code(t, VerbListTodos, nil); code != CodeRateLimited {
		t.Fatalf("third call: %s, want rate_limited", code)
	}
	// The refusal says when to call again: here, when the bucket (a token every
	// 100 s) has one again.
	_, slow := e.endpoint("slow", []string{"inbox"}, nil, func(s *store.EndpointSpec) {
		s.RatePerSecond, s.RateBurst = ptr(0.01), ptr(1)
	})
	q := e.dial(slow, false)
	q.ok(t, VerbListTodos, nil, nil)
	res, err := q.call(VerbListTodos, nil)
	if err != nil || !res.IsError {
		t.Fatalf("second call: %v %v", err, res)
	}
	msg := text(res)
	var wait float64
	if i := strings.LastIndex(msg, "retry in "); i < 0 {
		t.Fatalf("refusal without a wait: %q", msg)
	} else if _, err := fmt.Sscanf(msg[i+len("retry in "):], "%f s", &wait); err != nil || wait <= 0 || wait > 100 {
		t.Fatalf("refusal over a 0.01/s bucket: %q", msg)
	}
	// Another endpoint has its own bucket.
	_, other := e.endpoint("patient", []string{"inbox"}, nil)
	e.dial(other, false).ok(t, VerbListTodos, nil, nil)
}

// The GET stream and POST answers tell nginx not to buffer them (a doorbell held
// in a proxy's buffer arrives late).
func TestStreamsAreNotBufferedByProxies(t *testing.T) {
	e := newEnv(t)
	_, cred := e.endpoint("w", []string{"inbox"}, nil)
	sid := e.rawSession(cred)
	get, _ := e.raw(http.MethodGet, cred, sid, "", map[string]string{"Accept": "text/event-stream"})
	post, _ := e.raw(http.MethodPost, cred, sid, listToolsBody, nil)
	for name, resp := range map[string]*http.Response{"GET": get, "POST": post} {
		if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Accel-Buffering") != "no" {
			t.Errorf("%s: HTTP %d, X-Accel-Buffering %q", name, resp.StatusCode, resp.Header.Get("X-Accel-Buffering"))
		}
	}
}

// While the database cannot check credentials, every request is answered 503,
// and the log says so once in a while with the count, not once a request.
func TestCredentialCheckFailuresLoggedOnce(t *testing.T) {
	var logs testkit.LockedBuffer
	e := newEnv(t, func(c *envConfig) { c.agent.Logger = slog.New(slog.NewTextHandler(&logs, nil)) })
	_, cred := e.endpoint("authed", []string{"inbox"}, nil)
	e.st.Close() // the checks fail as they do while the database is away
	for range 5 {
		if resp, body := e.raw(http.MethodPost, cred, "", initializeBody, nil); resp.StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("a credential the database cannot check: %d %s", resp.StatusCode, body)
		}
	}
	if n := strings.Count(logs.String(), "authenticate agent"); n != 1 {
		t.Fatalf("logged %d times for 5 refused requests:\n%s", n, logs.String())
	}
}

// The bound on a body is the agent's alone: raised past mcp-go's own default
// (4 MiB), a request mcp-go answers is not refused there.
func TestRaisedBodyBoundHoldsForMCPGo(t *testing.T) {
	e := newEnv(t, func(c *envConfig) { c.agent.MaxRequestBytes = 6 << 20 })
	_, cred := e.endpoint("big", []string{"inbox"}, nil)
	sid := e.rawSession(cred)
	// A tools/list padded in its _meta, which mcp-go answers.
	big := `{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{"_meta":{"pad":"` + strings.Repeat("x", 5<<20) + `"}}}`
	if resp, body := e.raw(http.MethodPost, cred, sid, big, nil); resp.StatusCode != http.StatusOK || !strings.Contains(body, `"tools"`) {
		t.Fatalf("a 5 MiB tools/list under a 6 MiB bound: HTTP %d %.200s", resp.StatusCode, body)
	}
}
