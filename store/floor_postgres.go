package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/stdlib"
)

// measurePostgresFloor is MeasureFloor on the PostgreSQL server dbURL names: one
// connection of its own, synchronous_commit on (so each commit waits for the
// server's WAL flush, as the store's do), one-row INSERTs into a table made for the
// run in the URL's schema and dropped after it. The figure holds the round trip
// to the server as well as its disk: that is the floor a store on it stands on.
func measurePostgresFloor(ctx context.Context, dbURL string, d time.Duration) (float64, error) {
	fail := func(err error) error {
		return fmt.Errorf("store: measure floor on %s: %w", Redacted(dbURL), err)
	}
	cfg, err := parsePostgres(dbURL)
	if err != nil {
		return 0, fmt.Errorf("measure floor: %w", err)
	}
	cfg.RuntimeParams["synchronous_commit"] = "on"
	db := stdlib.OpenDB(*cfg)
	defer db.Close()
	db.SetMaxOpenConns(1)
	if err := db.PingContext(ctx); err != nil {
		// The store's own one-line account of a refused connection.
		return 0, fmt.Errorf("measure floor: %w", connectError(cfg, err))
	}
	var b [6]byte
	rand.Read(b[:])
	table := "switchboard_floor_" + hex.EncodeToString(b[:])
	if _, err := db.ExecContext(ctx, `CREATE TABLE `+table+` (id bigserial PRIMARY KEY, v text NOT NULL)`); err != nil {
		return 0, fail(err)
	}
	defer db.ExecContext(context.WithoutCancel(ctx), `DROP TABLE IF EXISTS `+table)
	st, err := db.PrepareContext(ctx, `INSERT INTO `+table+` (v) VALUES ($1)`)
	if err != nil {
		return 0, fail(err)
	}
	defer st.Close()
	perSec, err := commitLoop(ctx, st, d)
	if err != nil {
		return 0, fail(err)
	}
	return perSec, nil
}
