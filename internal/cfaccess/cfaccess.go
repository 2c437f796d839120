// Package cfaccess verifies Cloudflare Access assertions: the signed JWT that
// Access puts in the Cf-Access-Jwt-Assertion header of every request it lets
// through to the origin. It checks the signature against the team's published
// keys (fetched through the egress boundary, cached, refetched on rotation), the
// application's audience, the issuer and the token's times, and says who the
// request is: a person's email or a service token's client id. An assertion
// that verified is remembered until it expires (verified.go), so the one Access
// sends all session long is checked in full once.
//
// It never trusts a claim it has not verified, never accepts an algorithm other
// than RS256 (no "none", no HMAC keyed with a public key), and never logs an
// assertion.
package cfaccess

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// Header is the request header Cloudflare Access sends the assertion in.
const Header = "Cf-Access-Jwt-Assertion"

// Leeway is the clock skew allowed between Cloudflare and this server, on exp,
// nbf and iat.
const Leeway = 60 * time.Second

// maxAssertion bounds an assertion before it is parsed; Access's are about 1 KB.
const maxAssertion = 16 << 10

// ErrRefused is wrapped by every refusal of an assertion.
var ErrRefused = errors.New("Cloudflare Access assertion refused")

// Identity is who a verified assertion speaks for.
type Identity struct {
	// Value is the email of a person, or the client id of a service token.
	Value string
	// ServiceToken: Value is a service token's client id (its common_name).
	ServiceToken bool
}

// Options configure New. The zero value is what serve uses.
type Options struct {
	// Client fetches the team's keys. Default: a client inside the egress
	// boundary (public addresses only), with a 10 s timeout.
	Client *http.Client
	// CertsURL replaces https://<team domain>/cdn-cgi/access/certs. Tests point
	// it, with Client, at a key set of their own on loopback.
	CertsURL string
	// Now is the clock of the time checks and of the key cache (default time.Now).
	Now    func() time.Time
	Logger *slog.Logger
}

// Verifier verifies the assertions of one Access application.
type Verifier struct {
	issuer string
	aud    string
	now    func() time.Time
	keys   *keyCache
	seen   verified
}

// New returns a Verifier for the application with audience tag aud under the
// team domain (myteam.cloudflareaccess.com; https:// and a trailing / may be
// given).
func New(teamDomain, aud string, opts Options) (*Verifier, error) {
	host, err := TeamHost(teamDomain)
	if err != nil {
		return nil, err
	}
	aud = strings.TrimSpace(aud)
	if aud == "" || strings.ContainsAny(aud, " \t\r\n") {
		return nil, fmt.Errorf("Cloudflare Access audience %q: give the application's AUD tag (Access → Applications → the application → Overview)", aud)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.CertsURL == "" {
		opts.CertsURL = "https://" + host + "/cdn-cgi/access/certs"
	}
	if opts.Client == nil {
		opts.Client = defaultClient()
	}
	return &Verifier{issuer: "https://" + host, aud: aud, now: opts.Now,
		keys: &keyCache{url: opts.CertsURL, client: opts.Client, now: opts.Now, log: opts.Logger}}, nil
}

// TeamHost is the host name of a team domain as an operator may write it:
// "myteam.cloudflareaccess.com", with or without https:// and a trailing /.
func TeamHost(teamDomain string) (string, error) {
	host := strings.TrimSuffix(strings.TrimPrefix(strings.ToLower(strings.TrimSpace(teamDomain)), "https://"), "/")
	if !hostName(host) {
		return "", fmt.Errorf("Cloudflare Access team domain %q: give the host name, as myteam.cloudflareaccess.com", teamDomain)
	}
	return host, nil
}

// hostName reports whether s is a DNS name of at least two labels.
func hostName(s string) bool {
	labels := strings.Split(s, ".")
	if len(s) > 253 || len(labels) < 2 {
		return false
	}
	for _, l := range labels {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for _, c := range l {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}

// accessClaims are the claims of an Access assertion besides the registered ones.
type accessClaims struct {
	Email      string `json:"email"`
	CommonName string `json:"common_name"` // a service token's client id
}

// Verify checks an assertion and says whose it is. Every refusal wraps
// ErrRefused and says why in a few words, from a short fixed list (nothing the
// sender chose, so a caller may count refusals by message), never the
// assertion itself.
func (v *Verifier) Verify(ctx context.Context, assertion string) (Identity, error) {
	if len(assertion) > maxAssertion {
		return Identity{}, fmt.Errorf("%w: longer than %d bytes", ErrRefused, maxAssertion)
	}
	sum := sha256.Sum256([]byte(assertion))
	if e, ok := v.seen.get(sum, v.now()); ok {
		if _, err := v.keys.get(ctx, e.kid); err != nil {
			return Identity{}, err
		}
		return e.id, nil
	}
	tok, err := jwt.ParseSigned(assertion, []jose.SignatureAlgorithm{jose.RS256})
	if err != nil {
		return Identity{}, fmt.Errorf("%w: not a JWT signed with RS256", ErrRefused)
	}
	kid := tok.Headers[0].KeyID
	if kid == "" {
		return Identity{}, fmt.Errorf("%w: its header names no key (kid)", ErrRefused)
	}
	key, err := v.keys.get(ctx, kid)
	if err != nil {
		return Identity{}, err
	}
	var std jwt.Claims
	var acc accessClaims
	if err := tok.Claims(key, &std, &acc); err != nil {
		return Identity{}, fmt.Errorf("%w: bad signature", ErrRefused)
	}
	if err := v.checkClaims(std); err != nil {
		return Identity{}, err
	}
	id := Identity{Value: acc.Email}
	if id.Value == "" {
		id = Identity{Value: acc.CommonName, ServiceToken: true}
	}
	if id.Value == "" {
		return Identity{}, fmt.Errorf("%w: it names no email and no service token (common_name)", ErrRefused)
	}
	v.seen.put(sum, verifiedEntry{id: id, kid: kid, exp: std.Expiry.Time()})
	return id, nil
}

// checkClaims checks the registered claims of a verified token: issuer,
// audience, and exp (required), nbf and iat within Leeway.
func (v *Verifier) checkClaims(c jwt.Claims) error {
	if c.Expiry == nil {
		return fmt.Errorf("%w: it has no expiry (exp)", ErrRefused)
	}
	err := c.ValidateWithLeeway(jwt.Expected{Issuer: v.issuer, AnyAudience: jwt.Audience{v.aud}, Time: v.now()}, Leeway)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, jwt.ErrInvalidIssuer):
		return fmt.Errorf("%w: issued by another team (iss)", ErrRefused)
	case errors.Is(err, jwt.ErrInvalidAudience):
		return fmt.Errorf("%w: for another application (aud)", ErrRefused)
	case errors.Is(err, jwt.ErrExpired):
		return fmt.Errorf("%w: expired (exp)", ErrRefused)
	case errors.Is(err, jwt.ErrNotValidYet):
		return fmt.Errorf("%w: not valid yet (nbf)", ErrRefused)
	case errors.Is(err, jwt.ErrIssuedInTheFuture):
		return fmt.Errorf("%w: issued in the future (iat)", ErrRefused)
	}
	return fmt.Errorf("%w: %v", ErrRefused, err)
}
