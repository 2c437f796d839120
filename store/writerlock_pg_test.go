package store

import (
	"context"
	"database/sql"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/internal/testkit"
)

// A writer lock the server refuses (a lock_timeout or statement_timeout that
// the role, the database or the URL sets, while another process holds the lock
// longer) fails the writes of that batch alone: the transaction it opened is
// rolled back, and the next batch, once the lock is free, commits on the same
// connection. Both kinds of batch are tried: an add, which begins its
// transaction on its own, and a claim, which is pipelined.
func TestARefusedWriterLockFailsOneBatchOnly(t *testing.T) {
	url := testkit.PostgresURL(t) + "&lock_timeout=100"
	ctx := context.Background()
	s, err := Open(ctx, url, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	other, err := sql.Open("pgx", s.dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })
	holder, err := other.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { holder.Close() })
	lock := func(f string) {
		t.Helper()
		if _, err := holder.ExecContext(ctx, `SELECT `+f+`(1398227541, hashtext(current_schema()))`); err != nil {
			t.Fatal(err)
		}
	}
	add := func() error {
		_, err := s.AddTodo(ctx, NewTodo{Queue: "inbox", Payload: "x"})
		return err
	}
	claim := func() error {
		_, _, err := s.ClaimNext(ctx, "agent:a", []string{"inbox"}, time.Minute)
		return err
	}
	for _, write := range []struct {
		name string
		run  func() error
	}{{"add", add}, {"claim", claim}} {
		if err := add(); err != nil { // something to claim
			t.Fatalf("add before the %s: %v", write.name, err)
		}
		lock("pg_advisory_lock")
		if err := write.run(); err == nil {
			t.Errorf("%s while another process held the writer lock past lock_timeout: no error", write.name)
		}
		lock("pg_advisory_unlock")
		for i := range 2 {
			if err := write.run(); err != nil {
				t.Fatalf("%s %d once the lock was free: %v", write.name, i+1, err)
			}
		}
	}
}
