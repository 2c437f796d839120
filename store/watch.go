package store

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Another process on the same file (the CLI's `todo add` or `endpoint revoke` while
// serve runs) commits without going through this store's writer, so its hooks never
// fire. WatchForeign polls PRAGMA data_version on a dedicated connection: the value
// changes whenever any other connection has committed. On a change it announces the
// pending todos newer than the newest one this store has already announced, and the
// todos another process returned to their queue (released, retried or requeued: it
// finds them through their audit rows, newer than the last one it read).

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
// other processes and firing the todo hooks for the claimable todos they added or
// returned to their queues, then the OnForeignCommit hooks.
func (s *Store) WatchForeign(ctx context.Context, interval time.Duration) error {
	conn, err := s.rdb.Conn(ctx)
	if err != nil {
		return fmt.Errorf("store: watch foreign commits: %w", err)
	}
	defer conn.Close()
	f, err := s.newForeignWatch(ctx, conn)
	if err != nil {
		return err
	}
	defer s.returns.stop()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		f.check(ctx)
	}
}

// foreignWatch is WatchForeign's state between checks.
type foreignWatch struct {
	s        *Store
	conn     *sql.Conn
	version  int64 // data_version at the last check
	returned int64 // the newest audit row read for returns to the queue
}

// newForeignWatch takes what the file holds now as announced.
func (s *Store) newForeignWatch(ctx context.Context, conn *sql.Conn) (*foreignWatch, error) {
	f := &foreignWatch{s: s, conn: conn}
	if err := conn.QueryRowContext(ctx, `PRAGMA data_version`).Scan(&f.version); err != nil {
		return nil, fmt.Errorf("store: read data_version: %w", err)
	}
	// Before the newest audit row is read: a return committed after it must be
	// known as this process's own.
	s.returns.start()
	var maxID int64
	err := conn.QueryRowContext(ctx, `SELECT (SELECT coalesce(max(id), 0) FROM todos),
		(SELECT coalesce(max(id), 0) FROM audit)`).Scan(&maxID, &f.returned)
	if err != nil {
		s.returns.stop()
		return nil, fmt.Errorf("store: watch foreign commits: %w", err)
	}
	s.noteRung(maxID)
	return f, nil
}

// check announces what other processes committed since the last check, if anything.
func (f *foreignWatch) check(ctx context.Context) {
	var v int64
	if err := f.conn.QueryRowContext(ctx, `PRAGMA data_version`).Scan(&v); err != nil {
		f.s.log.Warn("watch foreign commits: read data_version", "err", err)
		return
	}
	if v == f.version {
		return
	}
	f.version = v
	f.announceNewer(ctx)
	f.announceReturned(ctx)
	f.s.fireForeign()
}

func (f *foreignWatch) announceNewer(ctx context.Context) {
	since := f.s.rungMax.Load()
	rows, err := f.conn.QueryContext(ctx, `SELECT id, queue, source_type FROM todos
		WHERE id > ? AND state = 'pending' ORDER BY id LIMIT 1000`, since)
	if err != nil {
		f.s.log.Warn("watch foreign commits: list new todos", "err", err)
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
	f.s.fire(changes)
}

// returnCauses maps the audit actions of a return to the queue to their causes.
var returnCauses = map[string]string{"todo.release": "release", "todo.retry": "retry", "todo.requeue": "lease_expired"}

// announceReturned announces the todos other processes returned to their queues
// since the last audit row read, those still pending and claimable: revoking an
// agent from the CLI hands its todos back, and agents idle on their doorbells must
// hear of it. This process's own returns were announced when they were committed.
func (f *foreignWatch) announceReturned(ctx context.Context) {
	var newest int64
	if err := f.conn.QueryRowContext(ctx, `SELECT coalesce(max(id), 0) FROM audit`).Scan(&newest); err != nil {
		f.s.log.Warn("watch foreign commits: read the audit log", "err", err)
		return
	}
	if newest <= f.returned {
		return
	}
	rows, err := f.conn.QueryContext(ctx, `SELECT a.id, a.action, t.id, t.queue, t.source_type
		FROM audit a JOIN todos t ON t.id = CAST(substr(a.target, 6) AS INTEGER)
		WHERE a.action IN ('todo.release', 'todo.retry', 'todo.requeue') AND a.id > ? AND a.id <= ?
			AND a.target LIKE 'todo:%' AND t.state = 'pending' AND t.available_at <= ?
		ORDER BY a.id`, f.returned, newest, ms(f.s.now()))
	if err != nil {
		f.s.log.Warn("watch foreign commits: list returned todos", "err", err)
		return
	}
	var changes []TodoChange
	seen := map[int64]bool{}
	for rows.Next() {
		var auditID int64
		var action string
		var c TodoChange
		if err := rows.Scan(&auditID, &action, &c.ID, &c.Queue, &c.Source); err != nil {
			break
		}
		if f.s.returns.own(auditID) || seen[c.ID] {
			continue
		}
		seen[c.ID] = true
		c.State, c.Claimable, c.Cause = StatePending, true, returnCauses[action]
		changes = append(changes, c)
	}
	err = rows.Err()
	rows.Close()
	if err != nil {
		f.s.log.Warn("watch foreign commits: list returned todos", "err", err)
		return
	}
	f.returned = newest
	f.s.returns.forgetThrough(newest)
	f.s.fire(changes)
}

// ownReturns holds the audit ids of this process's own returns to the queue while
// WatchForeign runs, from just before their commit until the watch has read past
// them. They are held before COMMIT, because the watch may read a row the instant
// it is committed, and dropped if the commit fails (the ids would be reused).
type ownReturns struct {
	on  atomic.Bool
	mu  sync.Mutex
	ids map[int64]struct{}
}

func (o *ownReturns) start() {
	o.mu.Lock()
	o.ids = map[int64]struct{}{}
	o.mu.Unlock()
	o.on.Store(true)
}

func (o *ownReturns) stop() {
	o.on.Store(false)
	o.mu.Lock()
	o.ids = nil
	o.mu.Unlock()
}

// hold notes the returns of the batch's requests that are about to commit.
func (o *ownReturns) hold(batch []*writeReq) (held []int64) {
	if !o.on.Load() {
		return nil
	}
	for _, r := range batch {
		if r.err != nil {
			continue
		}
		for _, c := range r.wtx.changes {
			if c.auditID != 0 {
				held = append(held, c.auditID)
			}
		}
	}
	if len(held) == 0 {
		return nil
	}
	o.mu.Lock()
	if o.ids != nil {
		for _, id := range held {
			o.ids[id] = struct{}{}
		}
	}
	o.mu.Unlock()
	return held
}

// drop forgets held ids whose commit failed.
func (o *ownReturns) drop(held []int64) {
	if len(held) == 0 {
		return
	}
	o.mu.Lock()
	for _, id := range held {
		delete(o.ids, id)
	}
	o.mu.Unlock()
}

// own reports whether the audit row id is one of this process's returns.
func (o *ownReturns) own(id int64) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	_, ok := o.ids[id]
	return ok
}

// forgetThrough forgets the ids up to newest, which the watch has read past.
func (o *ownReturns) forgetThrough(newest int64) {
	o.mu.Lock()
	for id := range o.ids {
		if id <= newest {
			delete(o.ids, id)
		}
	}
	o.mu.Unlock()
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
