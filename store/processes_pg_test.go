package store

import (
	"context"
	"testing"
	"time"
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
