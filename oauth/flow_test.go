package oauth_test

import (
	"context"
	"encoding/json"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/switchboardhq/switchboard/internal/mcpclient"
	"github.com/switchboardhq/switchboard/store"
)

// TestOAuthFlow is the whole flow a hosted agent goes through, driven from Go
// over real HTTP: the 401 names the metadata, the metadata names the
// endpoints, the client registers, the operator consents on the board, the
// code becomes tokens, the token drains a todo through a real MCP client, a
// refresh works and rotates, and a revoked grant stops the token.
func TestOAuthFlow(t *testing.T) {
	r := newRig(t, nil)
	ctx := context.Background()

	status, hdr := r.mcpStatus("")
	want := `resource_metadata="` + r.base + `/.well-known/oauth-protected-resource"`
	if status != http.StatusUnauthorized || !strings.Contains(hdr.Get("WWW-Authenticate"), want) {
		t.Fatalf("/mcp without a credential: %d %q, want 401 naming %s", status, hdr.Get("WWW-Authenticate"), want)
	}
	var prm, asm map[string]any
	getJSON(t, r.base+"/.well-known/oauth-protected-resource", &prm)
	if prm["resource"] != r.base+"/mcp" || prm["authorization_servers"].([]any)[0] != r.base {
		t.Fatalf("protected resource metadata: %v", prm)
	}
	getJSON(t, r.base+"/.well-known/oauth-authorization-server", &asm)
	if asm["issuer"] != r.base || asm["registration_endpoint"] != r.base+"/oauth/register" ||
		asm["code_challenge_methods_supported"].([]any)[0] != "S256" || asm["client_id_metadata_document_supported"] != true {
		t.Fatalf("authorization server metadata: %v", asm)
	}

	redirect := "http://127.0.0.1:9/callback"
	client := r.register(redirect)
	verifier, challenge := pkce("abc")
	res, page := r.do(http.MethodGet, "/oauth/authorize?"+r.authorizeQuery(client, redirect, challenge).Encode(), nil, r.session)
	for _, s := range []string{"Test Agent", "127.0.0.1:9", "not verified", "worker"} {
		if !strings.Contains(page, s) {
			t.Fatalf("the consent page does not show %q", s)
		}
	}
	if csp := res.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "frame-ancestors 'none'") {
		t.Fatalf("consent page CSP %q lacks frame-ancestors 'none'", csp)
	}
	code := r.code(r.authorizeQuery(client, redirect, challenge))

	status, toks := r.token(url.Values{"grant_type": {"authorization_code"}, "code": {code}, "code_verifier": {verifier},
		"redirect_uri": {redirect}, "client_id": {client}, "resource": {r.base + "/mcp"}})
	if status != http.StatusOK || toks["token_type"] != "Bearer" {
		t.Fatalf("token: %d %v", status, toks)
	}
	access, refresh := toks["access_token"].(string), toks["refresh_token"].(string)

	// The token drains a todo as the endpoint it was granted.
	if _, err := r.st.AddTodo(ctx, store.NewTodo{Queue: "jobs", Payload: `{"n":1}`, CreatedBy: "system"}); err != nil {
		t.Fatal(err)
	}
	drain(t, r.base+"/mcp", access)

	// A refresh gives new tokens; the used refresh token does not work again.
	status, again := r.token(url.Values{"grant_type": {"refresh_token"}, "refresh_token": {refresh}, "client_id": {client}})
	if status != http.StatusOK || again["access_token"] == access {
		t.Fatalf("refresh: %d %v", status, again)
	}
	if s, _ := r.mcpStatus(again["access_token"].(string)); s != http.StatusOK {
		t.Fatalf("/mcp with the refreshed token: %d", s)
	}

	grants, err := r.st.OAuthGrants(ctx, r.endpoint.ID)
	if err != nil || len(grants) != 1 || grants[0].ClientName != "Test Agent" || grants[0].LastUsedAt == nil {
		t.Fatalf("grants of the endpoint: %+v %v", grants, err)
	}
	if err := r.st.RevokeOAuthGrant(ctx, grants[0].ID, "human:1"); err != nil {
		t.Fatal(err)
	}
	if s, h := r.mcpStatus(again["access_token"].(string)); s != http.StatusUnauthorized || !strings.Contains(h.Get("WWW-Authenticate"), "invalid_token") {
		t.Fatalf("/mcp with a revoked grant's token: %d %q", s, h.Get("WWW-Authenticate"))
	}
	if status, _ := r.token(url.Values{"grant_type": {"refresh_token"}, "refresh_token": {again["refresh_token"].(string)},
		"client_id": {client}}); status != http.StatusBadRequest {
		t.Fatalf("refresh of a revoked grant: %d", status)
	}
	for _, tok := range []string{access, refresh, code, verifier} {
		if strings.Contains(r.logged(), tok) {
			t.Fatal("a code, token or verifier is in the log")
		}
	}
}

// drain claims and completes the one todo on jobs through a real MCP client.
func drain(t *testing.T, mcpURL, token string) {
	t.Helper()
	ctx := context.Background()
	c, _, err := mcpclient.Dial(ctx, mcpURL, token, mcpclient.DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	res, err := c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "claim_next",
		Arguments: map[string]any{"queues": []string{"jobs"}}}})
	if err != nil || res.IsError {
		t.Fatalf("claim_next: %v %+v", err, res)
	}
	var claimed struct {
		Todo struct {
			ID       int64 `json:"id"`
			LeaseSeq int64 `json:"lease_seq"`
		} `json:"todo"`
	}
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &claimed); err != nil || claimed.Todo.ID == 0 {
		t.Fatalf("claim_next answered %s", b)
	}
	res, err = c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "complete",
		Arguments: map[string]any{"todo_id": claimed.Todo.ID, "lease_seq": claimed.Todo.LeaseSeq}}})
	if err != nil || res.IsError {
		t.Fatalf("complete: %v %+v", err, res)
	}
}

func getJSON(t *testing.T, u string, v any) {
	t.Helper()
	res, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d", u, res.StatusCode)
	}
	if err := json.NewDecoder(res.Body).Decode(v); err != nil {
		t.Fatal(err)
	}
}

var newEndpointLink = regexp.MustCompile(`<a href="(/endpoints/new\?next=[^"]+)">Make a new endpoint`)

// TestConsentNewEndpoint: from the consent page the operator makes a new
// endpoint with the board's endpoint form and comes back to grant it.
func TestConsentNewEndpoint(t *testing.T) {
	r := newRig(t, nil)
	client := r.register(cb)
	_, challenge := pkce("n")
	q := r.authorizeQuery(client, cb, challenge)
	_, page := r.do(http.MethodGet, "/oauth/authorize?"+q.Encode(), nil, r.session)
	m := newEndpointLink.FindStringSubmatch(page)
	if m == nil {
		t.Fatal("the consent page has no link to make a new endpoint")
	}
	_, form := r.do(http.MethodGet, html.UnescapeString(m[1]), nil, r.session)
	post := url.Values{"agent_id": {"claude-web"}, "queues": {"inbox"}, "verbs": {"claim_next", "complete"}, "max_webhooks": {"0"}}
	for _, h := range hiddenField.FindAllStringSubmatch(form, -1) {
		post.Set(h[1], html.UnescapeString(h[2]))
	}
	if !strings.HasPrefix(post.Get("next"), "/oauth/authorize?") {
		t.Fatalf("the endpoint form does not carry the way back: %q", post.Get("next"))
	}
	res, created := r.do(http.MethodPost, "/endpoints", post, r.session)
	back := regexp.MustCompile(`href="([^"]+)" id="back-to-consent"`).FindStringSubmatch(created)
	if res.StatusCode != http.StatusOK || back == nil {
		t.Fatalf("endpoint created: %d, no way back to the consent", res.StatusCode)
	}
	_, page = r.do(http.MethodGet, html.UnescapeString(back[1]), nil, r.session)
	if !strings.Contains(page, "claude-web") || !strings.Contains(page, `id="consent-form"`) {
		t.Fatal("back on the consent page, the new endpoint is not offered")
	}
	// A next that is not the consent page is dropped.
	_, form = r.do(http.MethodGet, "/endpoints/new?next="+url.QueryEscape("/account"), nil, r.session)
	if strings.Contains(form, `name="next"`) {
		t.Fatal("the endpoint form carries a next that is not a consent page")
	}
}
