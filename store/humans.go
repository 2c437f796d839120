package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
	"unicode/utf8"

	"golang.org/x/crypto/bcrypt"
)

// Human is an operator of the board.
type Human struct {
	ID        int64     `json:"id"`
	Username  string    `json:"username"`
	CreatedAt time.Time `json:"created_at"`
}

// bcryptCost: slow enough to make offline guessing expensive, fast enough for a Pi
// to log someone in (~250 ms there).
const bcryptCost = 11

// CreateHuman creates an operator with a bcrypt hash of password.
func (s *Store) CreateHuman(ctx context.Context, username, password, actor string) (Human, error) {
	if username == "" || len(username) > 64 || !utf8.ValidString(username) {
		return Human{}, fmt.Errorf("store: create human: username must be 1-64 characters: %w", ErrInvalid)
	}
	if len(password) < 8 {
		return Human{}, fmt.Errorf("store: create human: password must be at least 8 characters: %w", ErrInvalid)
	}
	if len(password) > 72 {
		// bcrypt ignores what follows byte 72; refuse rather than silently truncate.
		return Human{}, fmt.Errorf("store: create human: password must be at most 72 bytes: %w", ErrInvalid)
	}
	hash, err := bcrypt.GenerateFromPassword([]byte(password), bcryptCost)
	if err != nil {
		return Human{}, fmt.Errorf("store: hash password: %w", err)
	}
	var h Human
	err = s.write(ctx, func(w *wtx) error {
		err := w.queryRow(`INSERT INTO humans (username, password_hash, created_at) VALUES (?, ?, ?) RETURNING id`,
			username, string(hash), ms(w.now)).Scan(&h.ID)
		if isUnique(err) {
			return fmt.Errorf("store: create human %q: %w", username, ErrAlreadyExists)
		}
		if err != nil {
			return fmt.Errorf("store: create human %q: %w", username, err)
		}
		h.Username, h.CreatedAt = username, w.now
		return w.audit(actor, "human.create", fmt.Sprintf("human:%d", h.ID), "", "username="+username)
	})
	return h, err
}

// ErrBadPassword: the username is unknown or the password does not match. The two
// are deliberately not told apart.
var ErrBadPassword = errors.New("unknown username or wrong password")

// CheckPassword returns the human when password is theirs.
func (s *Store) CheckPassword(ctx context.Context, username, password string) (Human, error) {
	var h Human
	var hash string
	var created int64
	err := s.queryRow(ctx, `SELECT id, username, password_hash, created_at FROM humans WHERE username = ?`, username).
		Scan(&h.ID, &h.Username, &hash, &created)
	if notFound(err) {
		// Spend the same time as a real check so timing does not reveal usernames.
		bcrypt.CompareHashAndPassword(dummyHash(), []byte(password))
		return Human{}, ErrBadPassword
	}
	if err != nil {
		return Human{}, fmt.Errorf("store: look up human: %w", err)
	}
	if bcrypt.CompareHashAndPassword([]byte(hash), []byte(password)) != nil {
		return Human{}, ErrBadPassword
	}
	h.CreatedAt = fromMS(created)
	return h, nil
}

// dummyHash is computed on first use, not at start-up, so CLI commands stay fast.
var dummyHash = sync.OnceValue(func() []byte {
	h, _ := bcrypt.GenerateFromPassword([]byte("switchboard-timing-equaliser"), bcryptCost)
	return h
})

// Human loads one operator.
func (s *Store) Human(ctx context.Context, id int64) (Human, error) {
	var h Human
	var created int64
	err := s.queryRow(ctx, `SELECT id, username, created_at FROM humans WHERE id = ?`, id).Scan(&h.ID, &h.Username, &created)
	if notFound(err) {
		return Human{}, fmt.Errorf("store: human %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return Human{}, fmt.Errorf("store: load human %d: %w", id, err)
	}
	h.CreatedAt = fromMS(created)
	return h, nil
}

// CountHumans says how many operators exist (the board's first-run page needs 0).
func (s *Store) CountHumans(ctx context.Context) (int, error) {
	var n int
	if err := s.queryRow(ctx, `SELECT count(*) FROM humans`).Scan(&n); err != nil {
		return 0, fmt.Errorf("store: count humans: %w", err)
	}
	return n, nil
}
