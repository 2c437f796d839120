package oauth_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestTokenRequestMalformed: a token or revocation request that is not a
// form, lacks a parameter or repeats one is invalid_request (RFC 6749 section
// 5.2) saying which, not an answer about a grant type or a code it did send.
func TestTokenRequestMalformed(t *testing.T) {
	r := newRig(t, nil)
	client := r.register(cb)
	verifier, challenge := pkce("k")
	code := r.code(r.authorizeQuery(client, cb, challenge))
	good := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "code_verifier": {verifier},
		"redirect_uri": {cb}, "client_id": {client}}
	without := func(k string) string {
		f := url.Values{}
		for n, v := range good {
			if n != k {
				f[n] = v
			}
		}
		return f.Encode()
	}
	for _, c := range []struct{ name, path, contentType, body, says string }{
		{"JSON body", "/oauth/token", "application/json",
			`{"grant_type":"authorization_code","code":"` + code + `","client_id":"` + client + `"}`, "application/x-www-form-urlencoded"},
		{"no content type", "/oauth/token", "", good.Encode(), "application/x-www-form-urlencoded"},
		{"no client_id", "/oauth/token", "application/x-www-form-urlencoded", without("client_id"), "client_id is missing"},
		{"no code", "/oauth/token", "application/x-www-form-urlencoded", without("code"), "code is missing"},
		{"no redirect_uri", "/oauth/token", "application/x-www-form-urlencoded", without("redirect_uri"), "redirect_uri is missing"},
		{"refresh without client_id", "/oauth/token", "application/x-www-form-urlencoded",
			"grant_type=refresh_token&refresh_token=sbrt_x", "client_id is missing"},
		{"refresh without token", "/oauth/token", "application/x-www-form-urlencoded",
			"grant_type=refresh_token&client_id=" + client, "refresh_token is missing"},
		{"repeated", "/oauth/token", "application/x-www-form-urlencoded", good.Encode() + "&grant_type=refresh_token", `"grant_type" is repeated`},
		{"revoke as JSON", "/oauth/revoke", "application/json", `{"token":"sbrt_x"}`, "application/x-www-form-urlencoded"},
		{"revoke repeated", "/oauth/revoke", "application/x-www-form-urlencoded", "token=a&token=b", `"token" is repeated`},
	} {
		req, _ := http.NewRequest(http.MethodPost, r.base+c.path, strings.NewReader(c.body))
		if c.contentType != "" {
			req.Header.Set("Content-Type", c.contentType)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		var got map[string]string
		_ = json.Unmarshal(b, &got)
		if res.StatusCode != http.StatusBadRequest || got["error"] != "invalid_request" || !strings.Contains(got["error_description"], c.says) {
			t.Errorf("%s: %d %s, want invalid_request saying %q", c.name, res.StatusCode, b, c.says)
		}
	}
	// None of that used the code up.
	if status, got := r.token(good); status != http.StatusOK {
		t.Fatalf("the good exchange after the bad ones: %d %v", status, got)
	}
}
