package store

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"time"
)

// ChartHistory is how long the charts' minutes are kept: a day, and an hour more
// so that the day's chart is whole at any minute. The reaper prunes older ones.
const ChartHistory = 25 * time.Hour

// QueueMinute is one minute of a queue's history (or of all queues, summed).
type QueueMinute struct {
	Minute    time.Time // the minute's start
	Added     int64
	Completed int64
	Failed    int64 // attempts that failed: an agent's fail, or a lease run out
	Depth     int64 // pending todos at the minute's end
	// OldestWait is how long the todo claim_next takes next had been claimable at
	// the minute's end (the longest of any queue's, for all queues).
	OldestWait time.Duration
}

// WebhookMinute is one minute of a webhook's history.
type WebhookMinute struct {
	Minute     time.Time
	Deliveries int64 // deliveries stored
	Refusals   int64 // deliveries refused: a bad, missing or stale signature, or the rate limit
}

// ChartOptions configure NewChartSampler.
type ChartOptions struct {
	// Refused reports how many deliveries to a webhook were refused since the
	// process started (nothing about a refusal is stored, so only the ingest
	// receiver knows). Nil: refusals are recorded as none.
	Refused func(webhookID int64) int64
}

// ChartSampler writes the charts' history: once a minute, one row per queue and
// per webhook that had anything in it. It adds nothing to the hot paths: todo
// transitions are tallied in memory from the todo hooks (which every commit
// already fires), depth and wait come from queue_counts and the claim index, and
// deliveries are counted from the events stored since the last sample, a range
// of the webhook_events index.
type ChartSampler struct {
	s    *Store
	opts ChartOptions

	mu    sync.Mutex
	tally map[string]*queueTally // todo transitions since the last sample, by queue

	// Read and written by Sample alone (callers do not run it concurrently).
	eventMark int64           // the newest event id counted
	refused   map[int64]int64 // Refused's answer at the last sample
	lastAt    time.Time       // when the last sample was taken
}

type queueTally struct{ added, completed, failed int64 }

// NewChartSampler returns a sampler for s. It registers a todo hook, so build it at
// wiring time, before traffic starts; deliveries are counted from the events
// stored after this call.
func (s *Store) NewChartSampler(ctx context.Context, opts ChartOptions) (*ChartSampler, error) {
	c := &ChartSampler{s: s, opts: opts, tally: map[string]*queueTally{}, refused: map[int64]int64{}, lastAt: s.now()}
	// An event still in flight now (PostgreSQL, settled false) arrived before
	// the sampler: counted nowhere, like the events before it.
	var err error
	if c.eventMark, _, err = s.settledEvents(ctx); err != nil {
		return nil, fmt.Errorf("store: start the chart sampler: read the newest event: %w", err)
	}
	if err := c.refusedSoFar(ctx); err != nil {
		return nil, err
	}
	s.OnTodoChange(c.note)
	return c, nil
}

// refusedSoFar takes the refusals counted before the sampler started as counted.
func (c *ChartSampler) refusedSoFar(ctx context.Context) error {
	if c.opts.Refused == nil {
		return nil
	}
	rows, err := c.s.query(ctx, `SELECT id FROM webhooks WHERE deleted_at IS NULL`)
	if err != nil {
		return fmt.Errorf("store: start the chart sampler: list webhooks: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return fmt.Errorf("store: start the chart sampler: list webhooks: %w", err)
		}
		c.refused[id] = c.opts.Refused(id)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("store: start the chart sampler: list webhooks: %w", err)
	}
	return nil
}

// note tallies one todo transition. It runs on the writer goroutine after each
// commit, so it only counts.
func (c *ChartSampler) note(ch TodoChange) {
	switch ch.Cause {
	case "add", "complete", "retry_backoff", "dead_letter", "lease_expired":
	default:
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.tallyOf(ch.Queue)
	switch ch.Cause {
	case "add":
		t.added++
	case "complete":
		t.completed++
	default:
		t.failed++
	}
}

// Run samples just after every minute's end until ctx ends. A failed sample is
// logged; its counts go into the next one. When ctx ends it writes what the
// current minute has counted so far (under that minute, to which the next
// process's first sample adds), so a restart leaves no hole in the charts; the
// caller must keep the store open until Run returns.
func (c *ChartSampler) Run(ctx context.Context) {
	for {
		now := c.s.now()
		wait := now.Truncate(time.Minute).Add(time.Minute).Sub(now) + 100*time.Millisecond
		t := time.NewTimer(min(max(wait, time.Second), time.Minute))
		select {
		case <-ctx.Done():
			t.Stop()
			last, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			if err := c.sample(last, c.s.now().Truncate(time.Minute)); err != nil {
				c.s.log.Warn("chart sample at shutdown failed: the charts miss this minute's last seconds", "err", err)
			}
			return
		case <-t.C:
		}
		if err := c.Sample(ctx); err != nil && ctx.Err() == nil {
			c.s.log.Warn("chart sample failed", "err", err)
		}
	}
}

// Sample records what happened since the last sample under the minute that ended
// last (a sample at 12:01:00 files 12:00), with each queue's depth and head wait
// as they are now. A second sample in the same minute adds its counts to the row.
func (c *ChartSampler) Sample(ctx context.Context) error {
	return c.sample(ctx, c.s.now().Truncate(time.Minute).Add(-time.Minute))
}

// sample records what happened since the last sample under minute.
func (c *ChartSampler) sample(ctx context.Context, minute time.Time) error {
	now := c.s.now()
	c.mu.Lock()
	tally := c.tally
	c.tally = map[string]*queueTally{}
	c.mu.Unlock()
	queues, err := c.queueRows(ctx, now, tally)
	if err == nil {
		var hooks []webhookCounts
		var newest int64
		if newest, err = c.newestEvent(ctx); err == nil && !c.s.pg {
			hooks, err = c.webhookRows(ctx, c.s.query, c.eventMark, newest)
		}
		if err == nil {
			if hooks, err = c.write(ctx, minute, queues, hooks, newest); err == nil {
				c.commit(hooks, newest, now)
				return nil
			}
		}
	}
	c.restore(tally)
	return err
}

// restore puts back the counts of a sample that could not be written.
func (c *ChartSampler) restore(tally map[string]*queueTally) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for q, t := range tally {
		cur := c.tallyOf(q)
		cur.added += t.added
		cur.completed += t.completed
		cur.failed += t.failed
	}
}

// tallyOf is queue's tally since the last sample, made when it has none; c.mu
// must be held.
func (c *ChartSampler) tallyOf(queue string) *queueTally {
	t := c.tally[queue]
	if t == nil {
		t = &queueTally{}
		c.tally[queue] = t
	}
	return t
}

type queueRow struct {
	queue string
	queueTally
	depth, waitMS int64
}

// queueRows joins the tally with every queue's depth and head wait now.
func (c *ChartSampler) queueRows(ctx context.Context, now time.Time, tally map[string]*queueTally) (map[string]*queueRow, error) {
	rows := map[string]*queueRow{}
	row := func(q string) *queueRow {
		if rows[q] == nil {
			rows[q] = &queueRow{queue: q}
		}
		return rows[q]
	}
	for q, t := range tally {
		row(q).queueTally = *t
	}
	counts, err := c.s.QueueCounts(ctx)
	if err != nil {
		return nil, fmt.Errorf("store: chart sample: %w", err)
	}
	for _, qc := range counts {
		if qc.State == StatePending {
			row(qc.Queue).depth = qc.Count
		}
	}
	heads, err := c.s.QueueHeads(ctx)
	if err != nil {
		return nil, fmt.Errorf("store: chart sample: %w", err)
	}
	for _, h := range heads {
		row(h.Queue).waitMS = max(now.Sub(h.Since).Milliseconds(), 0)
	}
	return rows, nil
}

type webhookCounts struct {
	id                  int64
	deliveries, refused int64 // in this sample
	refusedTotal        int64 // Refused's answer
}

// newestEvent is the newest event id a sample may count up to (see settledEvents).
func (c *ChartSampler) newestEvent(ctx context.Context) (int64, error) {
	newest, settled, err := c.s.settledEvents(ctx)
	if err != nil {
		return 0, fmt.Errorf("store: chart sample: read the newest event: %w", err)
	}
	if !settled {
		return c.eventMark, nil // count the events in flight, and those after them, next time
	}
	return newest, nil
}

// webhookRows counts each webhook's deliveries with ids in (from, to] (a range
// of the (webhook_id, id) index each), read through query, and its refusals
// since the last sample.
func (c *ChartSampler) webhookRows(ctx context.Context, query func(context.Context, string, ...any) (*sql.Rows, error),
	from, to int64) ([]webhookCounts, error) {
	rows, err := query(ctx, `SELECT w.id, (SELECT count(*) FROM webhook_events e
			WHERE e.webhook_id = w.id AND e.id > ? AND e.id <= ?)
		FROM webhooks w WHERE w.deleted_at IS NULL OR w.deleted_at >= ?`, from, to, ms(c.lastAt))
	if err != nil {
		return nil, fmt.Errorf("store: chart sample: count deliveries: %w", err)
	}
	defer rows.Close()
	var out []webhookCounts
	for rows.Next() {
		var w webhookCounts
		if err := rows.Scan(&w.id, &w.deliveries); err != nil {
			return nil, fmt.Errorf("store: chart sample: count deliveries: %w", err)
		}
		if c.opts.Refused != nil {
			w.refusedTotal = c.opts.Refused(w.id)
			w.refused = max(w.refusedTotal-c.refused[w.id], 0)
		}
		out = append(out, w)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: chart sample: count deliveries: %w", err)
	}
	return out, nil
}

// commit takes a written sample's counts as counted.
func (c *ChartSampler) commit(hooks []webhookCounts, newest int64, now time.Time) {
	refused := make(map[int64]int64, len(hooks))
	for _, h := range hooks {
		refused[h.id] = h.refusedTotal
	}
	c.eventMark, c.refused, c.lastAt = newest, refused, now
}

// write stores a sample's rows in one transaction, leaving out rows of nothing,
// and returns the webhook rows it wrote: on PostgreSQL it counts them itself,
// from the shared mark up to newest (see sharedDeliveries).
func (c *ChartSampler) write(ctx context.Context, minute time.Time, queues map[string]*queueRow, hooks []webhookCounts,
	newest int64) ([]webhookCounts, error) {
	err := c.s.write(ctx, func(w *wtx) error {
		if c.s.pg {
			var err error
			if hooks, err = c.sharedDeliveries(ctx, w, newest); err != nil {
				return err
			}
		}
		for _, q := range queues {
			if q.queueTally == (queueTally{}) && q.depth == 0 && q.waitMS == 0 {
				continue
			}
			if _, err := w.exec(`INSERT INTO queue_minutes (queue, minute, added, completed, failed, depth, oldest_wait_ms)
				VALUES (?, ?, ?, ?, ?, ?, ?)
				ON CONFLICT (queue, minute) DO UPDATE SET added = queue_minutes.added + excluded.added,
					completed = queue_minutes.completed + excluded.completed, failed = queue_minutes.failed + excluded.failed,
					depth = excluded.depth, oldest_wait_ms = excluded.oldest_wait_ms`,
				q.queue, ms(minute), q.added, q.completed, q.failed, q.depth, q.waitMS); err != nil {
				return fmt.Errorf("store: chart sample: write queue %s: %w", q.queue, err)
			}
		}
		for _, h := range hooks {
			if h.deliveries == 0 && h.refused == 0 {
				continue
			}
			if _, err := w.exec(`INSERT INTO webhook_minutes (webhook_id, minute, deliveries, refusals) VALUES (?, ?, ?, ?)
				ON CONFLICT (webhook_id, minute) DO UPDATE SET deliveries = webhook_minutes.deliveries + excluded.deliveries,
					refusals = webhook_minutes.refusals + excluded.refusals`, h.id, ms(minute), h.deliveries, h.refused); err != nil {
				return fmt.Errorf("store: chart sample: write webhook %d: %w", h.id, err)
			}
		}
		return nil
	})
	return hooks, err
}

// QueueMinutes returns a queue's minutes from since on, oldest first; queue "" sums
// every queue's (the longest wait of any). Minutes with nothing in them have no
// row: they are zero.
func (s *Store) QueueMinutes(ctx context.Context, queue string, since time.Time) ([]QueueMinute, error) {
	q := `SELECT minute, added, completed, failed, depth, oldest_wait_ms FROM queue_minutes
		WHERE queue = ? AND minute >= ? ORDER BY minute`
	args := []any{queue, ms(since)}
	if queue == "" {
		q = `SELECT minute, sum(added), sum(completed), sum(failed), sum(depth), max(oldest_wait_ms) FROM queue_minutes
			WHERE minute >= ? GROUP BY minute ORDER BY minute`
		args = args[1:]
	}
	rows, err := s.query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("store: read the chart of queue %q: %w", queue, err)
	}
	defer rows.Close()
	var out []QueueMinute
	for rows.Next() {
		var m QueueMinute
		var minute, wait int64
		if err := rows.Scan(&minute, &m.Added, &m.Completed, &m.Failed, &m.Depth, &wait); err != nil {
			return nil, fmt.Errorf("store: read the chart of queue %q: %w", queue, err)
		}
		m.Minute, m.OldestWait = fromMS(minute), time.Duration(wait)*time.Millisecond
		out = append(out, m)
	}
	return out, rows.Err()
}

// WebhookMinutes returns a webhook's minutes from since on, oldest first.
func (s *Store) WebhookMinutes(ctx context.Context, webhookID int64, since time.Time) ([]WebhookMinute, error) {
	rows, err := s.query(ctx, `SELECT minute, deliveries, refusals FROM webhook_minutes
		WHERE webhook_id = ? AND minute >= ? ORDER BY minute`, webhookID, ms(since))
	if err != nil {
		return nil, fmt.Errorf("store: read the chart of webhook %d: %w", webhookID, err)
	}
	defer rows.Close()
	var out []WebhookMinute
	for rows.Next() {
		var m WebhookMinute
		var minute int64
		if err := rows.Scan(&minute, &m.Deliveries, &m.Refusals); err != nil {
			return nil, fmt.Errorf("store: read the chart of webhook %d: %w", webhookID, err)
		}
		m.Minute = fromMS(minute)
		out = append(out, m)
	}
	return out, rows.Err()
}

// PruneCharts deletes the charts' minutes that started before cutoff. It is not
// audited: the rows are counts the sampler derived, not anyone's data.
func (s *Store) PruneCharts(ctx context.Context, cutoff time.Time) (int64, error) {
	var n int64
	err := s.write(ctx, func(w *wtx) error {
		for _, table := range []string{"queue_minutes", "webhook_minutes"} {
			res, err := w.exec(`DELETE FROM `+table+` WHERE minute < ?`, ms(cutoff))
			if err != nil {
				return fmt.Errorf("store: prune chart history (%s): %w", table, err)
			}
			d, _ := res.RowsAffected()
			n += d
		}
		return nil
	})
	return n, err
}
