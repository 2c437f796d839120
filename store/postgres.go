package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"
	"unicode"

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
		why = fmt.Sprintf("no answer within %s (a connect_timeout in the URL waits longer)", cfg.ConnectTimeout)
	} else if errors.As(err, &notPG) {
		why = "what answered there does not speak PostgreSQL's protocol (is that PostgreSQL's port?)"
	} else if errors.As(err, &pe) {
		why = pe.Message
		switch pe.Code {
		case "28P01", "28000":
			why += " (check the user and password in the URL, or PGPASSWORD)"
		case "3D000":
			why += " (create it first: createdb " + cfg.Database + ")"
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

// pgDumpAdvice refuses a SQLite-only file operation on PostgreSQL, with the
// command that does the job there.
func (s *Store) pgDumpAdvice(what string) error { return PgDumpAdvice(what, s.dsn) }

// PgDumpAdvice is pgDumpAdvice for a --db value, before any store is open (the
// CLI's backup and restore, which must not connect or lock anything). what is
// "backup" or "restore"; the command it gives may be pasted as it is, the
// password (never shown) coming from PGPASSWORD or ~/.pgpass.
func PgDumpAdvice(what, db string) error {
	server, schema, withoutPassword := pgDumpTarget(db)
	password := ""
	if withoutPassword {
		password = PasswordElsewhere
	}
	if what == "restore" {
		return fmt.Errorf("store: restore works on a SQLite file; on PostgreSQL restore pg_dump's archive with "+
			"pg_restore, serve stopped: pg_restore --clean --if-exists --dbname=%s switchboard.dump%s: %w",
			server, password, ErrSQLiteOnly)
	}
	if schema != "" {
		server = "--schema=" + shellQuote(schema) + " " + server
	}
	return fmt.Errorf("store: %s works on a SQLite file; on PostgreSQL back up with pg_dump: "+
		"pg_dump --format=custom --file=switchboard.dump %s%s (restore it with pg_restore, serve stopped): %w",
		what, server, password, ErrSQLiteOnly)
}

// pgDumpTarget is the server pg_dump and pg_restore are to connect to for db,
// as pasteable (see Pasteable), and the schema Switchboard uses there
// (pgDumpSchema). libpq takes no search_path, in a URL or as a keyword, so
// it is cut out, to become --schema.
func pgDumpTarget(db string) (server, schema string, withoutPassword bool) {
	plain, withoutPassword := pasteable(db)
	if strings.Contains(plain, "://") {
		plain, _ = cutQuery(plain, "search_path")
	} else if kept, _, ok := cutKeywords(plain, "search_path"); ok && kept != "" {
		plain = kept
	}
	return shellQuote(plain), pgDumpSchema(db), withoutPassword
}

// pgDumpSchema is the schema a store on db makes its tables in, as pgx reads
// db: the first of its search_path, given as a setting of its own or in its
// options (-c search_path=…, PGOPTIONS), "" if it names none (or only
// $user, which the server resolves), so that pg_dump dumps that schema alone.
func pgDumpSchema(db string) string {
	if CheckDB(db) != nil || !IsPostgres(db) {
		return ""
	}
	cfg, err := pgconn.ParseConfig(strings.TrimSpace(db))
	if err != nil {
		return ""
	}
	path := cfg.RuntimeParams["search_path"]
	if path == "" {
		path = optionsSetting(cfg.RuntimeParams["options"], "search_path")
	}
	first, _, _ := strings.Cut(path, ",")
	if first = strings.TrimSpace(first); strings.Trim(first, `"`) == "$user" {
		return ""
	}
	return first
}

// optionsSetting is the value the server's options (PostgreSQL's command-line
// options: -c name=value, -cname=value or --name=value, split at spaces, a
// backslash keeping the next character) give the setting name, "" if none.
func optionsSetting(options, name string) string {
	var words []string
	var word strings.Builder
	escaped := false
	for _, r := range options {
		switch {
		case escaped:
			word.WriteRune(r)
			escaped = false
		case r == '\\':
			escaped = true
		case unicode.IsSpace(r):
			if word.Len() > 0 {
				words, word = append(words, word.String()), strings.Builder{}
			}
		default:
			word.WriteRune(r)
		}
	}
	if word.Len() > 0 {
		words = append(words, word.String())
	}
	value := ""
	for i := 0; i < len(words); i++ {
		var setting string
		switch w := words[i]; {
		case w == "-c" && i+1 < len(words):
			i++
			setting = words[i]
		case strings.HasPrefix(w, "--"):
			setting = w[2:]
		case strings.HasPrefix(w, "-c"):
			setting = w[2:]
		default:
			continue
		}
		k, v, ok := strings.Cut(setting, "=")
		if ok && strings.EqualFold(strings.ReplaceAll(k, "-", "_"), name) {
			value = v // the last one is the server's
		}
	}
	return value
}

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

// pgErrorCode is the SQLSTATE of a PostgreSQL error, or "".
func pgErrorCode(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}
