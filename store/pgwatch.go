package store

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
)

// On PostgreSQL there is no data_version: every write transaction sends a
// notification on the switchboard channel as it commits (PostgreSQL delivers it
// only if the transaction commits, and folds a transaction's identical
// notifications into one), and WatchForeign listens on a connection of its own.
// A notification wakes the same scan that SQLite's poll runs. Notifications are
// only wake-ups: the scan still runs every interval, so one lost while the
// listener reconnects only delays, and every (re)connection starts with a scan.
//
// Ids come from sequences, and across processes they commit in any order: a todo
// may commit with an id below one already scanned. The watch keeps those ids it
// has passed without seeing (gaps, see idMark) and reads them again at each scan.

// pgNotify is the statement every write transaction on PostgreSQL runs before its
// COMMIT. The payload is pgTodosChanged when the transaction changed todos, else
// empty: the scan reads what changed, and the payload only tells a board's live
// view (OnForeignTodoCommit) to redraw.
const pgNotify = `SELECT pg_notify('switchboard', $1)`

// pgTodosChanged is the notification payload of a transaction that changed todos.
const pgTodosChanged = "todos"

// gapLinger is how long an id the watch passed without seeing its row is looked
// for again. A rolled-back insert burns its id for good; a transaction that holds
// a new todo uncommitted for longer than this is not rung for (a doorbell is a
// wake-up, the queue itself is the ledger).
const gapLinger = 5 * time.Minute

// maxGaps bounds the ids looked for again; past it the oldest are let go.
const maxGaps = 10000

// idMark is how far the watch has read one table's ids: every id up to last,
// except gaps (PostgreSQL only), ids it passed whose rows were not there yet,
// each with when it was first missed. filled lists the gaps whose rows appeared in
// the scan that made this mark, to announce with it.
type idMark struct {
	last   int64
	gaps   map[int64]time.Time
	filled []int64
}

// settled is the id up to which every row has been seen or given up on.
func (m idMark) settled() int64 {
	low := m.last
	for id := range m.gaps {
		low = min(low, id-1)
	}
	return low
}

// news reports whether next holds anything not announced at m.
func (next idMark) news(m idMark) bool { return next.last > m.last || len(next.filled) > 0 }

// advance is the mark after a scan up to newest: on SQLite newest itself (its one
// writer commits ids in order); on PostgreSQL with the ids passed over and the
// gaps filled since. ok is false if the ids could not be read.
func (f *foreignWatch) advance(ctx context.Context, table string, cur idMark, newest int64) (next idMark, ok bool) {
	next = idMark{last: max(cur.last, newest), gaps: cur.gaps}
	if !f.s.pg || (newest <= cur.last && len(cur.gaps) == 0) {
		return next, true
	}
	rows, err := f.conn.QueryContext(ctx, f.s.q(`SELECT id FROM `+table+` WHERE (id > ? AND id <= ?) OR id = ANY(?)`),
		cur.last, next.last, slices.Collect(maps.Keys(cur.gaps)))
	if err != nil {
		f.warn(ctx, "read new ids", "table", table, "err", err)
		return cur, false
	}
	present := map[int64]bool{}
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			break
		}
		present[id] = true
	}
	err = rows.Err()
	rows.Close()
	if err != nil {
		f.warn(ctx, "read new ids", "table", table, "err", err)
		return cur, false
	}
	now := time.Now()
	next.gaps = map[int64]time.Time{}
	for id, since := range cur.gaps {
		switch {
		case present[id]:
			next.filled = append(next.filled, id)
		case now.Sub(since) < gapLinger:
			next.gaps[id] = since
		}
	}
	for id := cur.last + 1; id <= next.last; id++ {
		if !present[id] {
			next.gaps[id] = now
		}
	}
	for len(next.gaps) > maxGaps {
		delete(next.gaps, slices.Min(slices.Collect(maps.Keys(next.gaps))))
	}
	return next, true
}

// beginWatchPostgres is BeginWatchForeign on PostgreSQL.
func (s *Store) beginWatchPostgres(ctx context.Context) (func(time.Duration) error, error) {
	f, err := s.newForeignWatch(ctx, s.rdb)
	if err != nil {
		return nil, err
	}
	return func(interval time.Duration) error { return s.watchPostgres(ctx, f, interval) }, nil
}

// watchPostgres is the watch on PostgreSQL: a scan on each notification from
// another process, after each (re)connection of the listener, and every interval.
// The OnForeignCommit hooks run after a notification or a reconnection, and on
// every interval while no listener is connected.
func (s *Store) watchPostgres(ctx context.Context, f *foreignWatch, interval time.Duration) error {
	defer s.own.stop()
	var err error
	wake := make(chan struct{}, 1)
	var l *pgListener
	defer func() { l.close() }()
	t := time.NewTicker(interval)
	defer t.Stop()
	fire, deaf := true, false
	var woke time.Time // when the last scan a notification woke began
	for {
		redraw := deaf // no notification says what changed: a board redraws each interval
		if l == nil || l.lost() {
			l.close()
			if l, err = s.listen(ctx, wake); err != nil && !deaf {
				s.log.Warn("watch foreign commits: cannot listen for notifications; scanning every interval meanwhile", "err", err)
			}
			// Whatever was missed while not listening is caught up by this scan.
			fire, deaf = fire || err == nil, err != nil
			redraw = true // what changed while not listening is not known
		}
		if f.scan(ctx) && (fire || deaf) {
			s.fireForeign()
		}
		if s.foreignTodoNotice.Swap(false) || redraw {
			s.fireForeignTodos()
		}
		fire = false
		// A lost listener is replaced at once; one that could not connect is
		// tried again within a second, whatever the interval.
		var lost <-chan struct{}
		var retry <-chan time.Time
		if l != nil {
			lost = l.done
		} else {
			retry = time.After(min(interval, time.Second))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-lost:
		case <-retry:
		case <-wake:
			fire = true
			// At once after a quiet spell: this is another process's doorbell.
			// Under a stream of commits, at most one scan per wakeGap (a
			// notification during a scan wakes one more scan after it).
			if wait := time.Until(woke.Add(min(interval/10, wakeGap))); wait > 0 {
				select {
				case <-ctx.Done():
					return nil
				case <-time.After(wait):
				}
			}
			woke = time.Now()
		}
	}
}

// wakeGap is the least time between two scans that notifications wake: short
// enough for a doorbell across processes to ring within a few milliseconds while
// commits stream in, long enough that a stream of them costs at most a hundred
// scans a second.
const wakeGap = 10 * time.Millisecond

// pgListener is the watch's own connection, listening on the switchboard channel.
type pgListener struct {
	conn   *pgx.Conn
	cancel context.CancelFunc
	done   chan struct{} // closed when the connection is lost or closed
}

// listen connects and listens; each notification from another backend than this
// store's writer sends a wake-up on wake.
func (s *Store) listen(ctx context.Context, wake chan<- struct{}) (*pgListener, error) {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := pgx.ConnectConfig(cctx, s.pgcfg.Copy())
	if err != nil {
		return nil, connectError(s.pgcfg, err)
	}
	if _, err := conn.Exec(cctx, `LISTEN switchboard`); err != nil {
		conn.Close(context.Background())
		return nil, fmt.Errorf("store: listen for notifications: %w", err)
	}
	// The schema this store's todos are in: rings name theirs (pgring.go).
	var schema string
	if err := conn.QueryRow(cctx, `SELECT coalesce(current_schema(), '')`).Scan(&schema); err != nil {
		conn.Close(context.Background())
		return nil, fmt.Errorf("store: listen for notifications: %w", err)
	}
	lctx, stop := context.WithCancel(ctx)
	l := &pgListener{conn: conn, cancel: stop, done: make(chan struct{})}
	go func() {
		defer close(l.done)
		for {
			n, err := conn.WaitForNotification(lctx)
			if err != nil {
				if lctx.Err() == nil {
					s.log.Warn("watch foreign commits: the listening connection was lost; reconnecting", "err", err)
				}
				return
			}
			if w := s.writer; w != nil && w.pid.Load() == int64(n.PID) {
				continue // this process's own commit, announced as it committed
			}
			if s.ringFrom(n.Payload, schema) {
				continue // its companion notification (pgNotifyRing) wakes the scan
			}
			if n.Payload == pgTodosChanged {
				s.foreignTodoNotice.Store(true)
			}
			select {
			case wake <- struct{}{}:
			default:
			}
		}
	}()
	return l, nil
}

// lost reports whether the listening connection has ended.
func (l *pgListener) lost() bool {
	select {
	case <-l.done:
		return true
	default:
		return false
	}
}

// close ends the listener; a nil one is already closed.
func (l *pgListener) close() {
	if l == nil {
		return
	}
	l.cancel()
	<-l.done
	l.conn.Close(context.Background())
}
