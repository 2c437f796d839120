package oauth_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestLoopbackRedirectAnyPort: a client that registered an http loopback
// redirect URI without a port (as Claude Code's metadata document does) asks
// with the port its listener got; the code goes there, and the exchange must
// name that same URI. Any other difference, or another port on an https
// redirect URI, is still refused.
func TestLoopbackRedirectAnyPort(t *testing.T) {
	r := newRig(t, nil)
	for _, registered := range []string{"http://localhost/callback", "http://127.0.0.1/callback", "http://[::1]:8080/callback"} {
		client := r.register(registered)
		u, _ := url.Parse(registered)
		u.Host = u.Hostname() + ":53682"
		if strings.Contains(u.Hostname(), ":") {
			u.Host = "[" + u.Hostname() + "]:53682"
		}
		asked := u.String()
		verifier, challenge := pkce("p")
		res, body := r.consent(r.authorizeQuery(client, asked, challenge), "allow")
		to, _ := url.Parse(res.Header.Get("Location"))
		if res.StatusCode != http.StatusSeeOther || !strings.HasPrefix(to.String(), asked+"?") || to.Query().Get("code") == "" {
			t.Fatalf("%s asked as %s: consent answered %d %q %s", registered, asked, res.StatusCode, to, body)
		}
		code := to.Query().Get("code")
		exchange := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "code_verifier": {verifier},
			"redirect_uri": {registered}, "client_id": {client}}
		if status, got := r.token(exchange); status != http.StatusBadRequest || got["error"] != "invalid_grant" {
			t.Errorf("%s: exchange naming the registered URI, not the one asked with: %d %v", registered, status, got)
		}
		exchange.Set("redirect_uri", asked)
		if status, got := r.token(exchange); status != http.StatusOK {
			t.Errorf("%s asked as %s: exchange %d %v", registered, asked, status, got)
		}
	}
	client := r.register("http://127.0.0.1/callback")
	web := r.register("https://client.example/cb")
	_, challenge := pkce("q")
	for _, c := range []struct{ client, uri string }{
		{client, "http://localhost:53682/callback"},
		{client, "http://127.0.0.1:53682/callback/x"},
		{client, "http://127.0.0.1:53682/callback?x=1"},
		{client, "https://127.0.0.1:53682/callback"},
		{client, "http://user@127.0.0.1:53682/callback"},
		{web, "https://client.example:8443/cb"},
	} {
		res, body := r.do(http.MethodGet, "/oauth/authorize?"+r.authorizeQuery(c.client, c.uri, challenge).Encode(), nil, r.session)
		if res.StatusCode != http.StatusBadRequest || res.Header.Get("Location") != "" || !strings.Contains(body, "not one the client registered") {
			t.Errorf("redirect_uri %q: %d, Location %q", c.uri, res.StatusCode, res.Header.Get("Location"))
		}
	}
}
