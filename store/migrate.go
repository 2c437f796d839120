package store

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"github.com/jackc/pgx/v5"
	"io/fs"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Each dialect has its own numbered set (migrations/sqlite, migrations/postgres);
// TestMigrationsInStep keeps the two sets' numbers and resulting schemas alike.
//
//go:embed migrations/sqlite/*.sql migrations/postgres/*.sql
var migrationFS embed.FS

// querier is what reads a schema: the pools, or one connection of them.
type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

type migration struct {
	version int
	name    string
	sql     string
}

// migrations lists the embedded migrations in order. Names are NNNN_what.sql; each
// number is used once. Numbers may have gaps: a database records which migrations it
// has, and any it lacks are applied in order.
func migrations() ([]migration, error) { return migrationsOf("sqlite") }

// migrationsOf lists one dialect's migrations ("sqlite" or "postgres").
func migrationsOf(dialect string) ([]migration, error) {
	dir := "migrations/" + dialect
	entries, err := fs.ReadDir(migrationFS, dir)
	if err != nil {
		return nil, fmt.Errorf("store: read migrations: %w", err)
	}
	var list []migration
	seen := map[int]string{}
	for _, e := range entries {
		num, _, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("store: migration %q is not named NNNN_name.sql", e.Name())
		}
		if prev, dup := seen[v]; dup {
			return nil, fmt.Errorf("store: migrations %s and %s share a number", prev, e.Name())
		}
		seen[v] = e.Name()
		body, err := migrationFS.ReadFile(dir + "/" + e.Name())
		if err != nil {
			return nil, fmt.Errorf("store: read migration %s: %w", e.Name(), err)
		}
		list = append(list, migration{version: v, name: e.Name(), sql: string(body)})
	}
	sort.Slice(list, func(i, j int) bool { return list[i].version < list[j].version })
	return list, nil
}

// SchemaVersion is the newest migration this binary knows.
func SchemaVersion() int {
	list, err := migrations()
	if err != nil || len(list) == 0 {
		return 0
	}
	return list[len(list)-1].version
}

// knownVersion reports whether this binary has migration v.
func knownVersion(v int) bool {
	list, _ := migrations()
	for _, m := range list {
		if m.version == v {
			return true
		}
	}
	return false
}

// preflight opens an existing file read-only, without pragmas, and refuses files that
// are not Switchboard databases or were migrated by a newer binary. It never writes.
func preflight(ctx context.Context, path string) error {
	fi, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("store: open %s: %w", path, err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("store: open %s: not a regular file", path)
	}
	if fi.Size() == 0 {
		return nil
	}
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		return fmt.Errorf("store: open %s: %w", path, err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	return checkVersion(ctx, db, path, false)
}

// tablesQuery counts a database's tables, and whether schema_migrations is one.
const (
	sqliteTables = `SELECT count(*), count(*) FILTER (WHERE name = 'schema_migrations')
		FROM sqlite_master WHERE type = 'table'`
	pgTables = `SELECT count(*), count(*) FILTER (WHERE table_name = 'schema_migrations')
		FROM information_schema.tables WHERE table_schema = current_schema()`
)

// checkVersion verifies the schema recorded in db against this binary's migrations.
func checkVersion(ctx context.Context, db querier, path string, pg bool) error {
	var tables, hasMigrations int
	query := sqliteTables
	if pg {
		query = pgTables
	}
	err := db.QueryRowContext(ctx, query).Scan(&tables, &hasMigrations)
	if err != nil {
		if isNotADB(err) {
			return fmt.Errorf("store: %s: %w (the file is not a SQLite database)", path, ErrNotSwitchboard)
		}
		return fmt.Errorf("store: inspect %s: %w", path, err)
	}
	if tables == 0 {
		return nil
	}
	if hasMigrations == 0 {
		if pg {
			return fmt.Errorf("store: %s: %w (its schema has tables but no schema_migrations: give Switchboard a "+
				"database or schema of its own)", path, ErrNotSwitchboard)
		}
		return fmt.Errorf("store: %s: %w (it has tables but no schema_migrations)", path, ErrNotSwitchboard)
	}
	applied, err := appliedVersions(ctx, db)
	if err != nil {
		return fmt.Errorf("store: read schema version of %s: %w", path, err)
	}
	newest := 0
	for v := range applied {
		if !knownVersion(v) {
			newest = max(newest, v)
		}
	}
	if newest > 0 {
		return fmt.Errorf("store: %s: %w (it has migration %d, this binary knows up to %d: upgrade Switchboard, "+
			"or to go back to this version restore a backup made before the upgrade)", path, ErrSchemaTooNew, newest, SchemaVersion())
	}
	return nil
}

// checkSchema is checkVersion on the open read pool, for read-only opens, which also
// require the schema to be complete.
func (s *Store) checkSchema(ctx context.Context) error {
	if err := checkVersion(ctx, s.rdb, s.path, s.pg); err != nil {
		return err
	}
	applied, err := appliedVersions(ctx, s.rdb)
	if s.pg && pgErrorCode(err) == "42P01" { // undefined_table: the schema is empty, a file not yet made
		return s.noTables()
	}
	if s.pg && pgErrorCode(err) == "42501" { // insufficient_privilege
		return fmt.Errorf("store: %s: the role may not read Switchboard's tables (GRANT it the rights, "+
			"or connect as the role serve uses): %w", s.path, err)
	}
	if err != nil {
		return fmt.Errorf("store: %s: %w", s.path, ErrNotSwitchboard)
	}
	list, _ := migrations()
	for _, m := range list {
		if !applied[m.version] {
			return fmt.Errorf("store: %s lacks migration %s: start serve with this Switchboard once to migrate it "+
				"(a command that writes migrates it too, when no serve runs)", s.path, m.name)
		}
	}
	return nil
}

// noTables says that the PostgreSQL schema s opened was never migrated.
func (s *Store) noTables() error {
	return fmt.Errorf("store: %s holds no Switchboard tables yet (serve creates them; is that the schema you meant?): %w",
		s.path, fs.ErrNotExist)
}

// requireTables refuses, under Options.MustExist, a PostgreSQL schema that was
// never migrated (noTables), before the writer's connection migrates it.
func (s *Store) requireTables(ctx context.Context) error {
	if !s.opts.MustExist {
		return nil
	}
	var found, inSchema bool
	if err := s.wdb.QueryRowContext(ctx, `SELECT to_regclass('schema_migrations') IS NOT NULL,
		current_schema() IS NOT NULL`).Scan(&found, &inSchema); err != nil {
		return fmt.Errorf("store: look for Switchboard's tables in %s: %w", s.path, err)
	}
	if !found {
		if !inSchema {
			return fmt.Errorf("store: %s: its search_path names no schema that exists and the role may use "+
				"(CREATE SCHEMA … AUTHORIZATION the role, or correct the search_path): %w", s.path, fs.ErrNotExist)
		}
		return s.noTables()
	}
	return nil
}

// notOwner says that the role s connects as may not read Switchboard's tables,
// which another role made (err is PostgreSQL's refusal), and gives the statement
// that hands that role's tables and functions in the schema to this one.
// REASSIGN OWNED would not do: it cannot move what the bootstrap superuser owns
// (the usual maker, a command first run as postgres), and moves the role's
// objects in every schema of the database.
func (s *Store) notOwner(ctx context.Context, conn *sql.Conn, err error) error {
	schema, role := pgWho(ctx, conn)
	var owner sql.NullString
	conn.QueryRowContext(ctx, `SELECT pg_get_userbyid(relowner) FROM pg_class
		WHERE oid = to_regclass('schema_migrations')`).Scan(&owner)
	if !owner.Valid || schema == "…" || role == "…" {
		return fmt.Errorf("store: %s: the role %s may not use Switchboard's tables in the schema %s: another role made "+
			"them (a command run as that role?); run Switchboard as that role, or have a superuser make this one "+
			"their owner: %w", s.path, role, schema, err)
	}
	maker := pgx.Identifier{owner.String}.Sanitize()
	return fmt.Errorf("store: %s: the role %s may not use Switchboard's tables in the schema %s: the role %s made "+
		"them (a command run as it?); run Switchboard as %s, or give them to %s, as a superuser: %s: %w",
		s.path, role, schema, maker, maker, role, giveTables(schema, maker, role), err)
}

// giveTables is a statement that makes role the owner of the tables (their id
// sequences with them) and functions that owner has in schema; each is an SQL
// identifier. A superuser runs it: the owner may give them only to a role it
// is a member of.
func giveTables(schema, owner, role string) string {
	in := quoteLiteral(schema) + "::regnamespace"
	by := quoteLiteral(owner) + "::regrole"
	// The body's dollar quote must not occur in the names it holds, or one of
	// them would end it and run what follows as SQL of its own.
	tag := "$switchboard$"
	for i := 1; strings.Contains(schema+owner+role, tag); i++ {
		tag = fmt.Sprintf("$switchboard%d$", i)
	}
	return `DO ` + tag + `DECLARE r record; BEGIN ` +
		`FOR r IN SELECT oid::regclass AS o FROM pg_class WHERE relnamespace = ` + in + ` AND relowner = ` + by + ` AND relkind = 'r' ` +
		`LOOP EXECUTE format('ALTER TABLE %s OWNER TO %s', r.o, ` + quoteLiteral(role) + `); END LOOP; ` +
		`FOR r IN SELECT oid::regprocedure AS o FROM pg_proc WHERE pronamespace = ` + in + ` AND proowner = ` + by + ` ` +
		`LOOP EXECUTE format('ALTER FUNCTION %s OWNER TO %s', r.o, ` + quoteLiteral(role) + `); END LOOP; END` + tag
}

// quoteLiteral is s as an SQL string literal.
func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// pgWho is the schema a connection creates tables in and the role it is,
// each as an SQL identifier; … where it cannot tell.
func pgWho(ctx context.Context, conn *sql.Conn) (schema, role string) {
	var sc sql.NullString
	var r string
	if err := conn.QueryRowContext(ctx, `SELECT current_schema(), current_user`).Scan(&sc, &r); err != nil {
		return "…", "…"
	}
	schema = "…"
	if sc.Valid {
		schema = pgx.Identifier{sc.String}.Sanitize()
	}
	return schema, pgx.Identifier{r}.Sanitize()
}

// migrate applies, in order, each embedded migration the database has not recorded,
// each in its own transaction together with its schema_migrations row. On
// PostgreSQL it runs under an advisory lock, so processes starting at once migrate
// one after the other, and the later ones find nothing left to do.
func (s *Store) migrate(ctx context.Context) error {
	dialect, create := "sqlite", `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER PRIMARY KEY,
		name       TEXT    NOT NULL,
		applied_at INTEGER NOT NULL
	) STRICT`
	if s.pg {
		dialect, create = "postgres", `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    BIGINT PRIMARY KEY,
		name       TEXT   NOT NULL,
		applied_at BIGINT NOT NULL
	)`
	}
	list, err := migrationsOf(dialect)
	if err != nil {
		return err
	}
	conn, err := s.wdb.Conn(ctx)
	if err != nil {
		return fmt.Errorf("store: migrate %s: %w", s.path, err)
	}
	defer conn.Close()
	unlock, err := s.lockMigrations(ctx, conn)
	if err != nil {
		return err
	}
	defer unlock()
	if err := checkVersion(ctx, conn, s.path, s.pg); err != nil {
		return err
	}
	if err := s.createMigrationsTable(ctx, conn, create); err != nil {
		if s.pg && pgErrorCode(err) == pgReadOnly {
			return s.readOnly("create Switchboard's tables", err)
		}
		if s.pg && pgErrorCode(err) == "42501" {
			schema, role := pgWho(ctx, conn)
			return fmt.Errorf("store: create tables in %s: the role may not create tables in its schema "+
				"(GRANT CREATE ON SCHEMA %s TO %s; or give it a schema of its own, CREATE SCHEMA %s AUTHORIZATION %s, "+
				"or a database of its own): %w", s.path, schema, role, role, role, err)
		}
		if s.pg && pgErrorCode(err) == "3F000" { // no schema in search_path exists that the role may use
			return fmt.Errorf("store: create tables in %s: no schema to create them in: the one its search_path "+
				"names does not exist or the role may not use it (CREATE SCHEMA … AUTHORIZATION the role): %w", s.path, err)
		}
		return fmt.Errorf("store: create schema_migrations in %s: %w", s.path, err)
	}
	applied, err := appliedVersions(ctx, conn)
	if err != nil {
		if s.pg && pgErrorCode(err) == "42501" {
			return s.notOwner(ctx, conn, err)
		}
		return fmt.Errorf("store: read schema version in %s: %w", s.path, err)
	}
	var pending []migration
	var names []string
	for _, m := range list {
		if !applied[m.version] {
			pending, names = append(pending, m), append(names, m.name)
		}
	}
	if len(pending) == 0 {
		return nil
	}
	if s.opts.MigrateUnservedOnly && !s.pg {
		unlock, err := LockForServe(s.path)
		if errors.Is(err, ErrInUse) {
			return fmt.Errorf("store: %s lacks %s, and a running serve uses it (an older Switchboard would not "+
				"start again on the migrated database). Restart serve with this Switchboard, which migrates it, "+
				"then run this again: %w", s.path, strings.Join(names, ", "), ErrInUse)
		}
		if err != nil {
			return err
		}
		defer unlock()
		// Another process may have migrated it while the lock was not held, even
		// a newer Switchboard.
		if err := checkVersion(ctx, conn, s.path, s.pg); err != nil {
			return err
		}
		if applied, err = appliedVersions(ctx, conn); err != nil {
			return fmt.Errorf("store: read schema version: %w", err)
		}
		pending = slices.DeleteFunc(pending, func(m migration) bool { return applied[m.version] })
	}
	existed := len(applied) > 0
	for _, m := range pending {
		if err := s.applyMigration(ctx, conn, m); err != nil {
			return err
		}
		s.log.Info("applied migration", "name", m.name)
		if existed {
			s.migrations = append(s.migrations, m.name)
		}
	}
	return nil
}

// createMigrationsTable runs create, schema_migrations' CREATE TABLE IF NOT
// EXISTS, unless PostgreSQL has that table in the schema it would create it in:
// there a role or server that takes no writes (a standby, or
// default_transaction_read_only) refuses even a CREATE that would do nothing,
// and a command that only reads must still run.
func (s *Store) createMigrationsTable(ctx context.Context, conn *sql.Conn, create string) error {
	if s.pg {
		var found bool
		if err := conn.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM pg_tables
			WHERE schemaname = current_schema() AND tablename = 'schema_migrations')`).Scan(&found); err != nil {
			return err
		}
		if found {
			return nil
		}
	}
	_, err := conn.ExecContext(ctx, create)
	return err
}

// readOnly says that PostgreSQL refused what (a migration's writes) because
// the session takes no writes; err is its refusal.
func (s *Store) readOnly(what string, err error) error {
	return fmt.Errorf("store: %s in %s: this connection takes no writes (a standby, or the role's or database's "+
		"default_transaction_read_only is on): Switchboard needs a primary and a role that may write: %w", what, s.path, err)
}

// applyMigration runs one migration and records it, in one transaction.
func (s *Store) applyMigration(ctx context.Context, conn *sql.Conn, m migration) error {
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store: migration %s: %w", m.name, err)
	}
	if _, err := tx.ExecContext(ctx, m.sql); err != nil {
		tx.Rollback()
		if s.pg && pgErrorCode(err) == pgReadOnly {
			return s.readOnly("migration "+m.name, err)
		}
		return fmt.Errorf("store: migration %s: %w", m.name, err)
	}
	if _, err := tx.ExecContext(ctx, s.q(`INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`),
		m.version, m.name, s.now().UnixMilli()); err != nil {
		tx.Rollback()
		return fmt.Errorf("store: record migration %s: %w", m.name, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("store: commit migration %s: %w", m.name, err)
	}
	return nil
}

// Migrated names the migrations this Open applied to a database that existed
// before it (none for a new one): what a command should tell its user it changed.
func (s *Store) Migrated() []string { return s.migrations }

// appliedVersions reads the set of migrations a database has recorded.
func appliedVersions(ctx context.Context, db querier) (map[int]bool, error) {
	rows, err := db.QueryContext(ctx, `SELECT version FROM schema_migrations`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[int]bool{}
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		out[v] = true
	}
	return out, rows.Err()
}
