package store

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"math"
	"sync"
	"time"
)

// DeliveryStats summarises one webhook's stored deliveries for the board.
type DeliveryStats struct {
	Deliveries   int64
	LastDelivery time.Time
}

// prunings identifies the prunings of events so far: their newest audit row, and
// how many there are (on PostgreSQL, a pruning by another process can commit with
// an older audit id than one already seen).
type prunings struct{ newest, n int64 }

// deliveryStats keeps the last WebhookDeliveryStats answer and where it was read
// up to, so that the next call counts only the events stored since. Counting every
// event took 80–145 ms at 356,000 of them, on each load of the Webhooks page.
type deliveryStats struct {
	mu        sync.Mutex
	valid     bool
	stats     map[int64]DeliveryStats
	upTo      int64    // the newest event id counted
	pruneMark prunings // the webhook_event.prune audit rows when it was counted
}

// WebhookDeliveryStats counts every webhook's stored deliveries and says when the
// newest arrived.
//
// Events get increasing ids as they arrive (ids are taken inside the write that
// stores them, and writes are serial; on PostgreSQL, up to the settled mark: see
// settledEvents), so a snapshot holds every event up to its newest id: after a first full count, a call counts only the events with larger
// ids. Events are deleted only by retention pruning, which audits each chunk it
// deletes in the same write; a pruning newer than the count, by this process or
// another, makes the next call count everything again. All of a call's reads share
// one snapshot.
func (s *Store) WebhookDeliveryStats(ctx context.Context) (map[int64]DeliveryStats, error) {
	c := &s.deliveryStats
	c.mu.Lock()
	defer c.mu.Unlock()
	upper, opts := int64(math.MaxInt64), &sql.TxOptions{ReadOnly: true}
	if s.pg {
		// Ids there are not settled as they are read (see settledEvents), and
		// READ COMMITTED would give each read its own snapshot.
		mark, settled, err := s.settledEvents(ctx)
		if err != nil {
			return nil, fmt.Errorf("store: count webhook deliveries: %w", err)
		}
		if !settled {
			return nil, fmt.Errorf("store: count webhook deliveries: deliveries still being written after %s; try again", settleWait)
		}
		upper, opts.Isolation = mark, sql.LevelRepeatableRead
	}
	tx, err := s.rdb.BeginTx(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("store: count webhook deliveries: %w", err)
	}
	defer tx.Rollback()
	var pruneMark prunings
	if err := tx.QueryRowContext(ctx, s.q(`SELECT coalesce(max(id), 0), count(*) FROM audit INDEXED BY audit_action
		WHERE action = 'webhook_event.prune'`)).Scan(&pruneMark.newest, &pruneMark.n); err != nil {
		return nil, fmt.Errorf("store: count webhook deliveries: read the last pruning: %w", err)
	}
	from := c.upTo
	if !c.valid || pruneMark != c.pruneMark {
		c.valid, c.stats, from = false, map[int64]DeliveryStats{}, 0
	}
	// A full count reads only the (webhook_id, id) index; the events since the
	// last count are a range of ids, read from the table, as that index would be
	// read whole.
	events := "webhook_events"
	if from > 0 {
		events = "webhook_events NOT INDEXED"
	}
	rows, err := tx.QueryContext(ctx, s.q(`SELECT g.webhook_id, g.n, g.newest, e.received_at
		FROM (SELECT webhook_id, count(*) AS n, max(id) AS newest FROM `+events+` WHERE id > ? AND id <= ? GROUP BY webhook_id) g
		JOIN webhook_events e ON e.id = g.newest`), from, upper)
	if err != nil {
		return nil, fmt.Errorf("store: count webhook deliveries: %w", err)
	}
	defer rows.Close()
	next := maps.Clone(c.stats)
	upTo := from
	for rows.Next() {
		var id, n, newest, last int64
		if err := rows.Scan(&id, &n, &newest, &last); err != nil {
			return nil, fmt.Errorf("store: count webhook deliveries: %w", err)
		}
		st := next[id]
		st.Deliveries += n
		st.LastDelivery = fromMS(last)
		next[id] = st
		upTo = max(upTo, newest)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: count webhook deliveries: %w", err)
	}
	c.valid, c.stats, c.upTo, c.pruneMark = true, next, upTo, pruneMark
	return maps.Clone(next), nil
}
