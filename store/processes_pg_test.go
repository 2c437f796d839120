package store

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/internal/testkit"
)

// A process that does not hold the reaper's role, whose holder's lease stands,
// takes no lock on the role's row as it beats. Its heartbeat shares a write
// transaction with other requests (claims lock queue_counts rows): were every
// process to lock the leaders row every beat, two processes' batches could take
// that row and a queue's row in opposite orders and deadlock (40P01).
func TestHeartbeatOfANonHolderLocksNoLeaderRow(t *testing.T) {
	a, b := twoWriters(t)
	ctx := context.Background()
	for _, id := range []string{"a", "b"} {
		if err := a.RegisterProcess(ctx, Process{ID: id, Host: "h", PID: 1, Version: "v"}); err != nil {
			t.Fatal(err)
		}
	}
	beat := Beat{Roles: []string{RoleReaper}, LeaseFor: time.Minute}
	if held, err := a.ProcessBeat(ctx, "a", beat); err != nil || len(held) != 1 {
		t.Fatalf("a's beat: %v, %v; want it to lead", held, err)
	}
	// The holder's own batch holds the row (its renewal), as it waits on something else.
	db, tx := otherProcessTx(t, a)
	if _, err := tx.Exec(`SELECT role FROM leaders WHERE role = 'reaper' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	type result struct {
		held []string
		err  error
	}
	done := make(chan result, 1)
	go func() {
		held, err := b.ProcessBeat(ctx, "b", beat)
		done <- result{held, err}
	}()
	for {
		select {
		case r := <-done:
			if r.err != nil || len(r.held) != 0 {
				t.Fatalf("b's beat: %v, %v; want no role", r.held, r.err)
			}
			return
		default:
		}
		var waiting int
		if err := db.QueryRow(`SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'
			AND query LIKE '%INSERT INTO leaders%'`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting > 0 {
			t.Fatal("b's heartbeat waits for the lock on the leaders row that a holds")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// On PostgreSQL a role's lease is timed by the database's clock: a process on a
// host whose clock runs a minute ahead does not take the role from one whose
// clock runs a minute behind, though by its own clock that lease ran out long
// ago. Once the holder's lease has lapsed by the database's clock, it does.
func TestRoleLeasesFollowTheDatabasesClock(t *testing.T) {
	ctx := context.Background()
	url := testkit.PostgresURL(t)
	open := func(skew time.Duration) *Store {
		s, err := Open(ctx, url, Options{Now: func() time.Time { return time.Now().Add(skew) },
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	behind, ahead := open(-time.Minute), open(time.Minute)
	for id, s := range map[string]*Store{"behind": behind, "ahead": ahead} {
		if err := s.RegisterProcess(ctx, Process{ID: id, Host: id, PID: 1, Version: "v"}); err != nil {
			t.Fatal(err)
		}
	}
	leads := func(s *Store, id string, lease time.Duration) bool {
		t.Helper()
		held, err := s.ProcessBeat(ctx, id, Beat{Roles: []string{RoleReaper}, LeaseFor: lease})
		if err != nil {
			t.Fatal(err)
		}
		return slices.Equal(held, []string{RoleReaper})
	}
	if !leads(behind, "behind", 6*time.Second) {
		t.Fatal("the first to beat does not lead")
	}
	if leads(ahead, "ahead", 6*time.Second) {
		t.Fatal("the process whose clock runs ahead took the role while its holder's lease ran")
	}
	list, err := ahead.ListProcesses(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range list {
		if want := p.ID == "behind"; slices.Contains(p.Roles, RoleReaper) != want {
			t.Fatalf("process %s: leads should be %v (%+v)", p.ID, want, list)
		}
	}
	if !leads(behind, "behind", -time.Second) { // a renewal whose lease has lapsed already
		t.Fatal("the holder lost the role renewing it")
	}
	if !leads(ahead, "ahead", 6*time.Second) || leads(behind, "behind", 6*time.Second) {
		t.Fatal("once the lease lapsed, the other process should take the role and keep it")
	}
}
