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
// pending todos added since it last looked, and the todos returned to their queue
// (released, retried or requeued: it finds them through their audit rows, newer than
// the last one it read). This process's own adds and returns were announced when
// they were committed: the watch tells them apart by id (see ownChanges).

// WatchForeign runs until ctx ends, checking every interval for commits made by
// other processes and firing the todo hooks for the claimable todos they added or
// returned to their queues, then the OnForeignCommit hooks. On PostgreSQL it is
// woken by notifications as well (see watchPostgres).
func (s *Store) WatchForeign(ctx context.Context, interval time.Duration) error {
	watch, err := s.BeginWatchForeign(ctx)
	if err != nil {
		return err
	}
	return watch(interval)
}

// BeginWatchForeign takes what the database holds now as announced, and returns
// the watch that runs from there (WatchForeign's loop) until ctx ends: what
// another process commits after BeginWatchForeign returns is announced, however
// late the watch starts. serve takes it before it answers a request, so that no
// agent waits through a commit the watch took as already seen. The watch must be
// run: it holds a connection until it ends.
func (s *Store) BeginWatchForeign(ctx context.Context) (watch func(interval time.Duration) error, err error) {
	if s.pg {
		return s.beginWatchPostgres(ctx)
	}
	conn, err := s.rdb.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("store: watch foreign commits: %w", err)
	}
	f, err := s.newForeignWatch(ctx, conn)
	if err != nil {
		conn.Close()
		return nil, err
	}
	return func(interval time.Duration) error {
		defer conn.Close()
		defer s.own.stop()
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
	}, nil
}

// foreignWatch is WatchForeign's state between checks.
type foreignWatch struct {
	s        *Store
	conn     querier // a connection of its own on SQLite (data_version is per connection), the read pool on PostgreSQL
	version  int64   // data_version at the last check (SQLite)
	added    idMark  // the todo ids looked at
	returned idMark  // the audit rows looked at for returns to the queue
	failing  bool    // a look failed and said so; quiet until one succeeds
}

// newForeignWatch takes what the database holds now as announced.
func (s *Store) newForeignWatch(ctx context.Context, conn querier) (*foreignWatch, error) {
	f := &foreignWatch{s: s, conn: conn}
	if !s.pg {
		if err := conn.QueryRowContext(ctx, `PRAGMA data_version`).Scan(&f.version); err != nil {
			return nil, fmt.Errorf("store: read data_version: %w", err)
		}
	}
	// Before the newest rows are read: a change committed after that must be known
	// as this process's own.
	s.own.start()
	looked := time.Now()
	var epoch int64
	if err := conn.QueryRowContext(ctx, newestRows).Scan(&f.added.last, &f.returned.last, &epoch); err != nil {
		s.own.stop()
		return nil, fmt.Errorf("store: watch foreign commits: %w", err)
	}
	s.creds.seen(epoch)
	s.creds.watched(looked)
	s.own.passAdds(f.added, nil)
	s.own.passReturns(f.returned, nil)
	return f, nil
}

// newestRows reads the newest todo id, the newest audit row id and the endpoints'
// epoch (for the credential cache: see credCache).
const newestRows = `SELECT (SELECT coalesce(max(id), 0) FROM todos), (SELECT coalesce(max(id), 0) FROM audit),
	(SELECT epoch FROM endpoint_epoch WHERE id = 1)`

// check announces what other processes committed since the last check, if anything.
func (f *foreignWatch) check(ctx context.Context) {
	looked := time.Now()
	var v int64
	if !f.s.pg {
		if err := f.conn.QueryRowContext(ctx, `PRAGMA data_version`).Scan(&v); err != nil {
			f.warn(ctx, "read data_version", "err", err)
			return
		}
		if v == f.version {
			f.s.creds.watched(looked) // no commit from elsewhere since the last scan
			return
		}
	}
	if f.scan(ctx) {
		f.version = v // after the scan: one that failed is tried again at the next check
		f.s.fireForeign()
	}
}

// scan announces the todos added and returned since the last look; false if the
// database could not be read.
func (f *foreignWatch) scan(ctx context.Context) bool {
	looked := time.Now()
	var added, returned, epoch int64
	if err := f.conn.QueryRowContext(ctx, newestRows).Scan(&added, &returned, &epoch); err != nil {
		f.warn(ctx, "read the newest rows", "err", err)
		return false
	}
	f.s.creds.seen(epoch)
	f.s.creds.watched(looked)
	if next, ok := f.advance(ctx, "todos", f.added, added); ok && f.announceAdded(ctx, next) {
		f.added = next
	}
	if next, ok := f.advance(ctx, "audit", f.returned, returned); ok && f.announceReturned(ctx, next) {
		f.returned = next
	}
	f.s.own.forget(f.added.settled(), f.returned.settled())
	f.failing = false
	return true
}

// announceAdded announces the todos other processes added up to next, in
// whatever state they are now: one already claimed (a worker polled before this
// look) is still an add for the charts, though not claimable for the doorbell;
// false if they could not be read (the next check tries again).
func (f *foreignWatch) announceAdded(ctx context.Context, next idMark) bool {
	if !next.news(f.added) {
		return true
	}
	const sqlite = `SELECT id, queue, source_type, state, available_at, key_waiting FROM todos
		WHERE id > ? AND id <= ? ORDER BY id`
	const postgres = `SELECT id, queue, source_type, state, available_at, key_waiting FROM todos
		WHERE (id > ? AND id <= ?) OR id = ANY(?) ORDER BY id`
	var rows *sql.Rows
	var err error
	if f.s.pg {
		rows, err = f.conn.QueryContext(ctx, f.s.q(postgres), f.added.last, next.last, next.filled)
	} else {
		rows, err = f.conn.QueryContext(ctx, sqlite, f.added.last, next.last)
	}
	if err != nil {
		f.warn(ctx, "list new todos", "err", err)
		return false
	}
	var found []TodoChange
	var ids []int64
	now := f.s.now()
	for rows.Next() {
		var c TodoChange
		var available, waiting int64
		if err := rows.Scan(&c.ID, &c.Queue, &c.Source, &c.State, &available, &waiting); err != nil {
			break
		}
		c.Cause = "add"
		if c.State == StatePending && waiting == 0 {
			// A delayed add rings when its delay ends (fire times it), as it does
			// in the process that added it; one behind its key, when the key frees.
			if at := fromMS(available); at.After(now) {
				c.ClaimableAt = at
			} else {
				c.Claimable = true
			}
		}
		found, ids = append(found, c), append(ids, c.ID)
	}
	err = rows.Err()
	rows.Close()
	if err != nil {
		f.warn(ctx, "list new todos", "err", err)
		return false
	}
	var changes []TodoChange
	for i, keep := range f.s.own.passAdds(next, ids) {
		if keep {
			changes = append(changes, found[i])
		}
	}
	f.s.fire(changes)
	return true
}

// returnCauses maps the audit actions of a return to the queue to their causes.
// A failure with a retry (todo.fail, outcome retry) returns its todo when its
// backoff ends. A resumed queue's head is announced as a return (see ResumeQueue),
// and so is a key's next todo when the one ahead of it ended (see keyEnded).
var returnCauses = map[string]string{"todo.release": "release", "todo.retry": "retry", "todo.requeue": "lease_expired",
	"todo.fail": "backoff_over", "queue.resume": "resume", "todo.key_free": "key_free",
	"todo.approve": "approval_decided", "todo.deny": "approval_decided", "todo.coalesce": "coalesce"}

// announceReturned announces the todos other processes returned to their queues
// in audit rows up to next, those still pending: the claimable ones now, those
// backing off when their backoff ends (see wakeAt). Revoking an agent
// from the CLI hands its todos back, and agents idle on their doorbells must hear
// of it. False if they could not be read (the next check tries again).
func (f *foreignWatch) announceReturned(ctx context.Context, next idMark) bool {
	if !next.news(f.returned) {
		return true
	}
	const sqlite = `SELECT a.id, a.action, t.id, t.queue, t.source_type, t.available_at
		FROM audit a JOIN todos t ON t.id = CAST(substr(a.target, 6) AS INTEGER)
		WHERE (a.action IN ('todo.release', 'todo.retry', 'todo.requeue', 'queue.resume', 'todo.key_free',
			'todo.approve', 'todo.deny') OR (a.action = 'todo.fail' AND a.outcome = 'retry')
			OR (a.action = 'todo.coalesce' AND a.outcome = 'debounce'))
			AND a.id > ? AND a.id <= ?
			AND a.target LIKE 'todo:%' AND t.state = 'pending'
		ORDER BY a.id`
	const postgres = `SELECT a.id, a.action, t.id, t.queue, t.source_type, t.available_at
		FROM audit a JOIN todos t ON t.id = CAST(substr(a.target, 6) AS INTEGER)
		WHERE (a.action IN ('todo.release', 'todo.retry', 'todo.requeue', 'queue.resume', 'todo.key_free',
			'todo.approve', 'todo.deny') OR (a.action = 'todo.fail' AND a.outcome = 'retry')
			OR (a.action = 'todo.coalesce' AND a.outcome = 'debounce'))
			AND ((a.id > ? AND a.id <= ?) OR a.id = ANY(?))
			AND a.target LIKE 'todo:%' AND t.state = 'pending'
		ORDER BY a.id`
	var rows *sql.Rows
	var err error
	if f.s.pg {
		rows, err = f.conn.QueryContext(ctx, f.s.q(postgres), f.returned.last, next.last, next.filled)
	} else {
		rows, err = f.conn.QueryContext(ctx, sqlite, f.returned.last, next.last)
	}
	if err != nil {
		f.warn(ctx, "list returned todos", "err", err)
		return false
	}
	type returned struct {
		c  TodoChange
		at int64
	}
	var found []returned
	var auditIDs []int64
	for rows.Next() {
		var auditID, at int64
		var action string
		var c TodoChange
		if err := rows.Scan(&auditID, &action, &c.ID, &c.Queue, &c.Source, &at); err != nil {
			break
		}
		c.State, c.Claimable, c.Cause = StatePending, true, returnCauses[action]
		found, auditIDs = append(found, returned{c, at}), append(auditIDs, auditID)
	}
	err = rows.Err()
	rows.Close()
	if err != nil {
		f.warn(ctx, "list returned todos", "err", err)
		return false
	}
	var changes []TodoChange
	seen := map[int64]bool{}
	for i, keep := range f.s.own.passReturns(next, auditIDs) {
		c, at := found[i].c, fromMS(found[i].at)
		if !keep || seen[c.ID] {
			continue
		}
		seen[c.ID] = true
		if c.Cause == "approval_decided" && at.After(f.s.now()) {
			// As where it was decided (Decide): claimable now by the worker that
			// asked, and rung for everyone when the hold ends.
			c.ClaimableAt = at
		} else if at.After(f.s.now()) {
			// Failed with a retry in another process: its backoff is timed here too,
			// so that it rings even if that process is gone when it ends.
			f.s.wakeAt(at, c)
			continue
		}
		changes = append(changes, c)
	}
	f.s.fire(changes)
	return true
}

// ownChanges holds, while WatchForeign runs, the ids of this process's own adds
// (todo ids) and returns to the queue (their audit row ids), from just before their
// commit until the watch has looked past them. They are held before COMMIT,
// because the watch may read a row the instant it is committed, and dropped if the
// commit fails (the ids would be handed out again). On PostgreSQL it also holds
// the ids another process's ring announced (pgring.go), and how far the scan
// has looked (addsMark, returnsMark), for rings to skip what it announced.
type ownChanges struct {
	on                    atomic.Bool
	mu                    sync.Mutex
	adds                  map[int64]struct{}
	returns               map[int64]struct{}
	addsMark, returnsMark idMark
}

// heldIDs is what one batch holds: its adds and its returns.
type heldIDs struct{ adds, returns []int64 }

func (o *ownChanges) start() {
	o.mu.Lock()
	o.adds, o.returns = map[int64]struct{}{}, map[int64]struct{}{}
	o.addsMark, o.returnsMark = idMark{}, idMark{}
	o.mu.Unlock()
	o.on.Store(true)
}

func (o *ownChanges) stop() {
	o.on.Store(false)
	o.mu.Lock()
	o.adds, o.returns = nil, nil
	o.mu.Unlock()
}

// hold notes the adds and returns of the batch's requests about to commit.
func (o *ownChanges) hold(batch []*writeReq) (h heldIDs) {
	if !o.on.Load() {
		return h
	}
	for _, r := range batch {
		if r.err != nil {
			continue
		}
		for _, c := range r.wtx.changes {
			switch {
			case c.auditID != 0:
				h.returns = append(h.returns, c.auditID)
			case c.Cause == "add":
				h.adds = append(h.adds, c.ID)
			}
		}
	}
	if len(h.adds)+len(h.returns) == 0 {
		return h
	}
	o.mu.Lock()
	if o.adds != nil {
		for _, id := range h.adds {
			o.adds[id] = struct{}{}
		}
		for _, id := range h.returns {
			o.returns[id] = struct{}{}
		}
	}
	o.mu.Unlock()
	return h
}

// drop forgets held ids whose commit failed.
func (o *ownChanges) drop(h heldIDs) {
	if len(h.adds)+len(h.returns) == 0 {
		return
	}
	o.mu.Lock()
	for _, id := range h.adds {
		delete(o.adds, id)
	}
	for _, id := range h.returns {
		delete(o.returns, id)
	}
	o.mu.Unlock()
}

// added reports whether todo id is one this process added.
func (o *ownChanges) added(id int64) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	_, ok := o.adds[id]
	return ok
}

// returned reports whether audit row id is one of this process's returns.
func (o *ownChanges) returned(id int64) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	_, ok := o.returns[id]
	return ok
}

// forget forgets the ids the watch has looked past.
func (o *ownChanges) forget(added, returned int64) {
	o.mu.Lock()
	for id := range o.adds {
		if id <= added {
			delete(o.adds, id)
		}
	}
	for id := range o.returns {
		if id <= returned {
			delete(o.returns, id)
		}
	}
	o.mu.Unlock()
}

// OnForeignCommit registers fn to run, on WatchForeign's goroutine, after it sees
// that the file changed: state a human changed from another process (the CLI pinning
// a tool definition) reaches this one. data_version also moves for this process's
// own commits, so fn runs at most once per watch interval for any write at all: it
// must be cheap, idempotent and must not block for long.
func (s *Store) OnForeignCommit(fn func()) { s.addHook(&s.foreign, fn) }

func (s *Store) fireForeign() { s.runHooks(&s.foreign) }

// OnForeignTodoCommit registers fn to run, on WatchForeign's goroutine, after
// another process committed changes to todos (PostgreSQL only: its notification
// says so), and after the watch reconnected, when what was missed is not known.
// It is for views that show todos (the board's live updates): claims and
// completions elsewhere are not announced as TodoChanges here. It must be cheap
// and must not block.
func (s *Store) OnForeignTodoCommit(fn func()) { s.addHook(&s.foreignTodos, fn) }

func (s *Store) fireForeignTodos() { s.runHooks(&s.foreignTodos) }

// addHook and runHooks keep and run a list of hooks under hooksMu.
func (s *Store) addHook(list *[]func(), fn func()) {
	s.hooksMu.Lock()
	*list = append(*list, fn)
	s.hooksMu.Unlock()
}

func (s *Store) runHooks(list *[]func()) {
	s.hooksMu.RLock()
	hooks := *list
	s.hooksMu.RUnlock()
	for _, h := range hooks {
		h()
	}
}

// warn logs a failed look, unless it failed because the watch is stopping or,
// on PostgreSQL, the server is away and the first failed look has said so.
func (f *foreignWatch) warn(ctx context.Context, msg string, args ...any) {
	if ctx.Err() == nil && !f.failing {
		f.s.log.Warn("watch foreign commits: "+msg, args...)
		f.failing = f.s.pg
	}
}
