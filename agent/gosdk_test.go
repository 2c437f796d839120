package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboardhq/switchboard/store"
)

// The official Go SDK (a test-only dependency: the product never links it) is
// the client of these tests, negotiating 2026-07-28 the way its users' agents do.

// sdkWire is the Go SDK client's HTTP transport: it adds the credential and
// copies out every doorbell the server streams. The SDK has no handler for an
// extension's notification (it drops it), so the test reads the doorbell off the
// wire the SDK received it on.
type sdkWire struct {
	cred  string
	rings chan string // todo_id of each doorbell seen
	mu    sync.Mutex
	seen  []string // Mcp-Protocol-Version and Mcp-Session-Id of each request
}

func (w *sdkWire) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+w.cred)
	w.mu.Lock()
	w.seen = append(w.seen, r.Header.Get("Mcp-Protocol-Version")+"|"+r.Header.Get("Mcp-Session-Id"))
	w.mu.Unlock()
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err == nil && strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		resp.Body = &ringTap{ReadCloser: resp.Body, rings: w.rings}
	}
	return resp, err
}

// ringTap passes a stream through, noting each doorbell in it.
type ringTap struct {
	io.ReadCloser
	rings chan string
	line  []byte
}

func (t *ringTap) Read(p []byte) (int, error) {
	n, err := t.ReadCloser.Read(p)
	t.line = append(t.line, p[:n]...)
	for {
		i := bytes.IndexByte(t.line, '\n')
		if i < 0 {
			break
		}
		var msg struct {
			Method string `json:"method"`
			Params struct {
				Meta map[string]string `json:"meta"`
			} `json:"params"`
		}
		if data, ok := bytes.CutPrefix(t.line[:i], []byte("data: ")); ok && json.Unmarshal(data, &msg) == nil && msg.Method == ChannelMethod {
			t.rings <- msg.Params.Meta["todo_id"]
		}
		t.line = t.line[i+1:]
	}
	return n, err
}

// sdkConnect connects the Go SDK client with cred, declaring the claude/channel
// capability; listChanged receives a value on each tools/list_changed.
func (e *env) sdkConnect(cred string) (*sdk.ClientSession, *sdkWire, chan struct{}) {
	e.t.Helper()
	wire := &sdkWire{cred: cred, rings: make(chan string, 16)}
	listChanged := make(chan struct{}, 16)
	c := sdk.NewClient(&sdk.Implementation{Name: "go-sdk-worker", Version: "1"}, &sdk.ClientOptions{
		Capabilities: &sdk.ClientCapabilities{Experimental: map[string]any{"claude/channel": map[string]any{}}},
		ToolListChangedHandler: func(context.Context, *sdk.ToolListChangedRequest) {
			listChanged <- struct{}{}
		},
	})
	cs, err := c.Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: e.url, HTTPClient: &http.Client{Transport: wire}}, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { cs.Close() })
	return cs, wire, listChanged
}

func sdkCall(t *testing.T, cs *sdk.ClientSession, tool string, args map[string]any, out any) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	if res.IsError {
		t.Fatalf("%s: %s", tool, res.StructuredContent)
	}
	if out != nil {
		b, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatal(err)
		}
	}
}

func waitRing(t *testing.T, rings chan string, todo int64) {
	t.Helper()
	for {
		select {
		case id := <-rings:
			if id == fmt.Sprint(todo) {
				return
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no doorbell for todo %d", todo)
		}
	}
}

// The Go SDK negotiates 2026-07-28 (no session, no handshake), learns the lease
// contract from server/discover, receives the doorbell on its listen stream and
// the lease-default change as a list change, and drains the todo.
func TestGoSDKStatelessDrain(t *testing.T) {
	e := newEnv(t)
	_, cred := e.endpoint("gosdk", []string{"inbox"}, nil)
	cs, wire, listChanged := e.sdkConnect(cred)
	init := cs.InitializeResult()
	if init.ProtocolVersion != "2026-07-28" || !strings.Contains(init.Instructions, "Lease contract") {
		t.Fatalf("negotiated %q; instructions %q", init.ProtocolVersion, init.Instructions)
	}
	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil || len(tools.Tools) == 0 {
		t.Fatalf("tools/list: %v", err)
	}

	waitListener(t, e)
	todo := e.addTodo("inbox", `{"n":1}`)
	waitRing(t, wire.rings, todo.ID)
	var claim struct {
		Todo struct {
			ID int64 `json:"id"`
		} `json:"todo"`
		LeaseSeq int64 `json:"lease_seq"`
	}
	sdkCall(t, cs, VerbClaimNext, map[string]any{}, &claim)
	if claim.Todo.ID != todo.ID {
		t.Fatalf("claimed %d, want %d", claim.Todo.ID, todo.ID)
	}
	sdkCall(t, cs, VerbComplete, map[string]any{"todo_id": todo.ID, "lease_seq": claim.LeaseSeq}, nil)
	if got := e.todo(todo.ID); got.State != store.StateDone {
		t.Fatalf("todo is %s, want done", got.State)
	}

	sdkCall(t, cs, VerbSetDefaultLease, map[string]any{"default_lease_ttl_seconds": 90}, nil)
	select {
	case <-listChanged:
	case <-time.After(10 * time.Second):
		t.Fatal("no tools/list_changed after set_default_lease")
	}
	wire.mu.Lock()
	defer wire.mu.Unlock()
	for _, s := range wire.seen {
		if s != "2026-07-28|" {
			t.Fatalf("a request went out as %q (version|session)", s)
		}
	}
}

// waitListener waits until a subscriptions/listen stream is open.
func waitListener(t *testing.T, e *env) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for len(e.ag.listening.list()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the Go SDK never opened subscriptions/listen")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// One endpoint, two revisions: a 2025-11-25 session with its GET stream and a
// 2026-07-28 listener both get a todo's doorbell.
func TestMixedRevisionsBothRing(t *testing.T) {
	e := newEnv(t)
	_, cred := e.endpoint("mixed", []string{"inbox"}, nil)
	old := e.dial(cred, true)
	_, wire, _ := e.sdkConnect(cred)
	waitListener(t, e)
	todo := e.addTodo("inbox", `{}`)
	waitRing(t, wire.rings, todo.ID)
	n := waitNote(t, old, ChannelMethod)
	if meta, _ := n.Params.AdditionalFields["meta"].(map[string]any); meta["todo_id"] != fmt.Sprint(todo.ID) {
		t.Fatalf("session's ring: %+v", n.Params.AdditionalFields)
	}
	if got := e.todo(todo.ID); got.State != store.StatePending {
		t.Fatalf("todo %s", got.State)
	}
}
