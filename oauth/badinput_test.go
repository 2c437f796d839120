package oauth_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/oauth"
)

const cb = "http://127.0.0.1:9/callback"

// refresh exchanges a refresh token of client's.
func (r *rig) refresh(client, token string) (int, map[string]any) {
	r.t.Helper()
	return r.token(url.Values{"grant_type": {"refresh_token"}, "refresh_token": {token}, "client_id": {client}})
}

// exchange runs consent and the code exchange and returns the tokens.
func (r *rig) exchange(client, verifier, challenge string) map[string]any {
	r.t.Helper()
	code := r.code(r.authorizeQuery(client, cb, challenge))
	status, toks := r.token(url.Values{"grant_type": {"authorization_code"}, "code": {code}, "code_verifier": {verifier},
		"redirect_uri": {cb}, "client_id": {client}})
	if status != http.StatusOK {
		r.t.Fatalf("token: %d %v", status, toks)
	}
	toks["code"] = code
	return toks
}

// TestRedirectURINotRegistered: a redirect URI that is not exactly one the
// client registered (a loopback one may differ in its port alone) is refused on
// the page, and nothing is sent anywhere.
func TestRedirectURINotRegistered(t *testing.T) {
	r := newRig(t, nil)
	client := r.register(cb)
	_, challenge := pkce("k")
	for _, bad := range []string{"http://127.0.0.1:9/callback/", "http://127.0.0.1:9/callback?x=1", "http://localhost:9/callback",
		"https://evil.example/callback", "", "http://127.0.0.1:9/CALLBACK"} {
		res, body := r.do(http.MethodGet, "/oauth/authorize?"+r.authorizeQuery(client, bad, challenge).Encode(), nil, r.session)
		if res.StatusCode != http.StatusBadRequest || res.Header.Get("Location") != "" || !strings.Contains(body, "not one the client registered") {
			t.Errorf("redirect_uri %q: %d, Location %q", bad, res.StatusCode, res.Header.Get("Location"))
		}
	}
}

// TestPKCERequired: no challenge, the plain method, or none named are sent
// back as errors, with no code; a wrong verifier gets no token.
func TestPKCERequired(t *testing.T) {
	r := newRig(t, nil)
	client := r.register(cb)
	_, challenge := pkce("k")
	for name, tweak := range map[string]func(url.Values){
		"no challenge": func(q url.Values) { q.Del("code_challenge") },
		"plain":        func(q url.Values) { q.Set("code_challenge_method", "plain") },
		"no method":    func(q url.Values) { q.Del("code_challenge_method") },
		"short":        func(q url.Values) { q.Set("code_challenge", "abc") },
	} {
		q := r.authorizeQuery(client, cb, challenge)
		tweak(q)
		res, _ := r.do(http.MethodGet, "/oauth/authorize?"+q.Encode(), nil, r.session)
		to, _ := url.Parse(res.Header.Get("Location"))
		if res.StatusCode != http.StatusSeeOther || !strings.HasPrefix(to.String(), cb) ||
			to.Query().Get("error") != "invalid_request" || to.Query().Get("code") != "" {
			t.Errorf("%s: %d %q", name, res.StatusCode, to)
		}
	}
	code := r.code(r.authorizeQuery(client, cb, challenge))
	other, _ := pkce("zz")
	for _, v := range []string{"", other} {
		if status, got := r.token(url.Values{"grant_type": {"authorization_code"}, "code": {code}, "code_verifier": {v},
			"redirect_uri": {cb}, "client_id": {client}}); status != http.StatusBadRequest || got["error"] != "invalid_grant" {
			t.Errorf("verifier %q: %d %v", v, status, got)
		}
	}
}

// TestCodeUsedTwice: the second use is refused and revokes what the first issued.
func TestCodeUsedTwice(t *testing.T) {
	r := newRig(t, nil)
	client := r.register(cb)
	verifier, challenge := pkce("k")
	toks := r.exchange(client, verifier, challenge)
	if s, _ := r.mcpStatus(toks["access_token"].(string)); s != http.StatusOK {
		t.Fatalf("first token: %d", s)
	}
	status, got := r.token(url.Values{"grant_type": {"authorization_code"}, "code": {toks["code"].(string)}, "code_verifier": {verifier},
		"redirect_uri": {cb}, "client_id": {client}})
	if status != http.StatusBadRequest || got["error"] != "invalid_grant" {
		t.Fatalf("second use: %d %v", status, got)
	}
	if s, _ := r.mcpStatus(toks["access_token"].(string)); s != http.StatusUnauthorized {
		t.Fatalf("the first use's token after the second use: %d", s)
	}
	if s, _ := r.refresh(client, toks["refresh_token"].(string)); s != http.StatusBadRequest {
		t.Fatalf("the first use's refresh token after the second use: %d", s)
	}
}

// TestRefreshReuseRevokesFamily: a refresh token presented a second time
// revokes the grant, the tokens the first refresh issued with it.
func TestRefreshReuseRevokesFamily(t *testing.T) {
	r := newRig(t, nil)
	client := r.register(cb)
	verifier, challenge := pkce("k")
	toks := r.exchange(client, verifier, challenge)
	status, fresh := r.refresh(client, toks["refresh_token"].(string))
	if status != http.StatusOK {
		t.Fatalf("refresh: %d %v", status, fresh)
	}
	if status, _ := r.refresh(client, toks["refresh_token"].(string)); status != http.StatusBadRequest {
		t.Fatalf("the used refresh token again: %d", status)
	}
	if s, _ := r.mcpStatus(fresh["access_token"].(string)); s != http.StatusUnauthorized {
		t.Fatalf("the refreshed token after reuse: %d", s)
	}
	// The log says which grant went, so that the operator can find its client.
	if !strings.Contains(r.logged(), `grant 1 of client \"`+client+`\"`) {
		t.Fatalf("the log does not name the revoked grant and its client:\n%s", r.logged())
	}
}

// TestWrongResource: a request or exchange for another resource is refused.
func TestWrongResource(t *testing.T) {
	r := newRig(t, nil)
	client := r.register(cb)
	verifier, challenge := pkce("k")
	q := r.authorizeQuery(client, cb, challenge)
	q.Set("resource", "https://other.example/mcp")
	res, _ := r.do(http.MethodGet, "/oauth/authorize?"+q.Encode(), nil, r.session)
	if to, _ := url.Parse(res.Header.Get("Location")); to == nil || to.Query().Get("error") != "invalid_target" {
		t.Fatalf("authorize for another resource: %d %q", res.StatusCode, res.Header.Get("Location"))
	}
	code := r.code(r.authorizeQuery(client, cb, challenge))
	if status, got := r.token(url.Values{"grant_type": {"authorization_code"}, "code": {code}, "code_verifier": {verifier},
		"redirect_uri": {cb}, "client_id": {client}, "resource": {r.base + "/other"}}); status != http.StatusBadRequest || got["error"] != "invalid_target" {
		t.Fatalf("token for another resource: %d %v", status, got)
	}
	// A bearer that is not a token of this server's (another's, or a guess) is unknown here.
	if s, h := r.mcpStatus("sbat_" + strings.Repeat("A", 43)); s != http.StatusUnauthorized || !strings.Contains(h.Get("WWW-Authenticate"), "invalid_token") {
		t.Fatalf("a foreign token: %d", s)
	}
}

// TestExpiredToken: an access token past its hour is refused; a code past its
// minute too.
func TestExpiredToken(t *testing.T) {
	r := newRig(t, nil)
	client := r.register(cb)
	verifier, challenge := pkce("k")
	toks := r.exchange(client, verifier, challenge)
	r.clock.Add(time.Hour + time.Second)
	if s, h := r.mcpStatus(toks["access_token"].(string)); s != http.StatusUnauthorized || !strings.Contains(h.Get("WWW-Authenticate"), "invalid_token") {
		t.Fatalf("an expired token: %d", s)
	}
	code := r.code(r.authorizeQuery(client, cb, challenge))
	r.clock.Add(2 * time.Minute)
	if status, _ := r.token(url.Values{"grant_type": {"authorization_code"}, "code": {code}, "code_verifier": {verifier},
		"redirect_uri": {cb}, "client_id": {client}}); status != http.StatusBadRequest {
		t.Fatalf("an expired code: %d", status)
	}
}

// TestConsentWithoutCSRF: the consent form without its token grants nothing.
func TestConsentWithoutCSRF(t *testing.T) {
	r := newRig(t, nil)
	client := r.register(cb)
	_, challenge := pkce("k")
	form := r.authorizeQuery(client, cb, challenge)
	form.Set("decision", "allow")
	form.Set("endpoint", itoa(r.endpoint.ID))
	for _, csrf := range []string{"", "forged"} {
		if csrf != "" {
			form.Set("csrf_token", csrf)
		}
		res, _ := r.do(http.MethodPost, "/oauth/authorize", form, r.session)
		if res.StatusCode != http.StatusForbidden || res.Header.Get("Location") != "" {
			t.Fatalf("consent with CSRF %q: %d %q", csrf, res.StatusCode, res.Header.Get("Location"))
		}
	}
	// Without a session the form is not acted on either.
	if res, _ := r.do(http.MethodPost, "/oauth/authorize", form, nil); strings.Contains(res.Header.Get("Location"), "code=") {
		t.Fatal("consent without a session issued a code")
	}
	if grants, _ := r.st.OAuthGrants(context.Background(), 0); len(grants) != 0 {
		t.Fatalf("grants after refused consents: %d", len(grants))
	}
	res, _ := r.do(http.MethodGet, "/oauth/authorize?"+r.authorizeQuery(client, cb, challenge).Encode(), nil, r.session)
	if !strings.Contains(res.Header.Get("Content-Security-Policy"), "frame-ancestors 'none'") || res.Header.Get("X-Frame-Options") != "DENY" {
		t.Fatalf("the consent page may be framed: %q", res.Header.Get("Content-Security-Policy"))
	}
}

// TestNoOpenRedirect: no parameter sends the browser anywhere but a redirect
// URI the client registered exactly.
func TestNoOpenRedirect(t *testing.T) {
	r := newRig(t, nil)
	client := r.register(cb)
	_, challenge := pkce("k")
	evil := "https://evil.example/x"
	cases := map[string]url.Values{
		"unknown client":        {"client_id": {"sbc_nope"}, "redirect_uri": {evil}, "response_type": {"code"}},
		"no client":             {"redirect_uri": {evil}},
		"unregistered redirect": r.authorizeQuery(client, evil, challenge),
		"metadata client elsewhere": {"client_id": {"https://evil.example/client.json"}, "redirect_uri": {evil},
			"response_type": {"code"}},
	}
	q := r.authorizeQuery(client, cb, challenge)
	q.Set("state", evil)
	q.Set("next", evil)
	q.Set("iss", evil)
	cases["extra parameters"] = q
	for name, q := range cases {
		for _, cookie := range []*http.Cookie{r.session, nil} {
			res, _ := r.do(http.MethodGet, "/oauth/authorize?"+q.Encode(), nil, cookie)
			loc := res.Header.Get("Location")
			if loc != "" && !strings.HasPrefix(loc, "/") && !strings.HasPrefix(loc, cb+"?") {
				t.Errorf("%s: redirected to %q", name, loc)
			}
			if to, _ := url.Parse(loc); to != nil && strings.HasPrefix(loc, cb) && to.Query().Get("iss") != r.base {
				t.Errorf("%s: iss %q", name, to.Query().Get("iss"))
			}
		}
	}
	// After login, next leads only to this site.
	res, _ := r.do(http.MethodGet, "/login?next="+url.QueryEscape("//evil.example/x"), nil, r.session)
	if loc := res.Header.Get("Location"); strings.Contains(loc, "evil") {
		t.Errorf("login next redirected to %q", loc)
	}
}

// TestRegistration: bad metadata is refused; with registration off the
// endpoint is gone and the metadata does not name it.
func TestRegistration(t *testing.T) {
	r := newRig(t, nil)
	for _, body := range []string{`{"redirect_uris":["http://evil.example/cb"]}`, `{"redirect_uris":[]}`,
		`{"redirect_uris":["https://a.example/cb#frag"]}`, `{"redirect_uris":["https://a.example/cb"],"token_endpoint_auth_method":"client_secret_basic"}`,
		`{"redirect_uris":["https://a.example/cb"],"client_id":"mine"}`, `not json`} {
		res, err := http.Post(r.base+"/oauth/register", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusBadRequest {
			t.Errorf("register %s: %d", body, res.StatusCode)
		}
	}
	off := newRig(t, func(o *oauth.Options) { o.Registration = false })
	res, err := http.Post(off.base+"/oauth/register", "application/json", strings.NewReader(`{"redirect_uris":["https://a.example/cb"]}`))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	var md map[string]any
	getJSON(t, off.base+"/.well-known/oauth-authorization-server", &md)
	if res.StatusCode != http.StatusNotFound || md["registration_endpoint"] != nil {
		t.Fatalf("registration off: %d, metadata %v", res.StatusCode, md["registration_endpoint"])
	}
}

// TestTokenInURLRefused: a code or token in the token endpoint's URL is refused.
func TestTokenInURLRefused(t *testing.T) {
	r := newRig(t, nil)
	res, _ := r.do(http.MethodPost, "/oauth/token?grant_type=refresh_token&refresh_token=sbrt_x", url.Values{}, nil)
	if res.StatusCode != http.StatusBadRequest {
		t.Fatalf("token in the URL: %d", res.StatusCode)
	}
}

// TestEndpointRevokeRevokesGrants: revoking the endpoint ends its grants' tokens.
func TestEndpointRevokeRevokesGrants(t *testing.T) {
	r := newRig(t, nil)
	client := r.register(cb)
	verifier, challenge := pkce("k")
	toks := r.exchange(client, verifier, challenge)
	if err := r.st.RevokeEndpoint(context.Background(), r.endpoint.ID, "human:1"); err != nil {
		t.Fatal(err)
	}
	if s, _ := r.mcpStatus(toks["access_token"].(string)); s != http.StatusUnauthorized {
		t.Fatalf("token of a revoked endpoint: %d", s)
	}
	if status, _ := r.refresh(client, toks["refresh_token"].(string)); status != http.StatusBadRequest {
		t.Fatalf("refresh of a revoked endpoint's grant: %d", status)
	}
	g, err := r.st.OAuthGrants(context.Background(), 0)
	if err != nil || len(g) != 0 {
		t.Fatalf("live grants after the endpoint's revocation: %v %v", g, err)
	}
}

// TestRevocationEndpoint: RFC 7009, for an access and a refresh token.
func TestRevocationEndpoint(t *testing.T) {
	r := newRig(t, nil)
	client := r.register(cb)
	verifier, challenge := pkce("k")
	toks := r.exchange(client, verifier, challenge)
	if res, _ := r.do(http.MethodPost, "/oauth/revoke", url.Values{"token": {toks["access_token"].(string)}, "client_id": {client}}, nil); res.StatusCode != http.StatusOK {
		t.Fatalf("revoke: %d", res.StatusCode)
	}
	if s, _ := r.mcpStatus(toks["access_token"].(string)); s != http.StatusUnauthorized {
		t.Fatalf("a revoked access token: %d", s)
	}
	if res, _ := r.do(http.MethodPost, "/oauth/revoke", url.Values{"token": {toks["refresh_token"].(string)}, "client_id": {client}}, nil); res.StatusCode != http.StatusOK {
		t.Fatalf("revoke: %d", res.StatusCode)
	}
	if status, _ := r.refresh(client, toks["refresh_token"].(string)); status != http.StatusBadRequest {
		t.Fatalf("a revoked refresh token: %d", status)
	}
	if res, _ := r.do(http.MethodPost, "/oauth/revoke", url.Values{"token": {"unknown"}}, nil); res.StatusCode != http.StatusOK {
		t.Fatalf("revoke of an unknown token: %d", res.StatusCode)
	}
}

// TestEndpointsPageGrants: the board's Endpoints page lists a grant (client,
// since, last used) and revokes it with its button; a grant of another
// endpoint is not revoked through this one's address.
func TestEndpointsPageGrants(t *testing.T) {
	r := newRig(t, nil)
	client := r.register(cb)
	verifier, challenge := pkce("k")
	toks := r.exchange(client, verifier, challenge)
	r.mcpStatus(toks["access_token"].(string))
	_, page := r.do(http.MethodGet, "/endpoints", nil, r.session)
	for _, s := range []string{`data-grants-of="` + itoa(r.endpoint.ID) + `"`, "Test Agent", "127.0.0.1:9", "last used"} {
		if !strings.Contains(page, s) {
			t.Fatalf("the Endpoints page does not show %q", s)
		}
	}
	grants, _ := r.st.OAuthGrants(context.Background(), r.endpoint.ID)
	form := url.Values{}
	for _, m := range hiddenField.FindAllStringSubmatch(page, 1) {
		form.Set(m[1], m[2])
	}
	action := "/endpoints/" + itoa(r.endpoint.ID+1) + "/grants/" + itoa(grants[0].ID) + "/revoke"
	if res, _ := r.do(http.MethodPost, action, form, r.session); res.StatusCode != http.StatusNotFound {
		t.Fatalf("revoke through another endpoint's address: %d", res.StatusCode)
	}
	action = "/endpoints/" + itoa(r.endpoint.ID) + "/grants/" + itoa(grants[0].ID) + "/revoke"
	if res, _ := r.do(http.MethodPost, action, form, r.session); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("revoke: %d", res.StatusCode)
	}
	if s, _ := r.mcpStatus(toks["access_token"].(string)); s != http.StatusUnauthorized {
		t.Fatalf("token of a grant revoked on the board: %d", s)
	}
	if _, page = r.do(http.MethodGet, "/endpoints", nil, r.session); strings.Contains(page, "data-grants-of") {
		t.Fatal("the revoked grant is still listed")
	}
}
