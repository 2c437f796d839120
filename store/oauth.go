package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"time"
)

// OAuth: a grant is an operator's consent that one client acts as one endpoint.
// Its codes and tokens are kept only as SHA-256 hashes (HashCredential); a token
// resolves to the grant's endpoint, so it is exactly as limited as that
// endpoint's bearer. The protocol around these rows is in package oauth.

// Prefixes of what an OAuth grant issues, recognisable in a log or a scanner.
const (
	OAuthAccessPrefix  = "sbat_"
	OAuthRefreshPrefix = "sbrt_"
	OAuthCodePrefix    = "sbac_"
	OAuthClientPrefix  = "sbc_"
)

// OAuthClient is a client that registered itself (RFC 7591).
type OAuthClient struct {
	ClientID     string    `json:"client_id"`
	Name         string    `json:"client_name"`
	RedirectURIs []string  `json:"redirect_uris"`
	CreatedAt    time.Time `json:"created_at"`
}

// OAuthGrant is one consent: a client's token family on one endpoint.
type OAuthGrant struct {
	ID          int64      `json:"grant_id"`
	EndpointID  int64      `json:"endpoint_id"`
	ClientID    string     `json:"client_id"`
	ClientName  string     `json:"client_name"`
	RedirectURI string     `json:"redirect_uri"`
	Verified    bool       `json:"verified"` // the client's metadata document was fetched
	CreatedBy   string     `json:"created_by"`
	CreatedAt   time.Time  `json:"created_at"`
	LastUsedAt  *time.Time `json:"last_used_at,omitempty"`
	RevokedAt   *time.Time `json:"revoked_at,omitempty"`
}

// RedirectHost is the host the grant's codes were sent to.
func (g OAuthGrant) RedirectHost() string {
	u, err := url.Parse(g.RedirectURI)
	if err != nil {
		return ""
	}
	return u.Host
}

// OAuthTokens is what a code or a refresh token is exchanged for. The tokens
// exist nowhere else: only their hashes are stored.
type OAuthTokens struct {
	GrantID         int64
	Access, Refresh string
	AccessExpiresAt time.Time
}

// OAuthTTLs are the lives of what a grant issues.
type OAuthTTLs struct {
	Code, Access, Refresh time.Duration
}

// mintToken returns prefix and 32 random bytes, base64url.
func mintToken(prefix string) (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("store: mint token: %w", err)
	}
	return prefix + base64.RawURLEncoding.EncodeToString(b), nil
}

// maxClientsPerDay bounds dynamic registration, which anyone may call: past it,
// registrations are refused until the oldest of the day is a day old.
const maxClientsPerDay = 1000

// RegisterOAuthClient keeps a self-registered client and returns its new id.
func (s *Store) RegisterOAuthClient(ctx context.Context, name string, redirectURIs []string) (OAuthClient, error) {
	id, err := mintToken(OAuthClientPrefix)
	if err != nil {
		return OAuthClient{}, err
	}
	uris, _ := json.Marshal(redirectURIs)
	var c OAuthClient
	err = s.write(ctx, func(w *wtx) error {
		var n int
		if err := w.queryRow(`SELECT count(*) FROM oauth_clients WHERE created_at > ?`, ms(w.now.Add(-24*time.Hour))).Scan(&n); err != nil {
			return fmt.Errorf("store: register oauth client: %w", err)
		}
		if n >= maxClientsPerDay {
			return fmt.Errorf("store: register oauth client: %d clients registered in the last day: %w", n, ErrConflict)
		}
		if _, err := w.exec(`INSERT INTO oauth_clients (client_id, client_name, redirect_uris, created_at) VALUES (?, ?, ?, ?)`,
			id, name, string(uris), ms(w.now)); err != nil {
			return fmt.Errorf("store: register oauth client: %w", err)
		}
		c = OAuthClient{ClientID: id, Name: name, RedirectURIs: redirectURIs, CreatedAt: w.now.UTC()}
		return nil
	})
	return c, err
}

// OAuthClient loads a self-registered client.
func (s *Store) OAuthClient(ctx context.Context, clientID string) (OAuthClient, error) {
	var c OAuthClient
	var uris string
	var created int64
	err := s.queryRow(ctx, `SELECT client_id, client_name, redirect_uris, created_at FROM oauth_clients WHERE client_id = ?`,
		clientID).Scan(&c.ClientID, &c.Name, &uris, &created)
	if notFound(err) {
		return c, fmt.Errorf("store: oauth client: %w", ErrNotFound)
	}
	if err != nil {
		return c, fmt.Errorf("store: load oauth client: %w", err)
	}
	if err := json.Unmarshal([]byte(uris), &c.RedirectURIs); err != nil {
		return c, fmt.Errorf("store: oauth client: decode redirect uris: %w", err)
	}
	c.CreatedAt = fromMS(created)
	return c, nil
}

// NewOAuthGrant is what the operator consented to.
type NewOAuthGrant struct {
	EndpointID    int64
	ClientID      string
	ClientName    string
	RedirectURI   string
	Verified      bool
	CodeChallenge string // PKCE S256 challenge the code is bound to
	CodeTTL       time.Duration
}

// CreateOAuthGrant records a consent and returns the authorization code for it.
// The endpoint must be live.
func (s *Store) CreateOAuthGrant(ctx context.Context, g NewOAuthGrant, actor string) (grantID int64, code string, err error) {
	if code, err = mintToken(OAuthCodePrefix); err != nil {
		return 0, "", err
	}
	err = s.write(ctx, func(w *wtx) error {
		var live int
		if err := w.queryRow(`SELECT count(*) FROM endpoints WHERE id = ? AND revoked_at IS NULL`, g.EndpointID).Scan(&live); err != nil {
			return fmt.Errorf("store: create oauth grant: %w", err)
		}
		if live == 0 {
			return fmt.Errorf("store: create oauth grant: endpoint %d (unknown or revoked): %w", g.EndpointID, ErrNotFound)
		}
		grantID, err = w.insert(`INSERT INTO oauth_grants (endpoint_id, client_id, client_name, redirect_uri, verified,
				created_by, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
			g.EndpointID, g.ClientID, g.ClientName, g.RedirectURI, boolInt(g.Verified), actor, ms(w.now))
		if err != nil {
			return fmt.Errorf("store: create oauth grant: %w", err)
		}
		if _, err := w.exec(`INSERT INTO oauth_codes (code_hash, grant_id, code_challenge, expires_at) VALUES (?, ?, ?, ?)`,
			HashCredential(code), grantID, g.CodeChallenge, ms(w.now.Add(g.CodeTTL))); err != nil {
			return fmt.Errorf("store: create oauth grant: %w", err)
		}
		return w.audit(actor, "oauth.grant", endpointTarget(g.EndpointID), "",
			fmt.Sprintf("grant %d to client %q (%s), redirect %s", grantID, g.ClientName, g.ClientID, g.RedirectURI))
	})
	return grantID, code, err
}

const grantColumns = `g.id, g.endpoint_id, g.client_id, g.client_name, g.redirect_uri, g.verified, g.created_by,
	g.created_at, g.last_used_at, g.revoked_at`

func scanGrant(sc scanner, extra ...any) (OAuthGrant, error) {
	var g OAuthGrant
	var verified, created int64
	var used, revoked sql.NullInt64
	err := sc.Scan(append([]any{&g.ID, &g.EndpointID, &g.ClientID, &g.ClientName, &g.RedirectURI, &verified,
		&g.CreatedBy, &created, &used, &revoked}, extra...)...)
	g.Verified, g.CreatedAt = verified != 0, fromMS(created)
	g.LastUsedAt, g.RevokedAt = fromNullMS(used), fromNullMS(revoked)
	return g, err
}

// OAuthGrants lists the live grants of live endpoints, newest first; of one
// endpoint when endpointID is not 0.
func (s *Store) OAuthGrants(ctx context.Context, endpointID int64) ([]OAuthGrant, error) {
	rows, err := s.query(ctx, `SELECT `+grantColumns+` FROM oauth_grants g JOIN endpoints e ON e.id = g.endpoint_id
		WHERE g.revoked_at IS NULL AND e.revoked_at IS NULL AND (? = 0 OR g.endpoint_id = ?) ORDER BY g.id DESC`,
		endpointID, endpointID)
	if err != nil {
		return nil, fmt.Errorf("store: list oauth grants: %w", err)
	}
	defer rows.Close()
	var out []OAuthGrant
	for rows.Next() {
		g, err := scanGrant(rows)
		if err != nil {
			return nil, fmt.Errorf("store: list oauth grants: %w", err)
		}
		out = append(out, g)
	}
	return out, rows.Err()
}

// OAuthGrant loads one grant, revoked or not.
func (s *Store) OAuthGrant(ctx context.Context, id int64) (OAuthGrant, error) {
	g, err := scanGrant(s.queryRow(ctx, `SELECT `+grantColumns+` FROM oauth_grants g WHERE g.id = ?`, id))
	if notFound(err) {
		return g, fmt.Errorf("store: oauth grant %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return g, fmt.Errorf("store: load oauth grant %d: %w", id, err)
	}
	return g, nil
}

// RevokeOAuthGrant ends a grant: every code and token of it fails from the next
// request on.
func (s *Store) RevokeOAuthGrant(ctx context.Context, id int64, actor string) error {
	return s.write(ctx, func(w *wtx) error {
		ok, err := w.revokeGrant(id, actor, "revoked")
		if err == nil && !ok {
			err = fmt.Errorf("store: revoke oauth grant %d (unknown or already revoked): %w", id, ErrNotFound)
		}
		return err
	})
}

// revokeGrant revokes grant id and audits why; ok is false when it was not live.
func (w *wtx) revokeGrant(id int64, actor, why string) (ok bool, err error) {
	var ep int64
	err = w.queryRow(`UPDATE oauth_grants SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL RETURNING endpoint_id`,
		ms(w.now), id).Scan(&ep)
	if notFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("store: revoke oauth grant %d: %w", id, err)
	}
	// What acts as the endpoint changed: serve processes that see the epoch move
	// end the grant's sessions and streams now, not at their periodic re-check.
	if _, err := w.exec(`UPDATE endpoint_epoch SET epoch = epoch + 1 WHERE id = 1`); err != nil {
		return false, fmt.Errorf("store: revoke oauth grant %d: %w", id, err)
	}
	return true, w.audit(actor, "oauth.revoke", endpointTarget(ep), "", fmt.Sprintf("grant %d: %s", id, why))
}

// revokeEndpointGrants revokes the grants of an endpoint being revoked.
func (w *wtx) revokeEndpointGrants(endpointID int64) error {
	if _, err := w.exec(`UPDATE oauth_grants SET revoked_at = ? WHERE endpoint_id = ? AND revoked_at IS NULL`,
		ms(w.now), endpointID); err != nil {
		return fmt.Errorf("store: revoke endpoint %d: revoke its oauth grants: %w", endpointID, err)
	}
	return nil
}
