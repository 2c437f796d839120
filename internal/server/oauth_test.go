package server_test

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/internal/server"
	"github.com/switchboardhq/switchboard/internal/server/servertest"
	"github.com/switchboardhq/switchboard/internal/testkit"
	"github.com/switchboardhq/switchboard/store"
)

// TestServeWithOAuth: serve with OAuth on (as the flag's default has it)
// mounts the metadata beside /mcp and the board, its 401 names the metadata,
// and with registration off /oauth/register is not there.
func TestServeWithOAuth(t *testing.T) {
	const public = "https://sb.example.net"
	base, _, _ := servertest.Start(t, server.Config{BaseURL: public, OAuth: true})
	res, err := http.Post(base+"/mcp", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if want := `resource_metadata="` + public + `/.well-known/oauth-protected-resource"`; res.StatusCode != http.StatusUnauthorized ||
		!strings.Contains(res.Header.Get("WWW-Authenticate"), want) {
		t.Fatalf("/mcp without a credential: %d %q", res.StatusCode, res.Header.Get("WWW-Authenticate"))
	}
	res, err = http.Get(base + "/.well-known/oauth-authorization-server")
	if err != nil {
		t.Fatal(err)
	}
	var md map[string]any
	err = json.NewDecoder(res.Body).Decode(&md)
	res.Body.Close()
	if err != nil || md["issuer"] != public || md["registration_endpoint"] != nil {
		t.Fatalf("authorization server metadata: %v %v", md, err)
	}
	res, err = http.Post(base+"/oauth/register", "application/json", strings.NewReader(`{"redirect_uris":["https://a.example/cb"]}`))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusNotFound {
		t.Fatalf("/oauth/register with registration off: %d", res.StatusCode)
	}
}

// TestServeWarnsOAuthBaseURLPath: a base URL with a path (a proxy serving
// Switchboard under /switchboard) starts, but says that hosted agents cannot
// find the OAuth metadata, which they look for at the root of the host.
func TestServeWarnsOAuthBaseURLPath(t *testing.T) {
	for base, warns := range map[string]bool{"https://sb.example.net/switchboard": true, "https://sb.example.net/": false} {
		for _, on := range []bool{true, false} {
			var logs testkit.LockedBuffer
			servertest.Start(t, server.Config{BaseURL: base, OAuth: on, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			said := strings.Contains(logs.String(), "https://sb.example.net/.well-known/oauth-protected-resource and cannot connect")
			if said != (warns && on) {
				t.Errorf("base URL %s, OAuth %v: warned %v:\n%s", base, on, said, logs.String())
			}
		}
	}
}

// TestServeWithoutOAuthRefusesItsTokens: with OAuth turned off, /mcp takes only
// endpoint credentials, as the docs say: an access token issued while it was on
// is refused, not honoured for the rest of its hour.
func TestServeWithoutOAuthRefusesItsTokens(t *testing.T) {
	for _, on := range []bool{true, false} {
		base, srv, _ := servertest.Start(t, server.Config{BaseURL: "https://sb.example.net", OAuth: on})
		st, ctx := srv.Store(), t.Context()
		queues := []string{"inbox"}
		ep, _, err := st.CreateEndpoint(ctx, "hosted", store.EndpointSpec{Queues: &queues}, "human:cli")
		if err != nil {
			t.Fatal(err)
		}
		_, code, err := st.CreateOAuthGrant(ctx, store.NewOAuthGrant{EndpointID: ep.ID, ClientID: "sbc_test",
			ClientName: "Hosted Agent", RedirectURI: "https://c.example/cb", CodeChallenge: "x", CodeTTL: time.Minute}, "human:ana")
		if err != nil {
			t.Fatal(err)
		}
		toks, err := st.RedeemOAuthCode(ctx, code, func(store.OAuthGrant, string) error { return nil },
			store.OAuthTTLs{Access: time.Hour, Refresh: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequest(http.MethodPost, base+"/mcp", strings.NewReader(
			`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
		req.Header.Set("Authorization", "Bearer "+toks.Access)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if want := map[bool]int{true: http.StatusOK, false: http.StatusUnauthorized}[on]; res.StatusCode != want {
			t.Errorf("OAuth %v: an access token on /mcp: %d, want %d", on, res.StatusCode, want)
		}
	}
}
