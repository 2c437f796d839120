package store

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strings"
	"time"

	"github.com/switchboardhq/switchboard/internal/textcut"
)

// WebSession is an operator's login on the board. The token exists only in the browser's
// cookie; the store keeps its SHA-256.
type WebSession struct {
	Operator  Operator
	CreatedAt time.Time
	ExpiresAt time.Time
}

func hashSessionToken(token string) []byte {
	h := sha256.Sum256([]byte("web-session\x00" + token))
	return h[:]
}

// LogIn starts a session for op, as CheckPassword returned it, valid for ttl,
// and returns its token, as CreateWebSession does; but only while op's
// password is still the one checked (ErrBadPassword otherwise). A password
// change or reset between the check and the session (SetPassword, from the CLI
// or another process) ends every session it finds, and must end this one too:
// a login with the old password gets none.
func (s *Store) LogIn(ctx context.Context, op Operator, ttl time.Duration, userAgent, detail string) (string, WebSession, error) {
	if op.checked == "" {
		return "", WebSession{}, fmt.Errorf("store: log in operator %d: no password was checked: %w", op.ID, ErrBadPassword)
	}
	return s.createWebSession(ctx, op.ID, op.checked, ttl, userAgent, detail)
}

// CreateWebSession starts a session for operator operatorID, valid for ttl, and
// returns its token, without a password (LogIn is the board's login). The login
// is audited as the operator.
func (s *Store) CreateWebSession(ctx context.Context, operatorID int64, ttl time.Duration, userAgent, detail string) (string, WebSession, error) {
	return s.createWebSession(ctx, operatorID, "", ttl, userAgent, detail)
}

// createWebSession is CreateWebSession, refused (ErrBadPassword) when checked
// is set and the operator's password hash is no longer it.
func (s *Store) createWebSession(ctx context.Context, operatorID int64, checked string, ttl time.Duration, userAgent, detail string) (string, WebSession, error) {
	token, err := newSessionToken()
	if err != nil {
		return "", WebSession{}, err
	}
	var ws WebSession
	err = s.write(ctx, func(w *wtx) error {
		var created int64
		var hash string
		err := w.queryRow(`SELECT id, username, created_at, password_hash FROM humans WHERE id = ?`, operatorID).
			Scan(&ws.Operator.ID, &ws.Operator.Username, &created, &hash)
		if notFound(err) {
			return fmt.Errorf("store: create session: operator %d: %w", operatorID, ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("store: create session: load operator %d: %w", operatorID, err)
		}
		if checked != "" && hash != checked {
			return fmt.Errorf("store: log in operator %d: the password changed since it was checked: %w", operatorID, ErrBadPassword)
		}
		ws.Operator.CreatedAt = fromMS(created)
		ws.CreatedAt, ws.ExpiresAt = w.now, w.now.Add(ttl)
		if _, err := w.exec(`INSERT INTO web_sessions (token_hash, human_id, created_at, expires_at, user_agent)
			VALUES (?, ?, ?, ?, ?)`, hashSessionToken(token), operatorID, ms(ws.CreatedAt), ms(ws.ExpiresAt),
			textcut.Bytes(displayText(userAgent), 200)); err != nil {
			return fmt.Errorf("store: create session for operator %d: %w", operatorID, err)
		}
		return w.audit(OperatorActor(operatorID), "human.login", OperatorActor(operatorID), "", detail)
	})
	if err != nil {
		return "", WebSession{}, err
	}
	return token, ws, nil
}

// newSessionToken mints a session token: 32 random bytes, base64url.
func newSessionToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("store: mint session token: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// WebSessionByToken resolves a session token to its live session. Unknown and
// expired tokens are both ErrNotFound.
func (s *Store) WebSessionByToken(ctx context.Context, token string) (WebSession, error) {
	var ws WebSession
	var created, expires, hcreated int64
	err := s.queryRow(ctx, `SELECT h.id, h.username, h.created_at, ws.created_at, ws.expires_at
		FROM web_sessions ws JOIN humans h ON h.id = ws.human_id
		WHERE ws.token_hash = ? AND ws.expires_at > ?`, hashSessionToken(token), ms(s.now())).
		Scan(&ws.Operator.ID, &ws.Operator.Username, &hcreated, &created, &expires)
	if notFound(err) {
		return WebSession{}, fmt.Errorf("store: web session: %w", ErrNotFound)
	}
	if err != nil {
		return WebSession{}, fmt.Errorf("store: look up web session: %w", err)
	}
	ws.Operator.CreatedAt, ws.CreatedAt, ws.ExpiresAt = fromMS(hcreated), fromMS(created), fromMS(expires)
	return ws, nil
}

// ExtendWebSession moves a live session's expiry to now+ttl (sliding expiry, so a
// board kept open on a second screen stays logged in while it is used).
func (s *Store) ExtendWebSession(ctx context.Context, token string, ttl time.Duration) error {
	return s.write(ctx, func(w *wtx) error {
		if _, err := w.exec(`UPDATE web_sessions SET expires_at = ? WHERE token_hash = ? AND expires_at > ?`,
			ms(w.now.Add(ttl)), hashSessionToken(token), ms(w.now)); err != nil {
			return fmt.Errorf("store: extend web session: %w", err)
		}
		return nil
	})
}

// DeleteWebSession ends a session (logout), audited as its operator. Deleting an unknown
// session is not an error: logging out twice is fine.
func (s *Store) DeleteWebSession(ctx context.Context, token string) error {
	return s.write(ctx, func(w *wtx) error {
		var operatorID int64
		err := w.queryRow(`DELETE FROM web_sessions WHERE token_hash = ? RETURNING human_id`, hashSessionToken(token)).
			Scan(&operatorID)
		if notFound(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("store: delete web session: %w", err)
		}
		actor := OperatorActor(operatorID)
		return w.audit(actor, "human.logout", actor, "", "")
	})
}

// LiveSession is one of an operator's live sessions, as the board lists them.
type LiveSession struct {
	CreatedAt time.Time
	ExpiresAt time.Time
	UserAgent string
	Current   bool // the session whose token was given: the browser asking
}

// WebSessions lists the live sessions of the operator operatorID, newest first, marking
// the one whose token is current.
func (s *Store) WebSessions(ctx context.Context, operatorID int64, current string) ([]LiveSession, error) {
	rows, err := s.query(ctx, `SELECT created_at, expires_at, user_agent, token_hash = ? FROM web_sessions
		WHERE human_id = ? AND expires_at > ? ORDER BY created_at DESC`, hashSessionToken(current), operatorID, ms(s.now()))
	if err != nil {
		return nil, fmt.Errorf("store: list the sessions of operator %d: %w", operatorID, err)
	}
	defer rows.Close()
	var out []LiveSession
	for rows.Next() {
		var ls LiveSession
		var created, expires int64
		if err := rows.Scan(&created, &expires, &ls.UserAgent, &ls.Current); err != nil {
			return nil, fmt.Errorf("store: list the sessions of operator %d: %w", operatorID, err)
		}
		ls.CreatedAt, ls.ExpiresAt = fromMS(created), fromMS(expires)
		out = append(out, ls)
	}
	return out, rows.Err()
}

// PruneWebSessions deletes sessions that expired before now and says how many went.
func (s *Store) PruneWebSessions(ctx context.Context) (int64, error) {
	var n int64
	err := s.write(ctx, func(w *wtx) error {
		res, err := w.exec(`DELETE FROM web_sessions WHERE expires_at <= ?`, ms(w.now))
		if err != nil {
			return fmt.Errorf("store: prune web sessions: %w", err)
		}
		n, _ = res.RowsAffected()
		return nil
	})
	return n, err
}

// displayText is text from a request header kept for display (a User-Agent may
// carry any bytes): NULs dropped and invalid UTF-8 replaced, which PostgreSQL's
// text columns refuse outright and a page would show replaced anyway.
func displayText(s string) string {
	return strings.ToValidUTF8(strings.ReplaceAll(s, "\x00", ""), "\uFFFD")
}
