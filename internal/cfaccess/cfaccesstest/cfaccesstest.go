// Package cfaccesstest plays a Cloudflare Access team for tests: signing keys
// made in the test, its key set served on loopback (which keys, changed at
// will: a rotation), and assertions signed as Access signs them.
package cfaccesstest

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/switchboardhq/switchboard/internal/cfaccess"
)

// Domain and AUD are the team domain and application audience a Team signs for.
const (
	Domain = "switchboard-test.cloudflareaccess.com"
	AUD    = "4714c1358e65fe4b408ad6d432a5f878f08194bdb4752441fd56faefa9b2b6f2"
)

// Team serves a key set and signs assertions.
type Team struct {
	srv     *httptest.Server
	fetches atomic.Int64

	mu     sync.Mutex
	served []*Key
}

// Key is one signing key of the team.
type Key struct {
	ID   string
	Priv *rsa.PrivateKey
}

// NewTeam starts a team serving one key, which it returns.
func NewTeam(tb testing.TB) (*Team, *Key) {
	tb.Helper()
	t := &Team{}
	t.srv = httptest.NewServer(http.HandlerFunc(t.serveKeys))
	tb.Cleanup(t.srv.Close)
	k := NewKey(tb)
	t.Serve(k)
	return t, k
}

// NewKey makes a 2048-bit RSA key with a fresh key id.
func NewKey(tb testing.TB) *Key {
	tb.Helper()
	priv, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		tb.Fatal(err)
	}
	id := make([]byte, 8)
	rand.Read(id)
	return &Key{ID: fmt.Sprintf("%x", id), Priv: priv}
}

// Serve makes the key set the team publishes these keys (and no others).
func (t *Team) Serve(keys ...*Key) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.served = keys
}

// URL is where the key set is served.
func (t *Team) URL() string { return t.srv.URL }

// Fetches counts the requests for the key set so far.
func (t *Team) Fetches() int64 { return t.fetches.Load() }

func (t *Team) serveKeys(w http.ResponseWriter, r *http.Request) {
	t.fetches.Add(1)
	t.mu.Lock()
	set := jose.JSONWebKeySet{}
	for _, k := range t.served {
		set.Keys = append(set.Keys, jose.JSONWebKey{Key: &k.Priv.PublicKey, KeyID: k.ID, Algorithm: "RS256", Use: "sig"})
	}
	t.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(set)
}

// Verifier is a Verifier for this team, fetching its keys from loopback.
func (t *Team) Verifier(tb testing.TB, now func() time.Time) *cfaccess.Verifier {
	tb.Helper()
	v, err := cfaccess.New(Domain, AUD, cfaccess.Options{Client: t.srv.Client(), CertsURL: t.srv.URL, Now: now})
	if err != nil {
		tb.Fatal(err)
	}
	return v
}

// Claims are the claims of a valid assertion for email (a person) at now;
// tests change them to make bad ones.
func Claims(email string, now time.Time) map[string]any {
	return map[string]any{
		"iss": "https://" + Domain, "aud": []string{AUD}, "email": email, "sub": "7335d417-61da-459d-899c-0a01c76a2f94",
		"iat": now.Unix(), "nbf": now.Unix(), "exp": now.Add(time.Hour).Unix(), "type": "app",
	}
}

// Sign signs claims as Access does: RS256, the key's id in the header.
func (k *Key) Sign(tb testing.TB, claims map[string]any) string {
	tb.Helper()
	return SignWith(tb, jose.RS256, k.Priv, k.ID, claims)
}

// SignWith signs claims with any algorithm and key (a wrong one, for tests
// of what must be refused).
func SignWith(tb testing.TB, alg jose.SignatureAlgorithm, key any, kid string, claims map[string]any) string {
	tb.Helper()
	opts := (&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", kid)
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: key}, opts)
	if err != nil {
		tb.Fatal(err)
	}
	payload, err := json.Marshal(claims)
	if err != nil {
		tb.Fatal(err)
	}
	jws, err := s.Sign(payload)
	if err != nil {
		tb.Fatal(err)
	}
	out, err := jws.CompactSerialize()
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

// ForgeHS256 signs claims with HS256 keyed by k's public key (PEM), which
// anyone can fetch: a verifier that let the token choose its algorithm would
// accept it.
func (k *Key) ForgeHS256(tb testing.TB, claims map[string]any) string {
	tb.Helper()
	der, err := x509.MarshalPKIXPublicKey(&k.Priv.PublicKey)
	if err != nil {
		tb.Fatal(err)
	}
	return SignWith(tb, jose.HS256, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), k.ID, claims)
}

// Unsigned is an assertion with "alg": "none" and no signature.
func Unsigned(tb testing.TB, kid string, claims map[string]any) string {
	tb.Helper()
	enc := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			tb.Fatal(err)
		}
		return base64.RawURLEncoding.EncodeToString(b)
	}
	return enc(map[string]string{"alg": "none", "typ": "JWT", "kid": kid}) + "." + enc(claims) + "."
}
