package store

import (
	"context"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/switchboardhq/switchboard/internal/testkit"
)

// Switchboard's writers take turns under a lock and read at READ COMMITTED. A
// role or database whose default isolation is stricter (here the URL's, as an
// ALTER ROLE … SET would give it) took each transaction's snapshot before its
// wait for the lock: the other process's commit in between failed it with a
// serialization error, a whole batch of deliveries answered 503. Its
// connections now read at READ COMMITTED whatever the default. Nor do they end
// when idle for an idle_session_timeout's while.
func TestAStricterDefaultIsolationDoesNotFailAFleetsWrites(t *testing.T) {
	url := testkit.PostgresURL(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	var version int
	err = conn.QueryRow(ctx, `SELECT current_setting('server_version_num')::int`).Scan(&version)
	conn.Close(ctx)
	if err != nil {
		t.Fatal(err)
	}
	url += "&default_transaction_isolation=serializable"
	if version >= 140000 {
		url += "&idle_session_timeout=60000"
	}
	a, b := openTwo(t, url)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for _, s := range []*Store{a, b} {
		for range 4 {
			wg.Go(func() {
				for range 25 {
					if _, err := s.AddTodo(ctx, NewTodo{Queue: "inbox", Payload: "x"}); err != nil {
						mu.Lock()
						errs = append(errs, err)
						mu.Unlock()
					}
				}
			})
		}
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d of 200 adds failed; the first: %v", len(errs), errs[0])
	}
	var level string
	if err := a.rdb.QueryRowContext(ctx, `SHOW transaction_isolation`).Scan(&level); err != nil || level != "read committed" {
		t.Errorf("a read connection's isolation: %q (%v), want read committed", level, err)
	}
	var idle string
	if err := a.rdb.QueryRowContext(ctx, `SELECT coalesce(current_setting('idle_session_timeout', true), '0')`).Scan(&idle); err != nil || idle != "0" {
		t.Errorf("a read connection's idle_session_timeout: %q (%v), want 0", idle, err)
	}
}
