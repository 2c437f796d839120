package store

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/internal/testkit"
	"golang.org/x/crypto/bcrypt"
)

func openWebSessionStore(t *testing.T) (*Store, *testkit.Clock) {
	t.Helper()
	clk := testkit.NewClock(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC))
	return openTest(t, Options{Now: clk.Now, Synchronous: SyncNormal}), clk
}

func TestWebSessionLifecycle(t *testing.T) {
	ctx := context.Background()
	s, clk := openWebSessionStore(t)
	h, err := s.CreateOperator(ctx, "ana", "correct horse", "test")
	if err != nil {
		t.Fatal(err)
	}
	token, ws, err := s.CreateWebSession(ctx, h.ID, time.Hour, "test-agent", "ip=127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	if ws.Operator.Username != "ana" || !ws.ExpiresAt.Equal(clk.Now().Add(time.Hour)) {
		t.Fatalf("session = %+v", ws)
	}
	got, err := s.WebSessionByToken(ctx, token)
	if err != nil || got.Operator.ID != h.ID {
		t.Fatalf("WebSessionByToken = %+v, %v", got, err)
	}
	if _, err := s.WebSessionByToken(ctx, token+"x"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("wrong token: err = %v, want ErrNotFound", err)
	}

	// The token itself is not in the database, only its hash.
	var n int
	if err := s.rdb.QueryRowContext(ctx, s.q(`SELECT count(*) FROM web_sessions WHERE token_hash = ?`), []byte(token)).Scan(&n); err != nil || n != 0 {
		t.Fatalf("raw token stored: n=%d err=%v", n, err)
	}

	// Sliding expiry: extend at 50 min, still valid at 100 min, gone after 111.
	clk.Add(50 * time.Minute)
	if err := s.ExtendWebSession(ctx, token, time.Hour); err != nil {
		t.Fatal(err)
	}
	clk.Add(50 * time.Minute)
	if _, err := s.WebSessionByToken(ctx, token); err != nil {
		t.Fatalf("extended session expired early: %v", err)
	}
	clk.Add(11 * time.Minute)
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

// An operator changing their own password keeps the browser they did it in and
// ends every other session they have; a wrong current password, or one changed
// meanwhile, changes nothing.
func TestChangePasswordKeepsOneSession(t *testing.T) {
	ctx := context.Background()
	s, clk := openWebSessionStore(t)
	ana, err := s.CreateOperator(ctx, "ana", "correct horse", "test")
	if err != nil {
		t.Fatal(err)
	}
	bo, err := s.CreateOperator(ctx, "bo", "battery staple", "test")
	if err != nil {
		t.Fatal(err)
	}
	var tokens []string
	for i, ua := range []string{"phone", "laptop", "desk"} {
		tok, _, err := s.CreateWebSession(ctx, ana.ID, time.Hour, ua, "")
		if err != nil {
			t.Fatal(err)
		}
		tokens = append(tokens, tok)
		clk.Add(time.Duration(i+1) * time.Minute)
	}
	boTok, _, err := s.CreateWebSession(ctx, bo.ID, time.Hour, "bo's", "")
	if err != nil {
		t.Fatal(err)
	}

	live, err := s.WebSessions(ctx, ana.ID, tokens[1])
	if err != nil || len(live) != 3 {
		t.Fatalf("WebSessions = %+v, %v", live, err)
	}
	for i, want := range []struct {
		ua      string
		current bool
	}{{"desk", false}, {"laptop", true}, {"phone", false}} {
		if live[i].UserAgent != want.ua || live[i].Current != want.current {
			t.Fatalf("session %d = %+v, want %+v (newest first, the asking one marked)", i, live[i], want)
		}
	}

	if _, err := s.ChangePassword(ctx, "ana", "wrong horse", "new password!", tokens[1], "human:1"); !errors.Is(err, ErrBadPassword) {
		t.Fatalf("wrong current password: %v", err)
	}
	if _, err := s.ChangePassword(ctx, "ana", "correct horse", "short", tokens[1], "human:1"); !errors.Is(err, ErrInvalid) {
		t.Fatalf("too short a new password: %v", err)
	}
	if live, _ := s.WebSessions(ctx, ana.ID, tokens[1]); len(live) != 3 {
		t.Fatalf("a refused change ended sessions: %d left", len(live))
	}
	if _, err := s.CheckPassword(ctx, "ana", "correct horse"); err != nil {
		t.Fatalf("a refused change changed the password: %v", err)
	}

	change, err := s.ChangePassword(ctx, "ana", "correct horse", "new password!", tokens[1], "human:1")
	if err != nil || change.Ended != 2 || change.Token == "" || change.Token == tokens[1] {
		t.Fatalf("ChangePassword = %+v, %v; want 2 sessions ended and a new token", change, err)
	}
	// Every old token stops working, the kept session's too: it goes on under
	// its new token, as it was.
	for i, tok := range tokens {
		if _, err := s.WebSessionByToken(ctx, tok); !errors.Is(err, ErrNotFound) {
			t.Fatalf("session %d's old token after the change: %v", i, err)
		}
	}
	if ws, err := s.WebSessionByToken(ctx, change.Token); err != nil || ws.Operator.ID != ana.ID {
		t.Fatalf("the kept session under its new token: %+v, %v", ws, err)
	}
	if live, _ := s.WebSessions(ctx, ana.ID, change.Token); len(live) != 1 || !live[0].Current || live[0].UserAgent != "laptop" {
		t.Fatalf("after the change: %+v", live)
	}
	tokens[1] = change.Token
	if _, err := s.WebSessionByToken(ctx, boTok); err != nil {
		t.Fatalf("another operator's session ended: %v", err)
	}
	if _, err := s.CheckPassword(ctx, "ana", "new password!"); err != nil {
		t.Fatalf("new password: %v", err)
	}
	if _, err := s.CheckPassword(ctx, "ana", "correct horse"); !errors.Is(err, ErrBadPassword) {
		t.Fatalf("old password still works: %v", err)
	}
	rows, err := s.ListAudit(ctx, AuditFilter{Action: "human.password"})
	if err != nil || len(rows) != 1 || rows[0].Actor != "human:1" || rows[0].Detail != "sessions ended=2" {
		t.Fatalf("audit = %+v, %v", rows, err)
	}

	// Another session of ana's, then end the others from the kept one.
	if _, _, err := s.CreateWebSession(ctx, ana.ID, time.Hour, "tablet", ""); err != nil {
		t.Fatal(err)
	}
	if n, err := s.EndOtherSessions(ctx, "ana", tokens[1], "human:1"); err != nil || n != 1 {
		t.Fatalf("EndOtherSessions = %d, %v; want 1", n, err)
	}
	if live, _ := s.WebSessions(ctx, ana.ID, tokens[1]); len(live) != 1 || !live[0].Current {
		t.Fatalf("after ending the others: %+v", live)
	}
	if rows, _ := s.ListAudit(ctx, AuditFilter{Action: "human.logout_others"}); len(rows) != 1 {
		t.Fatalf("logout_others audit = %+v", rows)
	}
}

// A password changed between the check and the write (an admin passwd from the
// CLI) is not overwritten, and the sessions stay.
func TestChangePasswordLosesToAChangeMeanwhile(t *testing.T) {
	ctx := context.Background()
	s, _ := openWebSessionStore(t)
	h, err := s.CreateOperator(ctx, "ana", "correct horse", "test")
	if err != nil {
		t.Fatal(err)
	}
	_, old, err := s.checkPassword(ctx, "ana", "correct horse")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.SetPassword(ctx, "ana", "set by the cli", "human:cli"); err != nil {
		t.Fatal(err)
	}
	tok, _, err := s.CreateWebSession(ctx, h.ID, time.Hour, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.CreateWebSession(ctx, h.ID, time.Hour, "", ""); err != nil {
		t.Fatal(err)
	}
	newHash, err := s.hashPassword("changed on the board")
	if err != nil {
		t.Fatal(err)
	}
	if c, err := s.replacePassword(ctx, "ana", old, "changed on the board", newHash, tok, "human:1"); !errors.Is(err, ErrBadPassword) || c.Token != "" {
		t.Fatalf("a change checked against the old password: %v, want ErrBadPassword", err)
	}
	if _, err := s.CheckPassword(ctx, "ana", "set by the cli"); err != nil {
		t.Fatalf("the CLI's password was overwritten: %v", err)
	}
	if live, _ := s.WebSessions(ctx, h.ID, tok); len(live) != 2 {
		t.Fatalf("the refused change ended sessions: %d left", len(live))
	}
}

// The same change sent twice (a double click): the second, checked against the
// old password before the first stored the new one, finds the new one already
// stored and is done, not refused as a wrong current password.
func TestChangePasswordSentTwice(t *testing.T) {
	ctx := context.Background()
	s, _ := openWebSessionStore(t)
	h, err := s.CreateOperator(ctx, "ana", "correct horse", "test")
	if err != nil {
		t.Fatal(err)
	}
	var tokens []string
	for range 2 {
		tok, _, err := s.CreateWebSession(ctx, h.ID, time.Hour, "", "")
		if err != nil {
			t.Fatal(err)
		}
		tokens = append(tokens, tok)
	}
	// The second request's check and hash, before the first request's write.
	_, old, err := s.checkPassword(ctx, "ana", "correct horse")
	if err != nil {
		t.Fatal(err)
	}
	second, err := s.hashPassword("new password!")
	if err != nil {
		t.Fatal(err)
	}
	first, err := s.ChangePassword(ctx, "ana", "correct horse", "new password!", tokens[0], "human:1")
	if err != nil || first.Ended != 1 || first.Token == "" {
		t.Fatalf("the first change: %+v, %v", first, err)
	}
	if c, err := s.replacePassword(ctx, "ana", old, "new password!", second, tokens[0], "human:1"); err != nil || c != (PasswordChange{}) {
		t.Fatalf("the same change again: %+v, %v; want done, nothing more ended or renewed", c, err)
	}
	if _, err := s.CheckPassword(ctx, "ana", "new password!"); err != nil {
		t.Fatalf("the new password: %v", err)
	}
	if _, err := s.WebSessionByToken(ctx, first.Token); err != nil {
		t.Fatalf("the session kept: %v", err)
	}
}

// A login whose User-Agent carries bytes that are not text (a NUL, invalid UTF-8)
// still starts its session: PostgreSQL's text columns would refuse them, so the
// store keeps what can be shown.
func TestWebSessionKeepsAUserAgentThatIsNotText(t *testing.T) {
	ctx := context.Background()
	s, _ := openWebSessionStore(t)
	h, err := s.CreateOperator(ctx, "ana", "correct horse", "test")
	if err != nil {
		t.Fatal(err)
	}
	token, _, err := s.CreateWebSession(ctx, h.ID, time.Hour, "curl\x00/8\xff", "ip=127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	live, err := s.WebSessions(ctx, h.ID, token)
	if err != nil || len(live) != 1 || live[0].UserAgent != "curl/8\uFFFD" {
		t.Fatalf("sessions = %+v, %v; want one with the user agent curl/8\uFFFD", live, err)
	}
}

// Password hashes are made at the store's PasswordCost: 11 unless set (tests set
// bcrypt's least), and a cost bcrypt does not take is refused at Open.
func TestPasswordCost(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: bcrypt at the default cost, which the race detector makes 13 s")
	}
	ctx := context.Background()
	for _, c := range []struct{ set, want int }{{0, 11}, {bcrypt.MinCost, bcrypt.MinCost}} {
		s, err := Open(ctx, testkit.DB(t), Options{PasswordCost: c.set, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		h, err := s.CreateOperator(ctx, "ana", "correct horse", "test")
		if err != nil {
			t.Fatal(err)
		}
		var hash string
		if err := s.rdb.QueryRowContext(ctx, s.q(`SELECT password_hash FROM humans WHERE id = ?`), h.ID).Scan(&hash); err != nil {
			t.Fatal(err)
		}
		if cost, err := bcrypt.Cost([]byte(hash)); err != nil || cost != c.want {
			t.Errorf("PasswordCost %d: the hash's cost is %d (%v), want %d", c.set, cost, err, c.want)
		}
		if _, err := s.CheckPassword(ctx, "ana", "correct horse"); err != nil {
			t.Errorf("PasswordCost %d: the password does not check: %v", c.set, err)
		}
		if _, err := s.CheckPassword(ctx, "nobody", "correct horse"); !errors.Is(err, ErrBadPassword) {
			t.Errorf("PasswordCost %d: an unknown operator answered %v", c.set, err)
		}
	}
	for _, cost := range []int{bcrypt.MinCost - 1, bcrypt.MaxCost + 1} {
		if s, err := Open(ctx, testkit.DB(t), Options{PasswordCost: cost}); err == nil {
			s.Close()
			t.Errorf("Open took PasswordCost %d", cost)
		}
	}
}

// A login whose password was changed or reset between its check and its
// session gets none: the reset ended the sessions it found, and the one made
// after it with the old password must not outlive it.
func TestLogInRacingAPasswordReset(t *testing.T) {
	s := openTest(t, Options{})
	ctx := context.Background()
	if _, err := s.CreateOperator(ctx, "ana", "old password 1", "test"); err != nil {
		t.Fatal(err)
	}
	op, err := s.CheckPassword(ctx, "ana", "old password 1")
	if err != nil {
		t.Fatal(err)
	}
	checked, err := s.PasswordStamp(ctx, "ana")
	if err != nil || op.PasswordStamp() != checked {
		t.Fatalf("the stamp of the password checked: %q, want %q (%v)", op.PasswordStamp(), checked, err)
	}
	if _, _, err := s.SetPassword(ctx, "ana", "new password 2", "human:admin"); err != nil {
		t.Fatal(err)
	}
	// What the login binds its device cookie to stays the old password's.
	if now, _ := s.PasswordStamp(ctx, "ana"); op.PasswordStamp() != checked || now == checked {
		t.Fatalf("after the reset: the login's stamp %q, the checked %q, now %q", op.PasswordStamp(), checked, now)
	}
	if token, _, err := s.LogIn(ctx, op, time.Hour, "ua", "ip=1"); !errors.Is(err, ErrBadPassword) {
		t.Fatalf("a login checked against the old password: token %q, %v; want ErrBadPassword", token, err)
	}
	if op, err = s.CheckPassword(ctx, "ana", "new password 2"); err != nil {
		t.Fatal(err)
	}
	token, _, err := s.LogIn(ctx, op, time.Hour, "ua", "ip=1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.WebSessionByToken(ctx, token); err != nil {
		t.Fatalf("the session of a login with the new password: %v", err)
	}
	if _, _, err := s.LogIn(ctx, Operator{ID: op.ID}, time.Hour, "ua", "ip=1"); !errors.Is(err, ErrBadPassword) {
		t.Fatalf("a login with no password checked: %v", err)
	}
}
