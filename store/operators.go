package store

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"golang.org/x/crypto/bcrypt"
)

// Operator is a person who uses the board and the CLI. What an operator does
// is recorded as OperatorActor(ID), "human:<id>", in audit rows and created_by:
// that format is a data contract (DESIGN.md), and so is the table's name,
// humans; neither changed when the type took the product's word.
type Operator struct {
	ID        int64     `json:"id"`
	Username  string    `json:"username"`
	CreatedAt time.Time `json:"created_at"`
	// checked is the password hash CheckPassword matched (see LogIn).
	checked string
}

// OperatorActor is how an operator's actions are recorded: human:<id>.
func OperatorActor(id int64) string { return fmt.Sprintf("human:%d", id) }

// bcryptCost: slow enough to make offline guessing expensive, fast enough for a Pi
// to log someone in (~250 ms there).
const bcryptCost = 11

// CreateOperator creates an operator with a bcrypt hash of password.
func (s *Store) CreateOperator(ctx context.Context, username, password, actor string) (Operator, error) {
	if username == "" || len(username) > 64 {
		return Operator{}, fmt.Errorf("store: create operator: username must be 1-64 bytes: %w", ErrInvalid)
	}
	if !utf8.ValidString(username) || strings.ContainsFunc(username, func(r rune) bool { return unicode.IsControl(r) || r == utf8.RuneError }) {
		// No control character and no U+FFFD: PostgreSQL stores a NUL as one, and
		// a login looks a name it cannot hold up as stored (readArgs), so that
		// many spellings would find one such name.
		return Operator{}, fmt.Errorf("store: create operator: username must be UTF-8 text without control characters or U+FFFD: %w", ErrInvalid)
	}
	hash, err := s.hashPassword(password)
	if err != nil {
		return Operator{}, fmt.Errorf("store: create operator: %w", err)
	}
	var h Operator
	err = s.write(ctx, func(w *wtx) error {
		err := w.queryRow(`INSERT INTO humans (username, password_hash, created_at) VALUES (?, ?, ?) RETURNING id`,
			username, hash, ms(w.now)).Scan(&h.ID)
		if isUnique(err) {
			return fmt.Errorf("store: create operator %q: %w", username, ErrAlreadyExists)
		}
		if err != nil {
			return fmt.Errorf("store: create operator %q: %w", username, err)
		}
		h.Username, h.CreatedAt = username, w.now
		return w.audit(actor, "human.create", OperatorActor(h.ID), "", "username="+username)
	})
	return h, err
}

// hashPassword checks that password is one bcrypt takes whole, and hashes it
// at the store's PasswordCost.
func (s *Store) hashPassword(password string) (string, error) {
	if len(password) < 8 {
		return "", fmt.Errorf("password must be at least 8 characters: %w", ErrInvalid)
	}
	if len(password) > 72 {
		// bcrypt ignores what follows byte 72; refuse rather than silently truncate.
		return "", fmt.Errorf("password must be at most 72 bytes: %w", ErrInvalid)
	}
	hash, err := bcrypt.GenerateFromPassword([]byte(password), s.opts.PasswordCost)
	if err != nil {
		return "", fmt.Errorf("hash password: %w", err)
	}
	return string(hash), nil
}

// SetPassword gives the operator username a new password and ends every session
// they have, on every browser: whoever knew the old password, or holds a session
// made with it, is out. It returns the operator and how many sessions it ended.
func (s *Store) SetPassword(ctx context.Context, username, password, actor string) (Operator, int64, error) {
	hash, err := s.hashPassword(password)
	if err != nil {
		return Operator{}, 0, fmt.Errorf("store: set the password of %q: %w", username, err)
	}
	return s.endSessions(ctx, username, actor, "human.password", nil, func(w *wtx, id int64) error {
		if _, err := w.exec(`UPDATE humans SET password_hash = ? WHERE id = ?`, hash, id); err != nil {
			return fmt.Errorf("store: set the password of %q: %w", username, err)
		}
		return nil
	})
}

// PasswordChange is what ChangePassword did.
type PasswordChange struct {
	Ended int64 // how many of the operator's other sessions it ended
	// Token replaces the kept session's token, which stops working: a copy of
	// the cookie taken before the change is of no use after it. "" when the
	// change had been made already (see ChangePassword).
	Token string
}

// ChangePassword is the operator username changing their own password: current
// must be theirs (ErrBadPassword otherwise), and every session they have ends but
// the one whose token is keep, the browser they changed it in, which is given a
// new token. bcrypt runs before the write, not in it; the new password is stored
// only if the old one is still the one checked, so a change made meanwhile (admin
// passwd) is not overwritten: that is ErrBadPassword too, unless it made password
// the password already (the same form sent twice, a double click), which is then
// done.
func (s *Store) ChangePassword(ctx context.Context, username, current, password, keep, actor string) (PasswordChange, error) {
	_, old, err := s.checkPassword(ctx, username, current)
	if err != nil {
		return PasswordChange{}, err
	}
	hash, err := s.hashPassword(password)
	if err != nil {
		return PasswordChange{}, fmt.Errorf("store: change the password of %q: %w", username, err)
	}
	return s.replacePassword(ctx, username, old, password, hash, keep, actor)
}

// errChangedMeanwhile: the password is no longer the one ChangePassword checked.
var errChangedMeanwhile = fmt.Errorf("it was changed meanwhile: %w", ErrBadPassword)

// replacePassword stores hash, of password, as username's password if it is still
// old, gives keep's session a new token and ends the others. If the password is
// no longer old but password is already theirs (the first of two identical
// changes stored it), there is nothing left to do.
func (s *Store) replacePassword(ctx context.Context, username, old, password, hash, keep, actor string) (PasswordChange, error) {
	token, err := newSessionToken()
	if err != nil {
		return PasswordChange{}, err
	}
	rotated := false
	_, ended, err := s.endSessions(ctx, username, actor, "human.password", hashSessionToken(token), func(w *wtx, id int64) error {
		res, err := w.exec(`UPDATE humans SET password_hash = ? WHERE id = ? AND password_hash = ?`, hash, id, old)
		if err != nil {
			return fmt.Errorf("store: change the password of %q: %w", username, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("store: change the password of %q: %w", username, errChangedMeanwhile)
		}
		// Before the others are ended, which spares the session of this token.
		res, err = w.exec(`UPDATE web_sessions SET token_hash = ? WHERE token_hash = ? AND human_id = ?`,
			hashSessionToken(token), hashSessionToken(keep), id)
		if err != nil {
			return fmt.Errorf("store: renew the session of %q: %w", username, err)
		}
		n, _ := res.RowsAffected()
		rotated = n == 1
		return nil
	})
	if errors.Is(err, errChangedMeanwhile) {
		if _, _, cerr := s.checkPassword(ctx, username, password); cerr == nil {
			return PasswordChange{}, nil
		}
	}
	if err != nil || !rotated {
		token = ""
	}
	return PasswordChange{Ended: ended, Token: token}, err
}

// EndSessions logs the operator username out of every browser, and returns the
// operator and how many sessions it ended.
func (s *Store) EndSessions(ctx context.Context, username, actor string) (Operator, int64, error) {
	return s.endSessions(ctx, username, actor, "human.logout_all", nil, nil)
}

// EndOtherSessions logs the operator username out of every browser but the one
// whose session token is keep, and says how many sessions it ended.
func (s *Store) EndOtherSessions(ctx context.Context, username, keep, actor string) (int64, error) {
	_, ended, err := s.endSessions(ctx, username, actor, "human.logout_others", hashSessionToken(keep), nil)
	return ended, err
}

// endSessions runs also (if any) on the operator username and deletes their
// sessions but the one whose token hashes to keep (none when nil), in one write
// audited as action.
func (s *Store) endSessions(ctx context.Context, username, actor, action string, keep []byte, also func(*wtx, int64) error) (Operator, int64, error) {
	var h Operator
	var ended int64
	err := s.write(ctx, func(w *wtx) error {
		var created int64
		err := w.queryRow(`SELECT id, username, created_at FROM humans WHERE username = ?`, username).
			Scan(&h.ID, &h.Username, &created)
		if notFound(err) {
			return fmt.Errorf("store: operator %q: %w", username, ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("store: look up operator %q: %w", username, err)
		}
		h.CreatedAt = fromMS(created)
		if also != nil {
			if err := also(w, h.ID); err != nil {
				return err
			}
		}
		// Expired sessions go too, but only live ones count as ended: the count
		// is told beside the live sessions the board listed. The count is of the
		// rows the DELETE took, so a login committed meanwhile by another process
		// (PostgreSQL) is counted if it is ended.
		if ended, err = w.endSessionRows(h.ID, keep); err != nil {
			return fmt.Errorf("store: end the sessions of %q: %w", username, err)
		}
		return w.audit(actor, action, OperatorActor(h.ID), "", fmt.Sprintf("sessions ended=%d", ended))
	})
	return h, ended, err
}

// endSessionRows deletes operator id's sessions but keep's and says how many of
// them were live.
func (w *wtx) endSessionRows(id int64, keep []byte) (live int64, err error) {
	rows, err := w.query(`DELETE FROM web_sessions WHERE human_id = ? AND token_hash IS NOT ? RETURNING expires_at`, id, keep)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	for rows.Next() {
		var expires int64
		if err := rows.Scan(&expires); err != nil {
			return 0, err
		}
		if expires > ms(w.now) {
			live++
		}
	}
	return live, rows.Err()
}

// OperatorSummary is an operator with what the CLI lists about them.
type OperatorSummary struct {
	Operator
	Sessions int64 `json:"sessions"` // live sessions
	// LastLogin is their latest login, as the audit log has it (else, its rows
	// pruned, their newest live session's start), whether or not its session
	// still lives.
	LastLogin *time.Time `json:"last_login,omitempty"`
}

// ListOperators lists every operator, oldest first, with their live sessions.
func (s *Store) ListOperators(ctx context.Context) ([]OperatorSummary, error) {
	rows, err := s.query(ctx, `SELECT h.id, h.username, h.created_at, count(ws.human_id), coalesce(
			(SELECT at FROM audit WHERE actor = 'human:' || h.id AND action = 'human.login' AND outcome = 'ok'
				ORDER BY id DESC LIMIT 1),
			max(ws.created_at))
		FROM humans h LEFT JOIN web_sessions ws ON ws.human_id = h.id AND ws.expires_at > ?
		GROUP BY h.id ORDER BY h.id`, ms(s.now()))
	if err != nil {
		return nil, fmt.Errorf("store: list operators: %w", err)
	}
	defer rows.Close()
	var out []OperatorSummary
	for rows.Next() {
		var o OperatorSummary
		var created int64
		var last sql.NullInt64
		if err := rows.Scan(&o.ID, &o.Username, &created, &o.Sessions, &last); err != nil {
			return nil, fmt.Errorf("store: list operators: %w", err)
		}
		o.CreatedAt = fromMS(created)
		if last.Valid {
			t := fromMS(last.Int64)
			o.LastLogin = &t
		}
		out = append(out, o)
	}
	return out, rows.Err()
}

// ErrBadPassword: the username is unknown or the password does not match. The two
// are deliberately not told apart.
var ErrBadPassword = errors.New("unknown username or wrong password")

// CheckPassword returns the operator when password is theirs.
func (s *Store) CheckPassword(ctx context.Context, username, password string) (Operator, error) {
	h, _, err := s.checkPassword(ctx, username, password)
	return h, err
}

// checkPassword returns the operator when password is theirs, and the hash it matched.
func (s *Store) checkPassword(ctx context.Context, username, password string) (Operator, string, error) {
	var h Operator
	var hash string
	var created int64
	err := s.queryRow(ctx, `SELECT id, username, password_hash, created_at FROM humans WHERE username = ?`, username).
		Scan(&h.ID, &h.Username, &hash, &created)
	if notFound(err) {
		// Spend the same time as a real check so timing does not reveal usernames.
		bcrypt.CompareHashAndPassword(s.dummyHash(), []byte(password))
		return Operator{}, "", ErrBadPassword
	}
	if err != nil {
		return Operator{}, "", fmt.Errorf("store: look up operator: %w", err)
	}
	if bcrypt.CompareHashAndPassword([]byte(hash), []byte(password)) != nil {
		return Operator{}, "", ErrBadPassword
	}
	h.CreatedAt, h.checked = fromMS(created), hash
	return h, hash, nil
}

// PasswordStamp is a digest of username's password hash, "" when there is no such
// operator: it changes with every new password, so what is bound to it (the
// board's device cookies) ends with the password.
func (s *Store) PasswordStamp(ctx context.Context, username string) (string, error) {
	var hash string
	err := s.queryRow(ctx, `SELECT password_hash FROM humans WHERE username = ?`, username).Scan(&hash)
	if notFound(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("store: look up operator: %w", err)
	}
	return passwordStamp(hash), nil
}

// PasswordStamp is PasswordStamp of the password CheckPassword matched for o,
// whatever the password is now; "" for an operator no password was checked for.
func (o Operator) PasswordStamp() string {
	if o.checked == "" {
		return ""
	}
	return passwordStamp(o.checked)
}

// passwordStamp is the digest of a password hash that PasswordStamp gives.
func passwordStamp(hash string) string {
	sum := sha256.Sum256([]byte(hash))
	return hex.EncodeToString(sum[:16])
}

// Operator loads one operator.
func (s *Store) Operator(ctx context.Context, id int64) (Operator, error) {
	var h Operator
	var created int64
	err := s.queryRow(ctx, `SELECT id, username, created_at FROM humans WHERE id = ?`, id).Scan(&h.ID, &h.Username, &created)
	if notFound(err) {
		return Operator{}, fmt.Errorf("store: operator %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return Operator{}, fmt.Errorf("store: load operator %d: %w", id, err)
	}
	h.CreatedAt = fromMS(created)
	return h, nil
}

// CountOperators says how many operators exist (the board's first-run page needs 0).
func (s *Store) CountOperators(ctx context.Context) (int, error) {
	var n int
	if err := s.queryRow(ctx, `SELECT count(*) FROM humans`).Scan(&n); err != nil {
		return 0, fmt.Errorf("store: count operators: %w", err)
	}
	return n, nil
}
