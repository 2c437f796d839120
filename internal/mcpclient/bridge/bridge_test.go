package bridge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/switchboardhq/switchboard/internal/testkit"
)

const credential = "sb_test_credential_0123456789"

// testTimeout bounds how long a test waits for something that should happen;
// it only turns a hang into a failure and is never a speed assertion.
const testTimeout = 30 * time.Second

// bridged is an mcp-go client that reaches the server only through a Bridge
// over a pair of pipes, the way an agent's stdio client would.
type bridged struct {
	client  *client.Client
	notes   chan mcp.JSONRPCNotification
	runErr  chan error
	logs    *testkit.LockedBuffer
	closeIn func()
}

func startBridged(t *testing.T, url string, clientOpts ...client.ClientOption) *bridged {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	logs := &testkit.LockedBuffer{}
	b := New(url, credential, Options{
		Logger:     slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		MinBackoff: 10 * time.Millisecond,
		MaxBackoff: 100 * time.Millisecond,
	})
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	runErr := make(chan error, 1)
	go func() {
		err := b.Run(ctx, inR, outW)
		outW.Close()
		runErr <- err
	}()

	c := client.NewClient(transport.NewIO(outR, inW, io.NopCloser(strings.NewReader(""))), clientOpts...)
	notes := make(chan mcp.JSONRPCNotification, 16)
	c.OnNotification(func(n mcp.JSONRPCNotification) { notes <- n })
	if err := c.Start(ctx); err != nil {
		t.Fatalf("start client: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return &bridged{client: c, notes: notes, runErr: runErr, logs: logs, closeIn: func() { inW.Close() }}
}

func (b *bridged) initialize(t *testing.T) *mcp.InitializeResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	res, err := b.client.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{
		ClientInfo: mcp.Implementation{Name: "stdio-agent", Version: "1"},
	}})
	if err != nil {
		t.Fatalf("initialize through the bridge: %v", err)
	}
	return res
}

func (b *bridged) echo(t *testing.T, text string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	res, err := b.client.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{
		Name: "echo", Arguments: map[string]any{"text": text},
	}})
	if err != nil {
		t.Fatalf("call echo through the bridge: %v", err)
	}
	if len(res.Content) != 1 {
		t.Fatalf("echo returned %d content items, want 1", len(res.Content))
	}
	if got, ok := res.Content[0].(mcp.TextContent); !ok || got.Text != text {
		t.Fatalf("echo returned %#v, want text %q", res.Content[0], text)
	}
}

// doorbell waits for a notifications/claude/channel for todo and checks it
// arrived intact. Copies of earlier doorbells (see ring) are passed over.
func (b *bridged) doorbell(t *testing.T, todo string) {
	t.Helper()
	for {
		n := recv(t, b.notes, "the doorbell for todo "+todo)
		meta, _ := n.Params.AdditionalFields["meta"].(map[string]any)
		if n.Method != "notifications/claude/channel" || meta["todo_id"] != todo {
			continue
		}
		if meta["queue"] != "builds" {
			t.Fatalf("doorbell meta = %v, want queue builds", meta)
		}
		if content, _ := n.Params.AdditionalFields["content"].(string); content != "todo "+todo+" is waiting on builds" {
			t.Fatalf("doorbell content = %q", content)
		}
		return
	}
}

// finish closes the client's stdin and returns what Run returned.
func (b *bridged) finish(t *testing.T) error {
	t.Helper()
	b.closeIn()
	return recv(t, b.runErr, "Run to return")
}

func TestBridgeRelaysToolCallAndDoorbell(t *testing.T) {
	srv := newMCPServer(t)
	b := startBridged(t, srv.url, client.WithLegacyProtocolOnly())

	init := b.initialize(t)
	b.echo(t, "hello through stdio")
	sessionID := recv(t, srv.callers, "the echo call")
	if sessionID == "" {
		t.Fatal("the server saw the tool call without a session")
	}
	waitRegistered(t, srv, sessionID)
	waitStreaming(t, srv, sessionID)
	srv.ring(t, sessionID, "42")
	b.doorbell(t, "42")

	if err := b.finish(t); err != nil {
		t.Fatalf("Run after stdin EOF = %v, want nil", err)
	}

	var call, get, del *seen
	reqs := srv.requests()
	for i := range reqs {
		switch r := &reqs[i]; {
		case r.rpcMethod == "tools/call":
			call = r
		case r.method == http.MethodGet && get == nil:
			get = r
		case r.method == http.MethodDelete:
			del = r
		}
	}
	if call == nil || get == nil || del == nil {
		t.Fatalf("server saw tools/call %v, GET %v, DELETE %v; want all three", call != nil, get != nil, del != nil)
	}
	if call.session != sessionID || call.version != init.ProtocolVersion {
		t.Errorf("tools/call sent session %q version %q, want %q %q", call.session, call.version, sessionID, init.ProtocolVersion)
	}
	if !strings.Contains(call.accept, "application/json") || !strings.Contains(call.accept, "text/event-stream") {
		t.Errorf("tools/call Accept = %q, want application/json and text/event-stream", call.accept)
	}
	if get.session != sessionID || get.accept != "text/event-stream" {
		t.Errorf("GET sent session %q Accept %q, want %q text/event-stream", get.session, get.accept, sessionID)
	}
	if del.session != sessionID {
		t.Errorf("DELETE sent session %q, want %q", del.session, sessionID)
	}
	if strings.Contains(b.logs.String(), credential) {
		t.Error("the credential appears in the bridge's log")
	}
}

func TestBridgeResumesNotificationStream(t *testing.T) {
	srv := newMCPServer(t, server.WithEventStore(server.NewInMemoryEventStore()))
	b := startBridged(t, srv.url, client.WithLegacyProtocolOnly())
	b.initialize(t)

	b.echo(t, "who am I")
	sessionID := recv(t, srv.callers, "the echo call")
	waitRegistered(t, srv, sessionID)
	first := waitStreaming(t, srv, sessionID)
	srv.ring(t, sessionID, "1")
	b.doorbell(t, "1")

	// Drop the stream server-side and ring while no connection is attached:
	// the bridge must come back and pick up what it missed.
	first.drop()
	recv(t, first.ended, "the dropped stream to end")
	srv.ring(t, sessionID, "2")
	b.doorbell(t, "2")

	second := recv(t, srv.gets, "the reconnected stream")
	if second.lastEventID == "" {
		t.Error("the bridge reconnected without Last-Event-ID")
	}
	if err := b.finish(t); err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}
}

func TestBridgeRenewsSessionTheServerForgot(t *testing.T) {
	sessions := &server.InsecureStatefulSessionIdManager{}
	srv := newMCPServer(t, server.WithSessionIdManager(sessions))
	b := startBridged(t, srv.url, client.WithLegacyProtocolOnly())
	b.initialize(t)
	b.echo(t, "before")
	old := recv(t, srv.callers, "the first echo call")

	// What a restarted server looks like to the bridge: the session is gone.
	if _, err := sessions.Terminate(old); err != nil {
		t.Fatalf("terminate session: %v", err)
	}
	b.echo(t, "after")
	renewed := recv(t, srv.callers, "the second echo call")
	if renewed == old || renewed == "" {
		t.Fatalf("second call ran in session %q, want a new one (old %q)", renewed, old)
	}

	// The notification stream follows the new session.
	waitRegistered(t, srv, renewed)
	waitStreaming(t, srv, renewed)
	srv.ring(t, renewed, "7")
	b.doorbell(t, "7")

	inits := 0
	for _, r := range srv.requests() {
		if r.rpcMethod == "initialize" {
			inits++
		}
	}
	if inits != 2 {
		t.Errorf("server saw %d initialize requests, want 2 (the client's and the renewal)", inits)
	}
	if err := b.finish(t); err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}
}

func TestBridgeModernProtocol(t *testing.T) {
	srv := newMCPServer(t)
	b := startBridged(t, srv.url) // mcp-go's client prefers 2026-07-28 (stateless)
	res := b.initialize(t)
	if !mcp.IsModernProtocol(res.ProtocolVersion) {
		t.Fatalf("the client fell back to %s: the bridge broke 2026-07-28 negotiation", res.ProtocolVersion)
	}
	b.echo(t, "stateless")

	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if _, err := b.client.ListTools(ctx, mcp.ListToolsRequest{}); err != nil {
		t.Fatalf("list tools: %v", err)
	}
	routed, err := b.client.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{
		Name: "route", Arguments: map[string]any{"queue": "builds"},
	}})
	if err != nil {
		t.Fatalf("call route: %v", err)
	}
	if routed.IsError || len(routed.Content) != 1 || routed.Content[0].(mcp.TextContent).Text != "routed to builds" {
		t.Fatalf("route returned %+v", routed)
	}

	var calls int
	for _, r := range srv.requests() {
		if r.method != http.MethodPost {
			t.Errorf("a 2026-07-28 session sent %s; it has only POST", r.method)
			continue
		}
		if r.version != res.ProtocolVersion || r.mcpMethod != r.rpcMethod {
			t.Errorf("%s sent Mcp-Protocol-Version %q Mcp-Method %q, want %q %q",
				r.rpcMethod, r.version, r.mcpMethod, res.ProtocolVersion, r.rpcMethod)
		}
		if r.rpcMethod == "tools/call" {
			calls++
			if r.mcpName != "echo" && (r.mcpName != "route" || r.paramQueue != "builds") {
				t.Errorf("tools/call sent Mcp-Name %q Mcp-Param-Queue %q", r.mcpName, r.paramQueue)
			}
		}
	}
	if calls != 2 {
		t.Errorf("server saw %d tool calls, want 2", calls)
	}
	if err := b.finish(t); err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}
}

func TestBridgeUnauthorized(t *testing.T) {
	srv := newMCPServer(t)
	var out bytes.Buffer
	logs := &testkit.LockedBuffer{}
	const wrong = "sb_wrong_credential_987654"
	b := New(srv.url, wrong, Options{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	in := strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"a","version":"1"}}}` + "\n")

	err := b.Run(context.Background(), in, &out)
	if !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("Run = %v, want ErrUnauthorized", err)
	}
	var answer struct {
		ID    int `json:"id"`
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	line, _, _ := strings.Cut(out.String(), "\n")
	if err := json.Unmarshal([]byte(line), &answer); err != nil {
		t.Fatalf("stdout %q is not a JSON-RPC answer: %v", out.String(), err)
	}
	if answer.ID != 1 || !strings.Contains(answer.Error.Message, "401") {
		t.Errorf("answer = %+v, want an error for id 1 that names HTTP 401", answer)
	}
	for _, where := range []string{out.String(), logs.String(), err.Error()} {
		if strings.Contains(where, wrong) {
			t.Errorf("the credential leaked: %q", where)
		}
	}
	for _, r := range srv.requests() {
		t.Errorf("the server handled %s %s with a wrong credential", r.method, r.rpcMethod)
	}
}

// A stdin line that is JSON but not one message (a batch) is answered Invalid
// Request, and one that is not JSON Parse error; neither reaches the server.
func TestBridgeRefusesLinesThatAreNotAMessage(t *testing.T) {
	srv := newMCPServer(t)
	var out bytes.Buffer
	b := New(srv.url, credential, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	// A request whose id is null (MCP forbids it) is refused too: relayed as a
	// notification, its refusal by the server reached no one and its client
	// waited for an answer without end.
	in := strings.NewReader(`[{"jsonrpc":"2.0","id":1,"method":"ping"}]` + "\n" + "not json\n" +
		`{"jsonrpc":"2.0","id":null,"method":"ping"}` + "\n" + "5\n" + `{"jsonrpc":"2.0","id":2,"method":5}` + "\n")
	if err := b.Run(context.Background(), in, &out); err != nil {
		t.Fatalf("Run = %v", err)
	}
	var codes []int
	var messages []string
	for line := range strings.Lines(out.String()) {
		var answer struct {
			ID    json.RawMessage `json:"id"`
			Error struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(line), &answer); err != nil || string(answer.ID) != "null" {
			t.Fatalf("stdout line %q is not an error for id null: %v", line, err)
		}
		codes = append(codes, answer.Error.Code)
		messages = append(messages, answer.Error.Message)
	}
	if !slices.Equal(codes, []int{-32600, -32700, -32600, -32600, -32600}) {
		t.Errorf("codes = %v, want [-32600 -32700 -32600 -32600 -32600] (Invalid Request for the batch, Parse error for what is not JSON, Invalid Request for the null id, the number and the number method)", codes)
	}
	// Only the array is told about batches.
	for i, m := range messages {
		if batch := strings.Contains(m, "batch"); batch != (i == 0) {
			t.Errorf("answer %d: %q", i, m)
		}
	}
	for _, r := range srv.requests() {
		t.Errorf("the server handled %s %s", r.method, r.rpcMethod)
	}
}

// Behind a load balancer that does not keep a session on the process that
// opened it, every session's next request reaches another process, whose 404
// says so: the bridge passes that on, in the log and in the error its client
// gets, rather than a bare status.
func TestBridgeSaysWhyTheServerForgotTheSession(t *testing.T) {
	const why = `session was opened by the process with session route "a", not this one ("b")`
	var opened atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method != http.MethodPost:
			w.WriteHeader(http.StatusMethodNotAllowed)
		case r.Header.Get("Mcp-Session-Id") != "":
			http.Error(w, why, http.StatusNotFound)
		default: // an initialize
			w.Header().Set("Mcp-Session-Id", fmt.Sprintf("sb-a.%d", opened.Add(1)))
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"s","version":"1"}}}`)
		}
	}))
	t.Cleanup(srv.Close)
	var out bytes.Buffer
	logs := &testkit.LockedBuffer{}
	b := New(srv.URL, credential, Options{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	in := strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"a","version":"1"}}}` + "\n" +
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}` + "\n")
	if err := b.Run(context.Background(), in, &out); err != nil {
		t.Fatalf("Run = %v", err)
	}
	var answer struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	for line := range strings.Lines(out.String()) {
		if strings.Contains(line, `"id":2`) {
			json.Unmarshal([]byte(line), &answer)
		}
	}
	if !strings.Contains(answer.Error.Message, "HTTP 404") || !strings.Contains(answer.Error.Message, why) {
		t.Errorf("the client was told %q, want the server's 404 and why", answer.Error.Message)
	}
	if !strings.Contains(logs.String(), "not this one") {
		t.Errorf("the log does not say what the server said:\n%s", logs.String())
	}
}

// TestBridgeAnswers covers how one POST answer becomes stdout lines, including
// the answers the bridge makes up when the server gives none.
func TestBridgeAnswers(t *testing.T) {
	const request = `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"x"}}`
	tests := []struct {
		name    string
		handler http.HandlerFunc
		want    []string // stdout lines; a line ending in "*" is a prefix
	}{
		{
			name: "SSE answer with a notification first, data split over lines",
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				io.WriteString(w, "event: message\ndata: {\"jsonrpc\": \"2.0\",\ndata:  \"method\": \"notifications/progress\"}\n\n")
				io.WriteString(w, ": keep-alive\n\nevent: message\nid: 9\ndata: {\"jsonrpc\":\"2.0\",\"id\":5,\"result\":{}}\n\n")
			},
			want: []string{
				`{"jsonrpc":"2.0","method":"notifications/progress"}`,
				`{"jsonrpc":"2.0","id":5,"result":{}}`,
			},
		},
		{
			name: "JSON answer is compacted to one line",
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				io.WriteString(w, "{\n  \"jsonrpc\": \"2.0\",\n  \"id\": 5,\n  \"result\": {\"ok\": true}\n}\n")
			},
			want: []string{`{"jsonrpc":"2.0","id":5,"result":{"ok":true}}`},
		},
		{
			name: "HTTP error becomes a JSON-RPC error for the request",
			handler: func(w http.ResponseWriter, r *http.Request) {
				http.Error(w, "database is locked", http.StatusServiceUnavailable)
			},
			want: []string{`{"jsonrpc":"2.0","id":5,"error":{"code":-32000,"message":"switchboard bridge: the server answered HTTP 503: database is locked"}}`},
		},
		{
			name: "a stream that ends without the answer",
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				io.WriteString(w, "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\"}\n\n")
			},
			want: []string{
				`{"jsonrpc":"2.0","method":"notifications/message"}`,
				`{"jsonrpc":"2.0","id":5,"error":{"code":-32000,"message":"switchboard bridge: the server closed the response without answering"}}`,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hs := httptest.NewServer(tt.handler)
			defer hs.Close()
			var out bytes.Buffer
			err := New(hs.URL, credential, Options{}).Run(context.Background(), strings.NewReader(request+"\n"), &out)
			if err != nil {
				t.Fatalf("Run = %v", err)
			}
			got := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("stdout lines:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}
