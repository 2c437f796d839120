package server_test

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/switchboardhq/switchboard/internal/server"
	"github.com/switchboardhq/switchboard/internal/server/servertest"
	"github.com/switchboardhq/switchboard/internal/testkit"
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
