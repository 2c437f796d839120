package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/stdlib"
)

// On PostgreSQL the store keeps the same two pools as on SQLite: one connection
// for the group-commit writer (and the migrations before it), and a read pool whose
// sessions are read-only. Both come from one parsed pgx configuration: the URL, its
// libpq keywords, and the PG* variables for whatever the URL leaves out.

// openPostgres opens the write connection (migrating through it) and the read pool.
func (s *Store) openPostgres(ctx context.Context) error {
	cfg, err := parsePostgres(s.dsn)
	if err != nil {
		return err
	}
	pinSession(cfg)
	s.pgcfg = cfg
	if !s.opts.ReadOnly {
		wcfg := cfg.Copy()
		// A writer that stops between statements (its host frozen, its process
		// stopped) must not hold the fleet's writer lock (pgWriterLock) for as long
		// as TCP takes to notice: the server ends such a transaction after a minute.
		wcfg.RuntimeParams["idle_in_transaction_session_timeout"] = "60000"
		// The writer plans without sequential scans (pgWriterPlanning), which
		// PostgreSQL does by adding 10¹⁰ to a scan's cost: a statement no index
		// serves would pass every JIT threshold and be compiled on each run
		// (17 ms and more for a two-row table). Its statements are small.
		wcfg.RuntimeParams["jit"] = "off"
		s.wdb = stdlib.OpenDB(*wcfg)
		s.wdb.SetMaxOpenConns(1)
		s.wdb.SetMaxIdleConns(1)
		s.wdb.SetConnMaxLifetime(0)
		s.wdb.SetConnMaxIdleTime(0)
		if err := s.wdb.PingContext(ctx); err != nil {
			s.wdb.Close()
			return connectError(cfg, err)
		}
		if err := s.requireTables(ctx); err != nil {
			s.wdb.Close()
			return err
		}
		if err := s.migrate(ctx); err != nil {
			s.wdb.Close()
			return err
		}
	}
	rcfg := cfg.Copy()
	// The read pool must never write, even by mistake.
	rcfg.RuntimeParams["default_transaction_read_only"] = "on"
	s.rdb = stdlib.OpenDB(*rcfg)
	s.rdb.SetMaxOpenConns(s.opts.ReadConns)
	s.rdb.SetMaxIdleConns(s.opts.ReadConns)
	if err := s.rdb.PingContext(ctx); err != nil {
		s.closeDBs()
		return connectError(cfg, err)
	}
	if s.opts.ReadOnly {
		check := s.checkSchema
		if s.opts.OlderSchema {
			check = func(ctx context.Context) error { return checkVersion(ctx, s.rdb, s.path, true) }
		}
		if err := check(ctx); err != nil {
			s.closeDBs()
			return err
		}
	}
	return nil
}

// connectError says, in one line, which server was tried and why it did not take
// the connection, without the password.
func connectError(cfg *pgx.ConnConfig, err error) error {
	why := err.Error()
	var pe *pgconn.PgError
	var notPG *pgproto3.ExceededMaxBodyLenErr
	if pgconn.Timeout(err) {
		why = fmt.Sprintf("no answer within %s (connect_timeout sets how long to wait)", cfg.ConnectTimeout)
	} else if errors.As(err, &notPG) {
		why = "what answered there does not speak PostgreSQL's protocol (is that PostgreSQL's port?)"
	} else if errors.As(err, &pe) {
		why = pe.Message
		switch pe.Code {
		case "28P01", "28000":
			why += " (check the user and password in the URL, or PGPASSWORD)"
		case "3D000":
			// Owned by the role that connects, so that it may create its tables
			// there (since PostgreSQL 15 no role but the owner may in public).
			why += " (create it first, owned by the role that connects: createdb --owner=" +
				shellQuote(cfg.User) + " " + shellQuote(cfg.Database) + ")"
		}
	} else if i := strings.LastIndex(why, ": "); i >= 0 {
		why = why[i+2:] // pgx prefixes the whole configuration; the cause is last
	}
	return fmt.Errorf("store: PostgreSQL at %s: %s: %w", pgWhere(cfg), why, ErrUnreachable)
}

// pgWhere names the server cfg dials, and as whom.
func pgWhere(cfg *pgx.ConnConfig) string {
	where := net.JoinHostPort(cfg.Host, fmt.Sprint(cfg.Port))
	if strings.HasPrefix(cfg.Host, "/") {
		where = fmt.Sprintf("%s (port %d)", cfg.Host, cfg.Port)
	}
	return fmt.Sprintf("%s (database %q, user %q)", where, cfg.Database, cfg.User)
}

// ErrSQLiteOnly: what was asked works on a SQLite file only.
var ErrSQLiteOnly = errors.New("SQLite only")

// ErrUnreachable: the database server did not take the connection.
var ErrUnreachable = errors.New("database unreachable")

// pgMigrationLock is the advisory lock key migrations run under, per schema, so two
// processes starting at once do not both migrate (tests run a schema each).
const pgMigrationLock = `SELECT pg_advisory_lock(hashtext('switchboard.migrate.' || current_schema()))`
const pgMigrationUnlock = `SELECT pg_advisory_unlock(hashtext('switchboard.migrate.' || current_schema()))`

// lockMigrations takes the migration lock on conn (PostgreSQL) and returns its
// release; on SQLite the writer's lock serialises migrations already.
func (s *Store) lockMigrations(ctx context.Context, conn *sql.Conn) (func(), error) {
	if !s.pg {
		return func() {}, nil
	}
	lockCtx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	if _, err := conn.ExecContext(lockCtx, pgMigrationLock); err != nil {
		return nil, fmt.Errorf("store: wait for another process's migrations: %w", err)
	}
	return func() { conn.ExecContext(context.WithoutCancel(ctx), pgMigrationUnlock) }, nil
}

// pgReadOnly is SQLSTATE read_only_sql_transaction: a standby, or
// default_transaction_read_only.
const pgReadOnly = "25006"

// pgErrorCode is the SQLSTATE of a PostgreSQL error, or "".
func pgErrorCode(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

// pinSession sets what every connection of the store runs with, whatever the
// role, the database or the URL default to. Its writers take turns under a lock
// (pgWriterLock) and read at READ COMMITTED: under a stricter default isolation
// a transaction's snapshot was taken before its wait for the lock, and the
// other process's commit in between failed it with a serialization error. And
// an idle_session_timeout (PostgreSQL 14 and later) would end the connection
// that listens for the other processes' commits, and the writer's, whenever
// they sit idle.
func pinSession(cfg *pgx.ConnConfig) {
	cfg.RuntimeParams["default_transaction_isolation"] = "read committed"
	cfg.AfterConnect = func(ctx context.Context, c *pgconn.PgConn) error {
		err := c.Exec(ctx, `SELECT set_config('idle_session_timeout', '0', false)
			WHERE current_setting('idle_session_timeout', true) IS NOT NULL`).Close()
		if err != nil {
			return fmt.Errorf("store: keep the session open while idle: %w", err)
		}
		return nil
	}
}
