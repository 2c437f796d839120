package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// Another process on the same file (the CLI's `todo add` while serve runs) commits
// without going through this store's writer, so its hooks never fire. WatchForeign
// polls PRAGMA data_version on a dedicated connection: the value changes whenever any
// other connection has committed. On a change it announces pending todos newer than
// the newest one this store has already announced.

// noteRung remembers the newest todo id announced as claimable.
func (s *Store) noteRung(id int64) {
	for {
		cur := s.rungMax.Load()
		if id <= cur || s.rungMax.CompareAndSwap(cur, id) {
			return
		}
	}
}

// WatchForeign runs until ctx ends, checking every interval for commits made by
// other processes and firing the todo hooks for the claimable todos they added, then
// the OnForeignCommit hooks.
func (s *Store) WatchForeign(ctx context.Context, interval time.Duration) error {
	conn, err := s.rdb.Conn(ctx)
	if err != nil {
		return fmt.Errorf("store: watch foreign commits: %w", err)
	}
	defer conn.Close()
	var last int64
	if err := conn.QueryRowContext(ctx, `PRAGMA data_version`).Scan(&last); err != nil {
		return fmt.Errorf("store: read data_version: %w", err)
	}
	var maxID int64
	if err := conn.QueryRowContext(ctx, `SELECT coalesce(max(id), 0) FROM todos`).Scan(&maxID); err != nil {
		return fmt.Errorf("store: watch foreign commits: %w", err)
	}
	s.noteRung(maxID)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		var v int64
		if err := conn.QueryRowContext(ctx, `PRAGMA data_version`).Scan(&v); err != nil {
			s.log.Warn("watch foreign commits: read data_version", "err", err)
			continue
		}
		if v == last {
			continue
		}
		last = v
		s.announceNewer(ctx, conn)
		s.fireForeign()
	}
}

func (s *Store) announceNewer(ctx context.Context, conn *sql.Conn) {
	since := s.rungMax.Load()
	rows, err := conn.QueryContext(ctx, `SELECT id, queue, source_type FROM todos
		WHERE id > ? AND state = 'pending' ORDER BY id LIMIT 1000`, since)
	if err != nil {
		s.log.Warn("watch foreign commits: list new todos", "err", err)
		return
	}
	var changes []TodoChange
	for rows.Next() {
		var c TodoChange
		if err := rows.Scan(&c.ID, &c.Queue, &c.Source); err != nil {
			break
		}
		c.State, c.Claimable, c.Cause = StatePending, true, "add"
		changes = append(changes, c)
	}
	rows.Close()
	s.fire(changes)
}

// OnForeignCommit registers fn to run, on WatchForeign's goroutine, after it sees
// that the file changed: state a human changed from another process (the CLI pinning
// a tool definition) reaches this one. data_version also moves for this process's
// own commits, so fn runs at most once per watch interval for any write at all: it
// must be cheap, idempotent and must not block for long.
func (s *Store) OnForeignCommit(fn func()) {
	s.hooksMu.Lock()
	s.foreign = append(s.foreign, fn)
	s.hooksMu.Unlock()
}

func (s *Store) fireForeign() {
	s.hooksMu.RLock()
	hooks := s.foreign
	s.hooksMu.RUnlock()
	for _, h := range hooks {
		h()
	}
}
