package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// benchPostgres is the PostgreSQL server `bench --db URL` measures: where it is,
// as a report may name it, and, for the in-process server, a schema of its own.
type benchPostgres struct {
	backend string // "PostgreSQL 15.8 at 127.0.0.1:5432, database app, synchronous_commit=on"
	url     string // the URL with search_path set to the run's schema ("" until made)
	drop    func() // drops the run's schema
}

// inspectBenchPostgres connects to dbURL and says what it is; with fresh it also
// creates a schema for the run (switchboard_bench_…), which drop removes with all
// it holds. The role needs CREATE on the database for that.
func inspectBenchPostgres(ctx context.Context, dbURL string, fresh bool) (*benchPostgres, error) {
	cfg, err := pgx.ParseConfig(dbURL)
	if err != nil {
		return nil, usageErr("--db does not read as a PostgreSQL URL or settings (postgres://user@host:port/database)")
	}
	where := net.JoinHostPort(cfg.Host, fmt.Sprint(cfg.Port))
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("bench: PostgreSQL at %s (database %q, user %q): %s", where, cfg.Database, cfg.User, lastCause(err))
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var version, syncCommit string
	if err := conn.QueryRow(ctx, `SELECT current_setting('server_version'), current_setting('synchronous_commit')`).
		Scan(&version, &syncCommit); err != nil {
		return nil, fmt.Errorf("bench: PostgreSQL at %s: %s", where, lastCause(err))
	}
	p := &benchPostgres{backend: fmt.Sprintf("PostgreSQL %s at %s, database %s, synchronous_commit=%s",
		strings.Fields(version)[0], where, cfg.Database, syncCommit), drop: func() {}}
	if !fresh {
		return p, nil
	}
	var b [6]byte
	rand.Read(b[:])
	schema := "switchboard_bench_" + hex.EncodeToString(b[:])
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		return nil, fmt.Errorf("bench: create a schema for the run on PostgreSQL at %s (the role needs CREATE on database %s): %s",
			where, cfg.Database, lastCause(err))
	}
	p.drop = func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if conn, err := pgx.ConnectConfig(ctx, cfg); err == nil {
			conn.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE")
			conn.Close(ctx)
		}
	}
	u, err := url.Parse(dbURL)
	if err != nil {
		p.drop()
		return nil, usageErr("--db is not a URL")
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	p.url = u.String()
	p.backend += ", schema " + schema + " (dropped after the run)"
	return p, nil
}

// lastCause is the last line of err: pgx's connect errors list every address tried.
func lastCause(err error) string {
	msg := strings.TrimSpace(err.Error())
	if i := strings.LastIndex(msg, "\n"); i >= 0 {
		msg = strings.TrimSpace(msg[i+1:])
	}
	return msg
}
