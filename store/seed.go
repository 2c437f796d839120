package store

import (
	"context"
	"fmt"
)

// SeedTodosForBench puts n pending todos with the same payload on queue in one
// statement, for benchmarks and load tests that need a deep queue fast (a million
// rows in seconds rather than a million group commits). It writes no audit rows and
// rings no doorbell: seeded rows are scenery, not work anyone asked for.
func (s *Store) SeedTodosForBench(ctx context.Context, queue string, n int, payload string) error {
	if !ValidQueueName(queue) {
		return fmt.Errorf("store: seed todos: queue %q: %w", queue, ErrInvalid)
	}
	if n <= 0 {
		return nil
	}
	if s.pg {
		return s.pgSeedTodos(ctx, queue, n, payload)
	}
	return s.write(ctx, func(w *wtx) error {
		now := ms(w.now)
		var first int64
		if err := w.queryRow(`SELECT coalesce(max(id), 0) + 1 FROM todos`).Scan(&first); err != nil {
			return fmt.Errorf("store: seed %d todos on %s: %w", n, queue, err)
		}
		_, err := w.exec(`WITH RECURSIVE seq(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM seq WHERE i < ?)
			INSERT INTO todos (queue, state, payload_size, created_by, max_attempts, available_at,
				created_at, updated_at)
			SELECT ?, 'pending', ?, 'system:bench', ?, ?, ?, ? FROM seq`,
			n, queue, len(payload), DefaultMaxAttempts, now, now, now)
		if err != nil {
			return fmt.Errorf("store: seed %d todos on %s: %w", n, queue, err)
		}
		if payload == "" {
			return nil
		}
		_, err = w.exec(`INSERT INTO todo_payloads (todo_id, payload) SELECT id, ? FROM todos WHERE id >= ?`, payload, first)
		if err != nil {
			return fmt.Errorf("store: seed %d todo payloads on %s: %w", n, queue, err)
		}
		return nil
	})
}

// pgSeedChunk is how many todos one transaction of pgSeedTodos inserts. When
// each insert counted itself in its queue_counts row (0006's row trigger; since
// 0019 a statement counts its rows once), PostgreSQL kept every version of that
// row within the transaction and each count walked them all: a million in one
// transaction took longer than a quarter of an hour, while chunks of a thousand
// took seconds. The chunks stay: one transaction's size stays bounded.
const pgSeedChunk = 1000

// pgSeedTodos is SeedTodosForBench on PostgreSQL, in chunks of pgSeedChunk, ids
// from the sequence (the payloads follow the ids the INSERT returns).
func (s *Store) pgSeedTodos(ctx context.Context, queue string, n int, payload string) error {
	for done := 0; done < n; done += pgSeedChunk {
		err := s.write(ctx, func(w *wtx) error {
			now := ms(w.now)
			_, err := w.exec(`WITH seeded AS (
					INSERT INTO todos (queue, state, payload_size, created_by, max_attempts, available_at, created_at, updated_at)
					SELECT ?, 'pending', ?, 'system:bench', ?, ?, ?, ? FROM generate_series(1, CAST(? AS INTEGER))
					RETURNING id)
				INSERT INTO todo_payloads (todo_id, payload) SELECT id, ? FROM seeded WHERE ? != ''`,
				queue, len(payload), DefaultMaxAttempts, now, now, now, min(pgSeedChunk, n-done), pgPayloadIn(payload), payload)
			return err
		})
		if err != nil {
			return fmt.Errorf("store: seed %d todos on %s (%d seeded): %w", n, queue, done, err)
		}
	}
	return nil
}
