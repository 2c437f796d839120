package oauth_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestRedirectHostSpoofRefused: a redirect URI's host must be ASCII (an IDN
// in its punycode form), so the consent page's "Sends you back to" never
// shows a homograph such as a Cyrillic "аpple.com".
func TestRedirectHostSpoofRefused(t *testing.T) {
	r := newRig(t, nil)
	registerRefused(t, r, `{"client_name":"Agent","redirect_uris":["https://аpple.com/cb"]}`,
		`{"client_name":"Agent","redirect_uris":["https://a.example/cb","https://exаmple.com/cb"]}`,
		`{"client_name":"Agent","redirect_uris":["http://lоcalhost/cb"]}`)
	registerAccepted(t, r, `{"client_name":"Agent","redirect_uris":["https://xn--pple-43d.com/cb"]}`)
}

// TestClientNameSpoofRefused: a client name may not hold invisible or
// direction-changing characters (U+202E, U+200B, U+2066 and the like) that
// reorder or hide what the consent page's heading "Connect …?" reads, nor a
// C1 control (U+009B is a terminal's CSI, and endpoint grants prints names);
// letters of any script stay fine.
func TestClientNameSpoofRefused(t *testing.T) {
	r := newRig(t, nil)
	registerRefused(t, r, `{"client_name":"Agent\u202egnp.exe","redirect_uris":["https://a.example/cb"]}`,
		`{"client_name":"Cl\u200baude","redirect_uris":["https://a.example/cb"]}`,
		`{"client_name":"Agent\u2066x","redirect_uris":["https://a.example/cb"]}`,
		`{"client_name":"Agent\u2028x","redirect_uris":["https://a.example/cb"]}`,
		`{"client_name":"Agent\u009b31m","redirect_uris":["https://a.example/cb"]}`)
	registerAccepted(t, r, `{"client_name":"Агент 7","redirect_uris":["https://a.example/cb"]}`)
}

func registerRefused(t *testing.T, r *rig, bodies ...string) {
	t.Helper()
	for _, body := range bodies {
		if status := postRegistration(t, r, body); status != http.StatusBadRequest {
			t.Errorf("register %s: %d, want 400", body, status)
		}
	}
}

func registerAccepted(t *testing.T, r *rig, bodies ...string) {
	t.Helper()
	for _, body := range bodies {
		if status := postRegistration(t, r, body); status != http.StatusCreated {
			t.Errorf("register %s: %d, want 201", body, status)
		}
	}
}

func postRegistration(t *testing.T, r *rig, body string) int {
	t.Helper()
	res, err := http.Post(r.base+"/oauth/register", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}

// TestMetadataURLSpoofRefused: a metadata document URL with a non-ASCII host
// is refused before anything is fetched, since the consent page shows it as
// the client's verified identity.
func TestMetadataURLSpoofRefused(t *testing.T) {
	r := newRig(t, nil)
	_, challenge := pkce("m")
	q := r.authorizeQuery("https://аpple.com/client.json", "https://аpple.com/cb", challenge)
	_, oerr := r.oauth.ParseAuthorize(t.Context(), q)
	if oerr == nil || !strings.Contains(oerr.Description, "not a usable metadata document URL") {
		t.Fatalf("ParseAuthorize: %v, want the URL refused as unusable", oerr)
	}
}

// TestRedirectSchemesRefused: a registration cannot name a redirect URI that
// would run code or leave the web (javascript:, data:, a custom scheme), that
// is plain http off the loopback interface, or that carries a user, a
// fragment or a line break; the redirect is then compared exactly, so case
// and trailing slashes do not match either (TestRedirectURINotRegistered).
func TestRedirectSchemesRefused(t *testing.T) {
	r := newRig(t, nil)
	for _, uri := range []string{`javascript:alert(1)//https://a.example/cb`, `data:text/html,<script>alert(1)</script>`,
		`myapp://cb`, `com.example.app:/cb`, `http://evil.example/cb`, `http://localhost.evil.example/cb`,
		`https://a.example@evil.example/cb`, `https://a.example/cb#x`, `//a.example/cb`, "https://a.example/cb\n", `https://a.example/c\b`,
		`https:///cb`, `file:///etc/passwd`} {
		body, _ := json.Marshal(map[string]any{"client_name": "Agent", "redirect_uris": []string{uri}})
		registerRefused(t, r, string(body))
	}
}
