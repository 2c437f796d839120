package modules

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// remoteServer is an MCP server over Streamable HTTP on 127.0.0.2, which can
// forget its sessions (as a restarted server does) and go away and come back
// on the same address.
type remoteServer struct {
	t       *testing.T
	mcp     *server.MCPServer
	handler atomic.Pointer[server.StreamableHTTPServer]
	srv     *httptest.Server
	addr    string
	auth    atomic.Value // the last Authorization header seen
}

func newRemoteServer(t *testing.T) *remoteServer {
	t.Helper()
	rs := &remoteServer{t: t, mcp: server.NewMCPServer("remote-test", "1.0.0", server.WithToolCapabilities(true))}
	rs.mcp.AddTool(mcp.NewTool("greet", mcp.WithDescription("Greets."), mcp.WithString("name", mcp.Required()),
		mcp.WithReadOnlyHintAnnotation(true), mcp.WithDestructiveHintAnnotation(false)),
		func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText("hello " + req.GetString("name", "")), nil
		})
	rs.forget()
	rs.start("127.0.0.2:0")
	return rs
}

// forget puts a new transport in front of the server: every session is unknown.
func (rs *remoteServer) forget() { rs.handler.Store(server.NewStreamableHTTPServer(rs.mcp)) }

func (rs *remoteServer) start(addr string) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		rs.t.Skipf("cannot listen on %s: %v", addr, err)
	}
	rs.srv = &httptest.Server{Listener: l, Config: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rs.auth.Store(r.Header.Get("Authorization"))
		rs.handler.Load().ServeHTTP(w, r)
	})}}
	rs.srv.Start()
	rs.addr = l.Addr().String()
	rs.t.Cleanup(rs.stop)
}

// stop closes the server and every connection to it, the listening streams
// too (httptest's Close alone would wait for them to end).
func (rs *remoteServer) stop() {
	rs.srv.CloseClientConnections()
	rs.srv.Close()
}

// remoteFailed reports whether the remote capability name's connection has
// been failed (the supervisor then restarts it): set before the call that
// failed it returns.
func (h *harness) remoteFailed(name string) bool {
	h.t.Helper()
	m := h.sup.byName[name]
	m.mu.Lock()
	sess := m.sess
	m.mu.Unlock()
	if r, ok := sess.(redacting); ok {
		sess = r.upstream
	}
	conn, _ := sess.(*remoteConn)
	if conn == nil {
		return true
	}
	select {
	case <-conn.dead:
		return true
	default:
		return false
	}
}

// onCall has the server answer each tools/call with answer, and the rest as
// before.
func (rs *remoteServer) onCall(answer http.HandlerFunc) {
	real := rs.handler.Load()
	rs.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		if !strings.Contains(string(body), `"tools/call"`) {
			real.ServeHTTP(w, r)
			return
		}
		answer(w, r)
	})
}

func remoteManifest(name, url string) Manifest {
	return Manifest{File: name + ".json", Version: 1, Type: TypeRemote, Name: name, Title: "Remote",
		Description: "A remote MCP server.", Risk: "read", URL: url,
		Headers: map[string]EnvRef{"Authorization": {Env: "TESTMOD_TOKEN", Prefix: "Bearer "}}}
}

func remoteHarness(t *testing.T, mans ...Manifest) *harness {
	h := newHarness(t, mans, func(o *Options) { o.EgressPolicy = restPolicy })
	h.start()
	return h
}

// TestRemoteSessionEndedIsReopened: a server that forgets the session (404) is
// given a new one, and the call that met the refusal is made again: the agent
// sees no error, the capability no restart.
func TestRemoteSessionEndedIsReopened(t *testing.T) {
	rs := newRemoteServer(t)
	h := remoteHarness(t, remoteManifest("remote", "http://"+rs.addr+"/mcp"))
	tool, ok := h.tool("remote_greet")
	if !ok || !tool.Available || !strings.Contains(string(tool.Definition), `"readOnlyHint":true`) {
		t.Fatalf("remote_greet = %+v, %v", tool, ok)
	}
	if text := callText(t, h, "remote_greet", `{"name":"ann"}`); text != "hello ann" {
		t.Fatalf("greet = %q", text)
	}
	if got := rs.auth.Load(); got != "Bearer "+testToken {
		t.Fatalf("Authorization = %v, want the header named in the manifest", got)
	}
	rs.forget()
	if text := callText(t, h, "remote_greet", `{"name":"bob"}`); text != "hello bob" {
		t.Fatalf("greet after the server forgot the session = %q", text)
	}
	if st := h.status("remote"); st.State != StateUp || st.Restarts != 0 {
		t.Fatalf("status = %s, %d restarts; want up, none", st.State, st.Restarts)
	}
}

// When the server forgets a session, the first 404 (here the listening
// stream's) has the connection open a new session at once (lost) and close the
// old one, which forgets its ID. A call that took the old session just before
// then fails with "transport closed": it is made again on the new session, not
// failed and the capability taken down. (Found as a rare failure of
// TestRemoteSessionEndedIsReopened under load.)
func TestRemoteCallMadeAgainWhenTheNewSessionCameFirst(t *testing.T) {
	rs := newRemoteServer(t)
	h := remoteHarness(t, remoteManifest("remote", "http://"+rs.addr+"/mcp"))
	if text := callText(t, h, "remote_greet", `{"name":"ann"}`); text != "hello ann" {
		t.Fatalf("greet = %q", text)
	}
	m := h.sup.byName["remote"]
	m.mu.Lock()
	sess := m.sess
	m.mu.Unlock()
	if r, ok := sess.(redacting); ok {
		sess = r.upstream
	}
	conn := sess.(*remoteConn)
	rs.forget()
	// The listening stream, cut, comes back with the forgotten session: the
	// server's 404 has the connection open a new session (lost).
	rs.srv.CloseClientConnections()
	calls := 0
	err := conn.do(t.Context(), func(s *session) error {
		if calls++; calls == 1 {
			deadline := time.Now().Add(10 * time.Second)
			for sessionID(s) != "" && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond) // the new session opening, then the old one closed
			}
		}
		_, err := s.callTool(t.Context(), "greet", json.RawMessage(`{"name":"bob"}`))
		return err
	})
	if err != nil || calls != 2 {
		t.Fatalf("the call after the server forgot its session: %v after %d tries, want it made again once", err, calls)
	}
	if h.remoteFailed("remote") {
		t.Fatal("the capability was taken down")
	}
}

// TestRemoteListChangedWithholdsTheNewTool: tools/list_changed re-lists the
// tools, and one the server added waits for approval.
func TestRemoteListChangedWithholdsTheNewTool(t *testing.T) {
	rs := newRemoteServer(t)
	h := remoteHarness(t, remoteManifest("remote", "http://"+rs.addr+"/mcp"))
	rs.mcp.AddTool(mcp.NewTool("wipe", mcp.WithDescription("Wipes."), mcp.WithDestructiveHintAnnotation(true)),
		func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText("wiped"), nil
		})
	h.until("remote_wipe listed", func() bool { _, ok := h.tool("remote_wipe"); return ok })
	wipe, _ := h.tool("remote_wipe")
	if !wipe.Withheld || wipe.Available {
		t.Fatalf("remote_wipe = %+v, want withheld as new", wipe)
	}
	if err := h.sup.Approve(context.Background(), "remote", "wipe", wipe.Hash); err != nil {
		t.Fatal(err)
	}
	if text := callText(t, h, "remote_wipe", `{}`); text != "wiped" {
		t.Fatalf("wipe = %q", text)
	}
}

// TestRemoteDownIsIsolatedAndComesBack: a server that cannot be reached, or
// that answers garbage, is down with backoff while the other capabilities serve;
// once it is back, the next attempt brings it up.
func TestRemoteDownIsIsolatedAndComesBack(t *testing.T) {
	rs := newRemoteServer(t)
	junk := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte("<html>not MCP</html>"))
	}))
	l, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Skip(err)
	}
	junk.Listener = l
	junk.Start()
	defer junk.Close()
	h := remoteHarness(t, remoteManifest("remote", "http://"+rs.addr+"/mcp"), remoteManifest("junk", junk.URL+"/mcp"))
	h.nextWait() // junk's backoff
	if st := h.status("junk"); st.State != StateBackoff || !strings.Contains(st.LastError, "initialize") {
		t.Fatalf("junk = %s %q, want down with its error", st.State, st.LastError)
	}
	if text := callText(t, h, "remote_greet", `{"name":"ann"}`); text != "hello ann" {
		t.Fatalf("greet beside the junk = %q", text)
	}

	rs.stop()
	w := h.nextWait()
	if w.d != backoffMin || h.status("remote").State != StateBackoff {
		t.Fatalf("after the server went away: wait %s, state %s", w.d, h.status("remote").State)
	}
	if _, err := h.sup.Call(context.Background(), "remote_greet", []byte(`{"name":"x"}`)); err == nil {
		t.Fatal("a call to a capability that is down succeeded")
	}
	rs.start(rs.addr)
	w.fire <- time.Now()
	h.until("remote up again", func() bool { return h.status("remote").State == StateUp })
	if text := callText(t, h, "remote_greet", `{"name":"again"}`); text != "hello again" {
		t.Fatalf("greet after the comeback = %q", text)
	}
}

func TestRemoteManifestRefusals(t *testing.T) {
	base := func() map[string]any {
		return map[string]any{"version": 1, "type": "remote", "name": "logs", "title": "Logs", "description": "Log Watcher.",
			"risk": "mutating", "url": "https://logs.example.test/mcp",
			"headers": map[string]any{"Authorization": map[string]any{"env": "EXAMPLE_API_TOKEN", "prefix": "Bearer "}}}
	}
	dir := t.TempDir()
	writeManifest(t, dir, "logs.json", base())
	if _, err := LoadDir(dir, LoadOptions{LookupEnv: testEnv}); err != nil {
		t.Fatalf("a valid remote manifest: %v", err)
	}
	cases := []struct {
		name, field, msg string
		edit             func(map[string]any)
	}{
		{"a header value given literally", "headers.Authorization", "is given literally", func(m map[string]any) {
			m["headers"] = map[string]any{"Authorization": "Bearer abc"}
		}},
		{"missing env variable", "headers.Authorization.env", `"NOT_SET" is not set`, func(m map[string]any) {
			m["headers"] = map[string]any{"Authorization": map[string]any{"env": "NOT_SET"}}
		}},
		{"a header the transport sets", "headers.Mcp-Session-Id", "not one the transport sets", func(m map[string]any) {
			m["headers"] = map[string]any{"Mcp-Session-Id": map[string]any{"env": "EXAMPLE_API_TOKEN"}}
		}},
		{"unknown field", "command", `is not a field of a "remote" capability`, func(m map[string]any) { m["command"] = "/bin/true" }},
		{"no url", "url", "is required", func(m map[string]any) { delete(m, "url") }},
		{"an unknown transport", "transport", "must be streamable-http or sse", func(m map[string]any) { m["transport"] = "websocket" }},
		{"a credential in the url", "url", "must not hold a user", func(m map[string]any) { m["url"] = "https://u:p@logs.example.test/mcp" }},
		{"empty include_tools", "include_tools", "non-empty", func(m map[string]any) { m["include_tools"] = []string{} }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			m := base()
			tc.edit(m)
			writeManifest(t, dir, "logs.json", m)
			_, err := LoadDir(dir, LoadOptions{LookupEnv: testEnv})
			prefix := `modules: logs.json: field "` + tc.field + `": `
			if err == nil || !strings.HasPrefix(err.Error(), prefix) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("error %v\nwant prefix %q and %q", err, prefix, tc.msg)
			}
		})
	}
}

// TestRemoteToolThatCannotBeOfferedIsRefusedAlone: a remote server that lists a
// tool no agent could use (an input schema that is not an object's) has it
// refused, and its other tools served.
func TestRemoteToolThatCannotBeOfferedIsRefusedAlone(t *testing.T) {
	rs := newRemoteServer(t)
	rs.mcp.AddTool(mcp.NewToolWithRawSchema("listy", "Takes a list.", []byte(`{"type":"array"}`)),
		func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText("x"), nil
		})
	h := remoteHarness(t, remoteManifest("remote", "http://"+rs.addr+"/mcp"))
	st := h.status("remote")
	if st.State != StateUp || len(st.RefusedTools) != 1 || st.RefusedTools[0].Upstream != "listy" ||
		!strings.Contains(st.RefusedTools[0].Reason, `"type": "array"`) {
		t.Fatalf("status = %s, refused %+v", st.State, st.RefusedTools)
	}
	if _, ok := h.tool("remote_listy"); ok {
		t.Error("the refused tool is in the catalog")
	}
	if text := callText(t, h, "remote_greet", `{"name":"ann"}`); text != "hello ann" {
		t.Fatalf("greet beside the refused tool = %q", text)
	}
}

// TestRemoteSessionStormBacksOff: a server that opens every session and then
// refuses it (404 to every request that names it, the listening stream's
// too) is not re-initialised in a loop: the listening stream's refusal opens
// one new session, the next call's refusal of that one puts the capability
// down to wait out its backoff.
func TestRemoteSessionStormBacksOff(t *testing.T) {
	rs := newRemoteServer(t)
	var inits atomic.Int64
	var storm atomic.Bool
	real := rs.handler.Load()
	rs.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		if strings.Contains(string(body), `"initialize"`) {
			inits.Add(1)
		}
		if storm.Load() && r.Header.Get("Mcp-Session-Id") != "" && !strings.Contains(string(body), "notifications/initialized") {
			http.Error(w, "session not found", http.StatusNotFound)
			return
		}
		real.ServeHTTP(w, r)
	})
	h := remoteHarness(t, remoteManifest("remote", "http://"+rs.addr+"/mcp"))
	if text := callText(t, h, "remote_greet", `{"name":"ann"}`); text != "hello ann" {
		t.Fatalf("greet = %q", text)
	}
	before := inits.Load()
	storm.Store(true)
	rs.srv.CloseClientConnections() // the listening stream reconnects and meets the refusal
	h.sup.Call(context.Background(), "remote_greet", []byte(`{"name":"x"}`))
	h.nextWait()
	if n := inits.Load() - before; n > 2 {
		t.Fatalf("%d sessions opened against a server that refuses each; want at most 2 before the backoff", n)
	}
	if st := h.status("remote"); st.State != StateBackoff {
		t.Fatalf("status = %s %q, want backoff", st.State, st.LastError)
	}
}

// TestRemoteEndlessAnswerIsCapped: a remote server whose answer to a call
// never ends is cut at the remote answer cap, the call a failure, rather than
// read into memory until the gateway's call timeout.
func TestRemoteEndlessAnswerIsCapped(t *testing.T) {
	rs := newRemoteServer(t)
	rs.onCall(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		chunk := []byte(strings.Repeat(" ", 64<<10))
		for r.Context().Err() == nil {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	})
	h := remoteHarness(t, remoteManifest("remote", "http://"+rs.addr+"/mcp"))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := h.sup.Call(ctx, "remote_greet", []byte(`{"name":"x"}`))
	var rpc *RPCError
	if !errors.As(err, &rpc) || ctx.Err() != nil || !strings.Contains(rpc.Message, "cap") || !strings.Contains(rpc.Message, "ask for less") {
		t.Fatalf("an endless answer: %s, %v (deadline: %v); want the call's own error, naming the cap", res, err, ctx.Err())
	}
	// The server is up, and its session sound: one answer too long fails
	// that call alone, as a module's does.
	if h.remoteFailed("remote") || h.status("remote").State != StateUp {
		t.Fatalf("after one answer over the cap the capability is %s", h.status("remote").State)
	}
}

// TestRemoteRefusalOfOneCall: a remote server that refuses one call with a 4xx
// status and a body that is not a JSON-RPC error fails that call, with the
// status and the body, and the capability stays up; a 503 takes it down.
func TestRemoteRefusalOfOneCall(t *testing.T) {
	for _, c := range []struct {
		status int
		body   string
		up     bool
	}{
		{http.StatusBadRequest, `{"detail":"bad arguments"}`, true},
		{http.StatusTooManyRequests, "slow down", true},
		{http.StatusServiceUnavailable, "maintenance", false},
	} {
		rs := newRemoteServer(t)
		rs.onCall(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(c.status)
			io.WriteString(w, c.body)
		})
		h := remoteHarness(t, remoteManifest("remote", "http://"+rs.addr+"/mcp"))
		_, err := h.sup.Call(context.Background(), "remote_greet", []byte(`{"name":"x"}`))
		var rpc *RPCError
		switch {
		case c.up && (!errors.As(err, &rpc) || !strings.Contains(err.Error(), fmt.Sprintf("HTTP %d: %s", c.status, c.body))):
			t.Fatalf("HTTP %d %s: the call failed with %v; want the call's error, with the status and the body", c.status, c.body, err)
		case c.up && h.remoteFailed("remote"):
			t.Fatalf("HTTP %d: the connection was failed: %v", c.status, err)
		case !c.up && !errors.Is(err, ErrUnavailable):
			t.Fatalf("HTTP %d: the call failed with %v; want unavailable", c.status, err)
		case !c.up:
			h.poll("the capability down", func() bool { return h.status("remote").State != StateUp })
		}
	}
}

// sseServer serves the legacy HTTP+SSE transport with one tool, greet, and
// returns its event stream's URL. call answers each tools/call: the POST's
// status and body, and the event sent on the stream ("" for none, "ENDLESS"
// for an answer that never ends).
func sseServer(t *testing.T, call func(id string) (status int, body, event string)) string {
	out := make(chan string, 16)
	mux := http.NewServeMux()
	mux.HandleFunc("/sse", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		f := w.(http.Flusher)
		fmt.Fprint(w, "event: endpoint\ndata: /message\n\n")
		f.Flush()
		for {
			select {
			case <-r.Context().Done():
				return
			case m := <-out:
				if m != "ENDLESS" {
					fmt.Fprintf(w, "event: message\ndata: %s\n\n", m)
					f.Flush()
					continue
				}
				fmt.Fprint(w, "event: message\ndata: ")
				for chunk := []byte(strings.Repeat(" ", 64<<10)); r.Context().Err() == nil; {
					if _, err := w.Write(chunk); err != nil {
						return
					}
				}
				return
			}
		}
	})
	mux.HandleFunc("/message", func(w http.ResponseWriter, r *http.Request) {
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		b, _ := io.ReadAll(r.Body)
		json.Unmarshal(b, &msg)
		id := string(msg.ID)
		status, body, event := http.StatusAccepted, "", `{"jsonrpc":"2.0","id":`+id+`,"result":{}}`
		switch msg.Method {
		case "initialize":
			event = `{"jsonrpc":"2.0","id":` + id + `,"result":{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"x","version":"1"}}}`
		case "tools/list":
			event = `{"jsonrpc":"2.0","id":` + id + `,"result":{"tools":[{"name":"greet","description":"Greets.","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":true,"destructiveHint":false}}]}}`
		case "tools/call":
			status, body, event = call(id)
		}
		w.WriteHeader(status)
		io.WriteString(w, body)
		if len(msg.ID) > 0 && event != "" {
			out <- event
		}
	})
	l, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Skip(err)
	}
	srv := &httptest.Server{Listener: l, Config: &http.Server{Handler: mux}}
	srv.Start()
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close() })
	return "http://" + l.Addr().String() + "/sse"
}

func sseHarness(t *testing.T, url string) *harness {
	man := remoteManifest("remote", url)
	man.Transport = transportSSE
	h := remoteHarness(t, man)
	if _, ok := h.tool("remote_greet"); !ok {
		t.Fatalf("no tool: %+v", h.sup.Tools())
	}
	return h
}

// TestRemoteSSEEndlessAnswerIsCapped: over the legacy SSE transport the
// answers come on the event stream, which cappedBody does not bound: an answer
// that never ends is cut at the cap there, the stream ends, the call fails at
// once (not at its timeout) and the capability goes down, naming the cap.
func TestRemoteSSEEndlessAnswerIsCapped(t *testing.T) {
	h := sseHarness(t, sseServer(t, func(string) (int, string, string) { return http.StatusAccepted, "", "ENDLESS" }))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := h.sup.Call(ctx, "remote_greet", []byte(`{"name":"x"}`))
	if err == nil || ctx.Err() != nil || strings.Contains(err.Error(), "timeout") {
		t.Fatalf("an endless answer: %s, %v (deadline: %v); want a failure before the timeout", res, err, ctx.Err())
	}
	h.poll("the capability down, naming the cap", func() bool {
		st := h.status("remote")
		return st.State != StateUp && strings.Contains(st.LastError, "cap")
	})
}

// TestRemoteSSERefusalRestarts: over SSE a 400 may mean the server lost the
// session, which has no id a refusal could name (mcp-go's own SSE server
// answers "Invalid session ID"): the call is unavailable and the capability
// restarts, rather than fail every call while it stays up.
func TestRemoteSSERefusalRestarts(t *testing.T) {
	h := sseHarness(t, sseServer(t, func(string) (int, string, string) {
		return http.StatusBadRequest, "No transport found for sessionId", ""
	}))
	if _, err := h.sup.Call(context.Background(), "remote_greet", []byte(`{"name":"x"}`)); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("a 400 over SSE: %v; want unavailable", err)
	}
	if !h.remoteFailed("remote") {
		t.Fatal("a 400 over SSE left the connection up")
	}
}
