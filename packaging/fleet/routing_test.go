package fleet

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// A session lives in the process that opened it. Sent to another process, its
// next request is answered 404, as the MCP spec prescribes for a session the
// server does not know; the official Go SDK takes that as the session gone
// (ErrSessionMissing) and its user connects again, on the process it now
// reaches, and goes on.
func TestForeignSessionIs404AndClientStartsOver(t *testing.T) {
	f := startFleet(t, "")
	var at atomic.Value
	at.Store(f.a)
	to := func() string { return at.Load().(string) }
	cs := f.session(t, f.a, to)
	if id := cs.ID(); !strings.HasPrefix(id, "sb-a.") {
		t.Fatalf("process a minted session id %q, want it to start with its route sb-a.", id)
	}
	if err := call(cs, "list_webhooks", map[string]any{}); err != nil {
		t.Fatalf("on its own process: %v", err)
	}

	// The balancer now sends it to b (a died, say).
	at.Store(f.b)
	err := call(cs, "list_webhooks", map[string]any{})
	if !errors.Is(err, sdk.ErrSessionMissing) {
		t.Fatalf("the session's request on process b: %v, want the Go SDK's ErrSessionMissing (a 404)", err)
	}
	again := f.session(t, f.a, to)
	if id := again.ID(); !strings.HasPrefix(id, "sb-b.") {
		t.Fatalf("the new session %q was not opened on process b", id)
	}
	if err := call(again, "list_webhooks", map[string]any{}); err != nil {
		t.Fatalf("the new session on process b: %v", err)
	}

	// The raw answer, for clients other than the Go SDK: 404 and why.
	req, _ := http.NewRequest(http.MethodPost, f.b+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":7,"method":"tools/list"}`))
	req.Header.Set("Authorization", "Bearer "+f.cred)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	req.Header.Set("Mcp-Session-Id", cs.ID())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(body), "initialize a new one") {
		t.Fatalf("a's session on b: %d %q, want 404 telling the client to initialize again", resp.StatusCode, body)
	}
}

// What needs no stickiness: a stateless 2026-07-28 client's calls, a webhook
// delivery, and the board, whose sessions are rows in the database: signed in on
// one process, the operator is signed in on the other.
func TestWhatNeedsNoStickiness(t *testing.T) {
	f := startFleet(t, "")
	for _, base := range []string{f.a, f.b} {
		if err := call(f.stateless(t, base), "list_webhooks", map[string]any{}); err != nil {
			t.Fatalf("stateless call at %s: %v", base, err)
		}
		if code := f.deliver(t, base, "d-"+base[len(base)-5:]); code != http.StatusAccepted {
			t.Fatalf("delivery at %s: %d", base, code)
		}
	}
	browser := f.login(t, f.a)
	resp, err := browser.Get(f.b + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Request.URL.Path == "/login" {
		t.Fatalf("signed in on a, the board on b: %d at %s", resp.StatusCode, resp.Request.URL)
	}
}
