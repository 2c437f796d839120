package store

import (
	"context"
	"database/sql"
	"fmt"
)

// Maintain checkpoints the WAL back into the database file (so the WAL does not grow
// without bound under steady load) and lets SQLite refresh its query-planner
// statistics. serve runs it periodically.
//
// On PostgreSQL there is nothing to do: the server's autovacuum and its own
// checkpoints do this work.
func (s *Store) Maintain(ctx context.Context) error {
	if s.pg {
		return nil
	}
	return s.exclusive(ctx, func(c *sql.Conn) error {
		var busy, logFrames, checkpointed int
		if err := c.QueryRowContext(ctx, `PRAGMA wal_checkpoint(PASSIVE)`).Scan(&busy, &logFrames, &checkpointed); err != nil {
			return fmt.Errorf("store: wal checkpoint: %w", err)
		}
		if _, err := c.ExecContext(ctx, `PRAGMA optimize`); err != nil {
			return fmt.Errorf("store: optimize: %w", err)
		}
		return nil
	})
}
