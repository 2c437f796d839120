package store

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/switchboardhq/switchboard/internal/textcut"
)

// Dead letters in bulk: after an outage an operator mends the cause and puts the
// todos that failed of it back, all at once (a single one is Retry, in leases.go).

// retryChunk is how many dead letters RetryFailed puts back in one transaction, so
// that retrying thousands never holds the writer for long.
const retryChunk = 500

// Failed selects dead letters: on Queue ("" = every queue), and with Error set,
// only those whose last error is exactly *Error.
type Failed struct {
	Queue string
	Error *string
}

// describe says which dead letters f selects, for the audit log.
func (f Failed) describe() string {
	d := "every failed todo"
	if f.Queue != "" {
		d += " on " + f.Queue
	}
	if f.Error != nil {
		d += " with error " + strconv.Quote(textcut.Bytes(*f.Error, 100))
	}
	return d
}

// RetryFailed puts every dead-lettered todo f selects back on its queue, as Retry
// does one: claimable at once, attempts reset, each audited as todo.retry. Only
// todos that had failed when it was called are retried: it goes through them in
// id order, so one it put back that fails again meanwhile stays failed, as does
// one that first fails meanwhile. It works in chunks, each its own transaction, and
// returns how many it retried; after an error, those retried in earlier chunks stay
// retried.
func (s *Store) RetryFailed(ctx context.Context, f Failed, actor string) (int, error) {
	if s.unmatchable(&f.Queue, f.Error) {
		return 0, nil
	}
	before := ms(s.now())
	detail := f.describe()
	total := 0
	var after int64
	for {
		n := 0
		err := s.write(ctx, func(w *wtx) error {
			n = 0
			ids, err := w.failedIDs(f, after, before)
			if err != nil {
				return err
			}
			for _, id := range ids {
				if _, err := w.retry(id, actor, detail); err != nil {
					return err
				}
			}
			if len(ids) > 0 {
				after = ids[len(ids)-1] // only once the chunk is done: a write may run again (see write)
			}
			n = len(ids)
			return nil
		})
		if err != nil {
			return total, fmt.Errorf("store: retry failed todos after %d retried: %w", total, err)
		}
		total += n
		if n < retryChunk {
			return total, nil
		}
	}
}

// ErrorGroup is the dead letters that failed with one same last error.
type ErrorGroup struct {
	Error  string
	Count  int64
	Newest time.Time // when the latest of them failed
}

// errorGroupWindow bounds how many dead letters FailedErrors reads: the newest.
const errorGroupWindow = 10_000

// FailedErrors groups the newest errorGroupWindow dead letters on queue ("" = every
// queue) by their last error, the most common first (the most recent among equals),
// at most limit groups: what an operator mends before retrying them.
//
// For one queue it walks whichever set is smaller, as queue_counts says: every
// queue's dead letters (todos_state_id) or every todo of this queue
// (todos_queue_id). Either alone can be slow: with 300,000 dead letters on another
// queue, a quiet queue's groups took 67–123 ms by state, and 0.2–0.8 ms by queue.
// Only when both sets are large (that, beside a queue of 500,000 done todos) does
// it still take 120 ms.
func (s *Store) FailedErrors(ctx context.Context, queue string, limit int) ([]ErrorGroup, error) {
	from := `todos INDEXED BY todos_state_id WHERE state = 'failed'`
	args := []any{}
	if queue != "" {
		var failedAll, inQueue int64
		if err := s.queryRow(ctx, `SELECT coalesce(sum(CASE WHEN state = 'failed' THEN n END), 0),
				coalesce(sum(CASE WHEN queue = ? THEN n END), 0) FROM queue_counts`, queue).Scan(&failedAll, &inQueue); err != nil {
			return nil, fmt.Errorf("store: group failed todos by error: count them: %w", err)
		}
		// "queue = ?" as it is: "(? = '' OR queue = ?)" would keep SQLite from
		// reading todos_queue_id as a range.
		from = `todos INDEXED BY todos_state_id WHERE state = 'failed' AND queue = ?`
		if inQueue < failedAll {
			from = `todos INDEXED BY todos_queue_id WHERE queue = ? AND state = 'failed'`
		}
		args = append(args, queue)
	}
	rows, err := s.query(ctx, `SELECT last_error, count(*), max(updated_at) FROM (
			SELECT last_error, updated_at FROM `+from+` ORDER BY id DESC LIMIT ?) AS newest
		GROUP BY last_error ORDER BY count(*) DESC, max(updated_at) DESC LIMIT ?`,
		append(args, errorGroupWindow, limit)...)
	if err != nil {
		return nil, fmt.Errorf("store: group failed todos by error: %w", err)
	}
	defer rows.Close()
	var out []ErrorGroup
	for rows.Next() {
		var g ErrorGroup
		var newest int64
		if err := rows.Scan(&g.Error, &g.Count, &newest); err != nil {
			return nil, fmt.Errorf("store: group failed todos by error: %w", err)
		}
		g.Newest = fromMS(newest)
		out = append(out, g)
	}
	return out, rows.Err()
}

// failedIDs lists up to retryChunk todos that f selects and that were last changed
// at or before before (unix ms), in id order after after. It reads the failed todos
// of every queue (todos_state_id), which are few beside a queue's done ones.
func (w *wtx) failedIDs(f Failed, after, before int64) ([]int64, error) {
	anyError, lastError := f.Error == nil, ""
	if f.Error != nil {
		lastError = *f.Error
	}
	query := `SELECT id FROM todos INDEXED BY todos_state_id
		WHERE state = 'failed' AND cancelled_by = '' AND id > ? AND updated_at <= ? AND (? = '' OR queue = ?) AND (? OR last_error = ?)
		ORDER BY id LIMIT ?`
	if w.w.s.pg {
		// Locked, so that another process's retry of the same dead letters
		// (which waits here) finds them pending under the lock and passes them.
		query += ` FOR UPDATE`
	}
	rows, err := w.query(query, after, before, f.Queue, f.Queue, anyError, lastError, retryChunk)
	if err != nil {
		return nil, fmt.Errorf("store: find failed todos: %w", err)
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("store: find failed todos: %w", err)
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}
