package store

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"time"
)

// MeasureFloor measures the raw durable single-row commit rate of the disk holding
// path, with the same pragmas the store uses: one INSERT per transaction, one
// connection, no writer. It is the yardstick for every throughput figure Switchboard
// reports, because machines differ and ratios travel. The file at path is created
// and removed. When path is a PostgreSQL URL the floor is that server's instead
// (see measurePostgresFloor).
func MeasureFloor(ctx context.Context, path string, opts Options, d time.Duration) (perSec float64, err error) {
	if IsPostgres(path) {
		return measurePostgresFloor(ctx, path, d)
	}
	if opts.Synchronous == "" {
		opts.Synchronous = SyncFull
	}
	syncWithFdatasync()
	if _, err := os.Stat(path); err == nil {
		return 0, fmt.Errorf("store: measure floor: %s already exists", path)
	}
	defer func() {
		for _, suffix := range []string{"", "-wal", "-shm"} {
			os.Remove(path + suffix)
		}
	}()
	db, err := sql.Open("sqlite", dsn(path, opts, false))
	if err != nil {
		return 0, fmt.Errorf("store: measure floor: %w", err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := db.ExecContext(ctx, `CREATE TABLE floor (id INTEGER PRIMARY KEY, v TEXT NOT NULL) STRICT`); err != nil {
		return 0, fmt.Errorf("store: measure floor: %w", err)
	}
	st, err := db.PrepareContext(ctx, `INSERT INTO floor (v) VALUES (?)`)
	if err != nil {
		return 0, fmt.Errorf("store: measure floor: %w", err)
	}
	defer st.Close()
	perSec, err = commitLoop(ctx, st, d)
	if err != nil {
		return 0, fmt.Errorf("store: measure floor: %w", err)
	}
	return perSec, nil
}

// commitLoop runs the one-row INSERT st, each its own transaction, for d and
// returns the commits per second.
func commitLoop(ctx context.Context, st *sql.Stmt, d time.Duration) (float64, error) {
	start := time.Now()
	n := 0
	for time.Since(start) < d {
		if _, err := st.ExecContext(ctx, "x"); err != nil {
			return 0, err
		}
		n++
	}
	return float64(n) / time.Since(start).Seconds(), nil
}
