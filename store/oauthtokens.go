package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// oauthActor is how the audit log names revocations the protocol makes itself
// (a code or refresh token presented a second time).
const oauthActor = "oauth"

// ErrOAuthReplay is a code or refresh token presented after it was used: its
// grant is revoked by then (what the first use issued may have been stolen).
var ErrOAuthReplay = fmt.Errorf("used before, grant revoked: %w", ErrConflict)

// RedeemOAuthCode exchanges an authorization code for tokens. check is given the
// grant and the code's PKCE challenge and refuses the exchange by returning an
// error (the code stays unused). An unknown, expired or revoked code is
// ErrNotFound; a code used before is ErrOAuthReplay, and its grant is revoked.
func (s *Store) RedeemOAuthCode(ctx context.Context, code string, check func(g OAuthGrant, challenge string) error,
	ttl OAuthTTLs) (OAuthTokens, error) {
	var out OAuthTokens
	var replay *OAuthGrant // the grant revoked because the code was used before
	err := s.write(ctx, func(w *wtx) error {
		out, replay = OAuthTokens{}, nil
		var challenge string
		var expires int64
		var used sql.NullInt64
		g, err := scanGrant(w.queryRow(`SELECT `+grantColumns+`, c.code_challenge, c.expires_at, c.used_at
			FROM oauth_codes c JOIN oauth_grants g ON g.id = c.grant_id WHERE c.code_hash = ?`, HashCredential(code)),
			&challenge, &expires, &used)
		switch {
		case notFound(err):
			return fmt.Errorf("store: redeem oauth code: %w", ErrNotFound)
		case err != nil:
			return fmt.Errorf("store: redeem oauth code: %w", err)
		case used.Valid:
			replay = &g
			_, err := w.revokeGrant(g.ID, oauthActor, "its authorization code was presented a second time")
			return err
		case g.RevokedAt != nil || expires <= ms(w.now):
			return fmt.Errorf("store: redeem oauth code: expired or revoked: %w", ErrNotFound)
		}
		if err := check(g, challenge); err != nil {
			return err
		}
		res, err := w.exec(`UPDATE oauth_codes SET used_at = ? WHERE code_hash = ? AND used_at IS NULL`, ms(w.now), HashCredential(code))
		if err != nil {
			return fmt.Errorf("store: redeem oauth code: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 0 { // another process redeemed it meanwhile
			replay = &g
			_, err := w.revokeGrant(g.ID, oauthActor, "its authorization code was presented twice at once")
			return err
		}
		out, err = w.issueTokens(g.ID, ttl)
		return err
	})
	if err == nil && replay != nil {
		return OAuthTokens{}, fmt.Errorf("store: redeem oauth code: grant %d of client %.100q: %w", replay.ID, replay.ClientID, ErrOAuthReplay)
	}
	return out, err
}

// RefreshOAuth exchanges a refresh token for new tokens, once: the refresh token
// is used up. check is given the grant and may refuse (a client id that is not
// the grant's). Unknown, expired or revoked: ErrNotFound. Used before:
// ErrOAuthReplay, and the grant is revoked.
func (s *Store) RefreshOAuth(ctx context.Context, refresh string, check func(OAuthGrant) error, ttl OAuthTTLs) (OAuthTokens, error) {
	var out OAuthTokens
	var replay *OAuthGrant // the grant revoked because the token was used before
	err := s.write(ctx, func(w *wtx) error {
		out, replay = OAuthTokens{}, nil
		var expires int64
		var used, revoked, epRevoked sql.NullInt64
		g, err := scanGrant(w.queryRow(`SELECT `+grantColumns+`, t.expires_at, t.used_at, t.revoked_at, e.revoked_at
			FROM oauth_tokens t JOIN oauth_grants g ON g.id = t.grant_id JOIN endpoints e ON e.id = g.endpoint_id
			WHERE t.token_hash = ? AND t.kind = 'refresh'`, HashCredential(refresh)),
			&expires, &used, &revoked, &epRevoked)
		switch {
		case notFound(err):
			return fmt.Errorf("store: refresh oauth token: %w", ErrNotFound)
		case err != nil:
			return fmt.Errorf("store: refresh oauth token: %w", err)
		case g.RevokedAt != nil || revoked.Valid || epRevoked.Valid || expires <= ms(w.now):
			return fmt.Errorf("store: refresh oauth token: expired or revoked: %w", ErrNotFound)
		case used.Valid:
			replay = &g
			_, err := w.revokeGrant(g.ID, oauthActor, "a used refresh token was presented again")
			return err
		}
		if err := check(g); err != nil {
			return err
		}
		res, err := w.exec(`UPDATE oauth_tokens SET used_at = ? WHERE token_hash = ? AND used_at IS NULL`, ms(w.now), HashCredential(refresh))
		if err != nil {
			return fmt.Errorf("store: refresh oauth token: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			replay = &g
			_, err := w.revokeGrant(g.ID, oauthActor, "a refresh token was presented twice at once")
			return err
		}
		out, err = w.issueTokens(g.ID, ttl)
		return err
	})
	if err == nil && replay != nil {
		return OAuthTokens{}, fmt.Errorf("store: refresh oauth token: grant %d of client %.100q: %w", replay.ID, replay.ClientID, ErrOAuthReplay)
	}
	return out, err
}

// issueTokens mints an access and a refresh token for grant id.
func (w *wtx) issueTokens(grantID int64, ttl OAuthTTLs) (OAuthTokens, error) {
	out := OAuthTokens{GrantID: grantID, AccessExpiresAt: w.now.Add(ttl.Access).UTC()}
	var err error
	if out.Access, err = mintToken(OAuthAccessPrefix); err != nil {
		return out, err
	}
	if out.Refresh, err = mintToken(OAuthRefreshPrefix); err != nil {
		return out, err
	}
	for _, t := range []struct {
		tok, kind string
		life      time.Duration
	}{{out.Access, "access", ttl.Access}, {out.Refresh, "refresh", ttl.Refresh}} {
		if _, err := w.exec(`INSERT INTO oauth_tokens (token_hash, grant_id, kind, expires_at) VALUES (?, ?, ?, ?)`,
			HashCredential(t.tok), grantID, t.kind, ms(w.now.Add(t.life))); err != nil {
			return OAuthTokens{}, fmt.Errorf("store: issue oauth tokens: %w", err)
		}
	}
	return out, nil
}

// oauthUseEvery: a grant's last use is written at most this often.
const oauthUseEvery = time.Minute

// EndpointByOAuthToken resolves an access token to the live endpoint its live
// grant acts as. Unknown, expired and revoked tokens are all ErrNotFound.
func (s *Store) EndpointByOAuthToken(ctx context.Context, access string) (Endpoint, error) {
	now := s.now()
	var grantID, endpointID int64
	var lastUsed sql.NullInt64
	err := s.queryRow(ctx, `SELECT g.id, g.endpoint_id, g.last_used_at FROM oauth_tokens t JOIN oauth_grants g ON g.id = t.grant_id
		WHERE t.token_hash = ? AND t.kind = 'access' AND t.revoked_at IS NULL AND t.expires_at > ? AND g.revoked_at IS NULL`,
		HashCredential(access), ms(now)).Scan(&grantID, &endpointID, &lastUsed)
	if notFound(err) {
		return Endpoint{}, fmt.Errorf("store: oauth token: %w", ErrNotFound)
	}
	if err != nil {
		return Endpoint{}, fmt.Errorf("store: look up oauth token: %w", err)
	}
	ep, err := s.Endpoint(ctx, endpointID)
	if err != nil {
		return Endpoint{}, err
	}
	if ep.RevokedAt != nil {
		return Endpoint{}, fmt.Errorf("store: oauth token: endpoint revoked: %w", ErrNotFound)
	}
	ep.OAuthGrantID = grantID
	if !lastUsed.Valid || now.Sub(fromMS(lastUsed.Int64)) >= oauthUseEvery {
		err := s.write(ctx, func(w *wtx) error {
			_, err := w.exec(`UPDATE oauth_grants SET last_used_at = ? WHERE id = ?`, ms(w.now), grantID)
			return err
		})
		if err != nil && !errors.Is(err, context.Canceled) {
			s.log.Warn("store: note an oauth grant's use", "grant", grantID, "err", err)
		}
	}
	return ep, nil
}

// RevokeOAuthToken revokes a token a client hands back (RFC 7009): a refresh
// token revokes its grant, an access token itself. A token that is unknown, or
// not clientID's, is no error and changes nothing.
func (s *Store) RevokeOAuthToken(ctx context.Context, token, clientID string) error {
	return s.write(ctx, func(w *wtx) error {
		var kind string
		g, err := scanGrant(w.queryRow(`SELECT `+grantColumns+`, t.kind FROM oauth_tokens t
			JOIN oauth_grants g ON g.id = t.grant_id WHERE t.token_hash = ?`, HashCredential(token)), &kind)
		if notFound(err) || (err == nil && clientID != "" && clientID != g.ClientID) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("store: revoke oauth token: %w", err)
		}
		if kind == "refresh" {
			_, err := w.revokeGrant(g.ID, oauthActor, "the client revoked its refresh token")
			return err
		}
		if _, err := w.exec(`UPDATE oauth_tokens SET revoked_at = ? WHERE token_hash = ? AND revoked_at IS NULL`,
			ms(w.now), HashCredential(token)); err != nil {
			return fmt.Errorf("store: revoke oauth token: %w", err)
		}
		return nil
	})
}

// PruneOAuth deletes codes and tokens that expired before cutoff: they can
// no longer be used, and a reused one is told apart only until it expires.
// Grants and their audit rows stay. It is not audited.
func (s *Store) PruneOAuth(ctx context.Context, cutoff time.Time) (int64, error) {
	var n int64
	err := s.write(ctx, func(w *wtx) error {
		n = 0
		for _, table := range []string{"oauth_codes", "oauth_tokens"} {
			res, err := w.exec(`DELETE FROM `+table+` WHERE expires_at < ?`, ms(cutoff))
			if err != nil {
				return fmt.Errorf("store: prune expired oauth rows (%s): %w", table, err)
			}
			d, _ := res.RowsAffected()
			n += d
		}
		return nil
	})
	return n, err
}
