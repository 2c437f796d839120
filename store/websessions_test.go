package store

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// webSessionClock is a settable clock for session expiry tests.
type webSessionClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *webSessionClock) now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *webSessionClock) add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

func openWebSessionStore(t *testing.T) (*Store, *webSessionClock) {
	t.Helper()
	clk := &webSessionClock{t: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)}
	s, err := Open(context.Background(), filepath.Join(t.TempDir(), "sb.db"), Options{Now: clk.now, Synchronous: SyncNormal})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, clk
}

func TestWebSessionLifecycle(t *testing.T) {
	ctx := context.Background()
	s, clk := openWebSessionStore(t)
	h, err := s.CreateHuman(ctx, "ana", "correct horse", "test")
	if err != nil {
		t.Fatal(err)
	}
	token, ws, err := s.CreateWebSession(ctx, h.ID, time.Hour, "test-agent", "ip=127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	if ws.Human.Username != "ana" || !ws.ExpiresAt.Equal(clk.now().Add(time.Hour)) {
		t.Fatalf("session = %+v", ws)
	}
	got, err := s.WebSessionByToken(ctx, token)
	if err != nil || got.Human.ID != h.ID {
		t.Fatalf("WebSessionByToken = %+v, %v", got, err)
	}
	if _, err := s.WebSessionByToken(ctx, token+"x"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("wrong token: err = %v, want ErrNotFound", err)
	}

	// The token itself is not in the database, only its hash.
	var n int
	if err := s.rdb.QueryRowContext(ctx, `SELECT count(*) FROM web_sessions WHERE token_hash = ?`, []byte(token)).Scan(&n); err != nil || n != 0 {
		t.Fatalf("raw token stored: n=%d err=%v", n, err)
	}

	// Sliding expiry: extend at 50 min, still valid at 100 min, gone after 111.
	clk.add(50 * time.Minute)
	if err := s.ExtendWebSession(ctx, token, time.Hour); err != nil {
		t.Fatal(err)
	}
	clk.add(50 * time.Minute)
	if _, err := s.WebSessionByToken(ctx, token); err != nil {
		t.Fatalf("extended session expired early: %v", err)
	}
	clk.add(11 * time.Minute)
	if _, err := s.WebSessionByToken(ctx, token); !errors.Is(err, ErrNotFound) {
		t.Fatalf("expired session: err = %v, want ErrNotFound", err)
	}
	if n, err := s.PruneWebSessions(ctx); err != nil || n != 1 {
		t.Fatalf("PruneWebSessions = %d, %v; want 1", n, err)
	}

	token2, _, err := s.CreateWebSession(ctx, h.ID, time.Hour, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteWebSession(ctx, token2); err != nil {
		t.Fatal(err)
	}
	if _, err := s.WebSessionByToken(ctx, token2); !errors.Is(err, ErrNotFound) {
		t.Fatalf("deleted session: err = %v", err)
	}
	if err := s.DeleteWebSession(ctx, token2); err != nil {
		t.Fatalf("second logout: %v", err)
	}
	rows, err := s.ListAudit(ctx, AuditFilter{Actor: "human:1"})
	if err != nil {
		t.Fatal(err)
	}
	var actions []string
	for _, r := range rows {
		actions = append(actions, r.Action)
	}
	want := []string{"human.logout", "human.login", "human.login"}
	if len(actions) != len(want) {
		t.Fatalf("audit actions = %v, want %v", actions, want)
	}
	for i := range want {
		if actions[i] != want[i] {
			t.Fatalf("audit actions = %v, want %v", actions, want)
		}
	}
}

func TestCreateWebSessionUnknownHuman(t *testing.T) {
	s, _ := openWebSessionStore(t)
	if _, _, err := s.CreateWebSession(context.Background(), 42, time.Hour, "", ""); !errors.Is(err, ErrNotFound) {
		t.Fatalf("err = %v, want ErrNotFound", err)
	}
}
