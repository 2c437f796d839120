package oauth_test

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/switchboardhq/switchboard/internal/egress"
	"github.com/switchboardhq/switchboard/oauth"
)

// metadataHost serves client metadata documents over TLS on loopback: the
// document at /client.json names itself; /big answers 10 MB; /moved redirects
// to /client.json; /liar names another client_id.
func metadataHost(t *testing.T) *httptest.Server {
	t.Helper()
	var srv *httptest.Server
	srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		doc := map[string]any{"client_id": srv.URL + r.URL.Path, "client_name": "Hosted Agent", "redirect_uris": []string{cb}}
		switch r.URL.Path {
		case "/big":
			w.Write([]byte(`{"client_name":"` + strings.Repeat("a", 10<<20) + `"}`))
			return
		case "/moved":
			http.Redirect(w, r, "/client.json", http.StatusFound)
			return
		case "/liar":
			doc["client_id"] = srv.URL + "/client.json"
		}
		json.NewEncoder(w).Encode(doc)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// loopbackAllowed fetches metadata documents from the test's loopback host,
// as an egress policy naming 127.0.0.0/8 would.
func loopbackAllowed(srv *httptest.Server) func(*oauth.Options) {
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	policy := &egress.Policy{Networks: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}
	return func(o *oauth.Options) { o.Metadata = oauth.MetadataClient(policy, &tls.Config{RootCAs: pool}) }
}

// TestMetadataDocumentClient: a client named by its metadata document URL is
// fetched, shown as verified, and completes the flow.
func TestMetadataDocumentClient(t *testing.T) {
	host := metadataHost(t)
	r := newRig(t, loopbackAllowed(host))
	client := host.URL + "/client.json"
	verifier, challenge := pkce("m")
	_, page := r.do(http.MethodGet, "/oauth/authorize?"+r.authorizeQuery(client, cb, challenge).Encode(), nil, r.session)
	if !strings.Contains(page, "Hosted Agent") || !strings.Contains(page, `id="consent-verified"`) {
		t.Fatalf("the consent page does not show a verified Hosted Agent:\n%s", page)
	}
	toks := r.exchange(client, verifier, challenge)
	if s, _ := r.mcpStatus(toks["access_token"].(string)); s != http.StatusOK {
		t.Fatalf("/mcp with the token: %d", s)
	}
}

// TestMetadataDocumentRefused: a document at a loopback or link-local
// address (under the default egress rules), one of 10 MB, one behind a
// redirect, and one naming another client are refused on the page, and
// nothing is redirected.
func TestMetadataDocumentRefused(t *testing.T) {
	host := metadataHost(t)
	_, challenge := pkce("m")
	strict := newRig(t, nil)
	open := newRig(t, loopbackAllowed(host))
	for _, c := range []struct {
		r      *rig
		client string
		want   string
	}{
		{strict, host.URL + "/client.json", "loopback"},
		{strict, "https://169.254.169.254/latest/meta-data", "link-local"},
		{open, host.URL + "/big", "larger than"},
		{open, host.URL + "/moved", "answered 302"},
		{open, host.URL + "/liar", "names another client_id"},
	} {
		res, body := c.r.do(http.MethodGet, "/oauth/authorize?"+c.r.authorizeQuery(c.client, cb, challenge).Encode(), nil, c.r.session)
		if res.StatusCode != http.StatusBadRequest || res.Header.Get("Location") != "" || !strings.Contains(body, c.want) {
			t.Errorf("%s: %d %q, want a refusal saying %q", c.client, res.StatusCode, res.Header.Get("Location"), c.want)
		}
	}
}
