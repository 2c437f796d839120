package store

import (
	"context"
	"fmt"
)

// SeedKeyedTodosForBench puts n pending todos on queue spread over keys keys
// (k0, k1, …, round robin) with priorities 0 to 2, as a stream of keyed
// deliveries leaves them: the first todo of each key is its front, the others
// wait behind it. Like SeedTodosForBench it writes no audit rows, no payloads
// and rings no doorbell. The queue must hold no keyed todos yet.
func (s *Store) SeedKeyedTodosForBench(ctx context.Context, queue string, n, keys int) error {
	if !ValidQueueName(queue) || keys <= 0 {
		return fmt.Errorf("store: seed keyed todos: queue %q, %d keys: %w", queue, keys, ErrInvalid)
	}
	const insert = `INSERT INTO todos (queue, state, payload_size, created_by, max_attempts, available_at,
			created_at, updated_at, key, key_waiting, priority)
		SELECT ?, 'pending', 0, 'system:bench', ?, ?, ?, ?, 'k' || CAST(i % ? AS TEXT),
			CASE WHEN i < ? THEN 0 ELSE 1 END, i % 3 FROM `
	chunk := n
	if s.pg {
		chunk = pgSeedChunk // see pgSeedTodos
	}
	for done := 0; done < n; done += chunk {
		err := s.write(ctx, func(w *wtx) error {
			now := ms(w.now)
			last := min(done+chunk, n) - 1
			series := `(WITH RECURSIVE seq(i) AS (SELECT ? UNION ALL SELECT i + 1 FROM seq WHERE i < ?) SELECT i FROM seq)`
			if w.w.s.pg {
				series = `generate_series(CAST(? AS BIGINT), CAST(? AS BIGINT)) AS seq(i)`
			}
			_, err := w.exec(insert+series, queue, DefaultMaxAttempts, now, now, now, keys, keys, done, last)
			return err
		})
		if err != nil {
			return fmt.Errorf("store: seed %d keyed todos on %s (%d seeded): %w", n, queue, done, err)
		}
	}
	return nil
}
