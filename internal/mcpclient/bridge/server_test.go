package bridge

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// seen is one request as it reached the MCP server.
type seen struct {
	method      string // HTTP method
	rpcMethod   string // JSON-RPC method of a POST
	session     string
	version     string
	accept      string
	lastEventID string
	mcpMethod   string // SEP-2243 headers (2026-07-28 on)
	mcpName     string
	paramQueue  string
}

// getConn is one notification-stream connection, which a test may drop.
type getConn struct {
	session     string
	lastEventID string
	// streaming closes once the server answered 200: from then on it delivers
	// notifications to this connection. (With an event store, mcp-go v1.2.1
	// only records, and never sends, what a new stream gets before that.)
	streaming chan struct{}
	drop      context.CancelFunc
	ended     chan struct{}
}

// streamWriter tells a getConn when the server starts the event stream.
type streamWriter struct {
	http.ResponseWriter
	once      sync.Once
	streaming chan struct{}
}

func (w *streamWriter) WriteHeader(status int) {
	w.ResponseWriter.WriteHeader(status)
	if status == http.StatusOK {
		w.once.Do(func() { close(w.streaming) })
	}
}

func (w *streamWriter) Flush() { w.ResponseWriter.(http.Flusher).Flush() }

// mcpServer is a real mcp-go Streamable HTTP server behind a bearer-token check,
// with an echo tool, recording what it receives.
type mcpServer struct {
	mcp        *server.MCPServer
	url        string
	registered chan string // session IDs as the server registers them
	callers    chan string // session IDs of echo calls
	gets       chan *getConn

	mu   sync.Mutex
	seen []seen
}

func newMCPServer(t *testing.T, opts ...server.StreamableHTTPOption) *mcpServer {
	t.Helper()
	s := &mcpServer{
		registered: make(chan string, 16),
		callers:    make(chan string, 16),
		gets:       make(chan *getConn, 16),
	}
	hooks := &server.Hooks{}
	hooks.AddOnRegisterSession(func(_ context.Context, cs server.ClientSession) {
		s.registered <- cs.SessionID()
	})
	s.mcp = server.NewMCPServer("switchboard-test", "1.0.0",
		server.WithToolCapabilities(true), server.WithHooks(hooks))
	s.mcp.AddTool(mcp.NewTool("echo", mcp.WithString("text", mcp.Required())),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if cs := server.ClientSessionFromContext(ctx); cs != nil {
				s.callers <- cs.SessionID()
			}
			return mcp.NewToolResultText(req.GetString("text", "")), nil
		})
	// A tool whose queue parameter must also travel in a header from
	// 2026-07-28 on; the server rejects calls whose header is missing.
	s.mcp.AddTool(mcp.NewToolWithRawSchema("route", "routes by queue", json.RawMessage(`{
		"type": "object",
		"properties": {"queue": {"type": "string", "x-mcp-header": "Queue"}}
	}`)), func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("routed to " + req.GetString("queue", "")), nil
	})
	streamable := server.NewStreamableHTTPServer(s.mcp, opts...)

	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+credential {
			http.Error(w, "invalid credential", http.StatusUnauthorized)
			return
		}
		rec := seen{
			method:      r.Method,
			session:     r.Header.Get("Mcp-Session-Id"),
			version:     r.Header.Get("Mcp-Protocol-Version"),
			accept:      r.Header.Get("Accept"),
			lastEventID: r.Header.Get("Last-Event-ID"),
			mcpMethod:   r.Header.Get("Mcp-Method"),
			mcpName:     r.Header.Get("Mcp-Name"),
			paramQueue:  r.Header.Get("Mcp-Param-Queue"),
		}
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			var m struct {
				Method string `json:"method"`
			}
			_ = json.Unmarshal(body, &m)
			rec.rpcMethod = m.Method
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		s.mu.Lock()
		s.seen = append(s.seen, rec)
		s.mu.Unlock()

		if r.Method == http.MethodGet {
			ctx, drop := context.WithCancel(r.Context())
			conn := &getConn{
				session: rec.session, lastEventID: rec.lastEventID,
				streaming: make(chan struct{}), drop: drop, ended: make(chan struct{}),
			}
			defer close(conn.ended)
			s.gets <- conn
			r = r.WithContext(ctx)
			w = &streamWriter{ResponseWriter: w, streaming: conn.streaming}
		}
		streamable.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	s.url = hs.URL + "/mcp"
	return s
}

func (s *mcpServer) requests() []seen {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]seen(nil), s.seen...)
}

// ring sends the doorbell for todo to one session, as Switchboard's agent
// package does.
//
// mcp-go v1.2.1 can lose a notification sent right after a POST was answered:
// that POST's notification forwarder goroutine may not have exited yet and take
// it off the session's channel, at most one each. A doorbell may be lost by
// design (the queue is the ledger), but a test must not flake, so ring once
// more than the POSTs the server has handled: at least one copy reaches the
// notification stream, and doorbell waits for the first.
func (s *mcpServer) ring(t *testing.T, sessionID, todo string) {
	t.Helper()
	posts := 0
	for _, r := range s.requests() {
		if r.method == http.MethodPost {
			posts++
		}
	}
	for range posts + 1 {
		err := s.mcp.SendNotificationToSpecificClient(sessionID, "notifications/claude/channel", map[string]any{
			"content": "todo " + todo + " is waiting on builds",
			"meta":    map[string]any{"queue": "builds", "todo_id": todo},
		})
		if err != nil {
			t.Fatalf("send doorbell: %v", err)
		}
	}
}

// recv waits for the next value on ch or fails the test.
func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(testTimeout):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

// waitStreaming waits until a notification stream for session id is being
// served, and returns it.
func waitStreaming(t *testing.T, s *mcpServer, id string) *getConn {
	t.Helper()
	for {
		conn := recv(t, s.gets, "a notification stream for "+id)
		if conn.session != id {
			continue
		}
		select {
		case <-conn.streaming:
			return conn
		case <-conn.ended:
			// refused or dropped; the bridge will try again
		}
	}
}

// waitRegistered waits until the server has registered session id, so that
// notifications can be addressed to it.
func waitRegistered(t *testing.T, s *mcpServer, id string) {
	t.Helper()
	for {
		if got := recv(t, s.registered, "session registration"); got == id {
			return
		}
	}
}
