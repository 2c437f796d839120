package oauth_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// mcpRequest sends one MCP message of the session-ful revision with a bearer
// and, when sid is set, a session id; GET opens the session's stream.
func (r *rig) mcpRequest(method, bearer, sid, body string) *http.Response {
	r.t.Helper()
	req, _ := http.NewRequest(method, r.base+"/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+bearer)
	req.Header.Set("MCP-Protocol-Version", "2025-06-18")
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	return res
}

// TestGrantSessionBinding: a session belongs to the grant whose token opened
// it, not only to the grant's endpoint. Another grant's token of the same
// endpoint (another client) may not use it, and revoking the grant ends it,
// open stream included, at the next revalidation: a revoked grant's client
// does not go on hearing the endpoint's doorbells.
func TestGrantSessionBinding(t *testing.T) {
	r := newRig(t, nil)
	verifier, challenge := pkce("s")
	a := r.exchange(r.register(cb), verifier, challenge)["access_token"].(string)
	b := r.exchange(r.register(cb), verifier, challenge)["access_token"].(string)
	res := r.mcpRequest(http.MethodPost, a, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	sid := res.Header.Get("Mcp-Session-Id")
	if res.StatusCode != http.StatusOK || sid == "" {
		t.Fatalf("initialize with grant A's token: %d, session %q", res.StatusCode, sid)
	}
	ping := `{"jsonrpc":"2.0","id":2,"method":"ping"}`
	res = r.mcpRequest(http.MethodPost, b, sid, ping)
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusForbidden {
		t.Fatalf("grant B's token on grant A's session: %d, want 403", res.StatusCode)
	}
	stream := r.mcpRequest(http.MethodGet, a, sid, "")
	defer stream.Body.Close()
	if stream.StatusCode != http.StatusOK {
		t.Fatalf("grant A's stream: %d", stream.StatusCode)
	}
	grants, err := r.st.OAuthGrants(context.Background(), r.endpoint.ID)
	if err != nil || len(grants) != 2 {
		t.Fatalf("grants: %v %v", grants, err)
	}
	if err := r.st.RevokeOAuthGrant(context.Background(), grants[1].ID, "human:1"); err != nil { // A, the older
		t.Fatal(err)
	}
	r.agent.Revalidate(context.Background())
	ended := make(chan struct{})
	go func() { io.Copy(io.Discard, stream.Body); close(ended) }()
	select {
	case <-ended:
	case <-time.After(30 * time.Second): // a hang guard, not a measure: the stream must end
		t.Fatal("grant A's stream is still open after its grant was revoked and sessions revalidated")
	}
	res = r.mcpRequest(http.MethodPost, b, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("grant B still works: %d", res.StatusCode)
	}
}
