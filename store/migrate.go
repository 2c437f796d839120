package store

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

type migration struct {
	version int
	name    string
	sql     string
}

// migrations lists the embedded migrations in order. Names are NNNN_what.sql; each
// number is used once. Numbers may have gaps: a database records which migrations it
// has, and any it lacks are applied in order.
func migrations() ([]migration, error) {
	entries, err := fs.ReadDir(migrationFS, "migrations")
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
		body, err := migrationFS.ReadFile("migrations/" + e.Name())
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
	return checkVersion(ctx, db, path)
}

// checkVersion verifies the schema recorded in db against this binary's migrations.
func checkVersion(ctx context.Context, db *sql.DB, path string) error {
	var tables, hasMigrations int
	err := db.QueryRowContext(ctx, `SELECT count(*), count(*) FILTER (WHERE name = 'schema_migrations')
		FROM sqlite_master WHERE type = 'table'`).Scan(&tables, &hasMigrations)
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
	if err := checkVersion(ctx, s.rdb, s.path); err != nil {
		return err
	}
	applied, err := appliedVersions(ctx, s.rdb)
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

// migrate applies, in order, each embedded migration the database has not recorded,
// each in its own transaction together with its schema_migrations row.
func (s *Store) migrate(ctx context.Context) error {
	list, err := migrations()
	if err != nil {
		return err
	}
	if _, err := s.wdb.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER PRIMARY KEY,
		name       TEXT    NOT NULL,
		applied_at INTEGER NOT NULL
	) STRICT`); err != nil {
		return fmt.Errorf("store: create schema_migrations in %s: %w", s.path, err)
	}
	if err := checkVersion(ctx, s.wdb, s.path); err != nil {
		return err
	}
	applied, err := appliedVersions(ctx, s.wdb)
	if err != nil {
		return fmt.Errorf("store: read schema version: %w", err)
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
	if s.opts.MigrateUnservedOnly {
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
		if err := checkVersion(ctx, s.wdb, s.path); err != nil {
			return err
		}
		if applied, err = appliedVersions(ctx, s.wdb); err != nil {
			return fmt.Errorf("store: read schema version: %w", err)
		}
		pending = slices.DeleteFunc(pending, func(m migration) bool { return applied[m.version] })
	}
	existed := len(applied) > 0
	for _, m := range pending {
		tx, err := s.wdb.BeginTx(ctx, nil)
		if err != nil {
			return fmt.Errorf("store: migration %s: %w", m.name, err)
		}
		if _, err := tx.ExecContext(ctx, m.sql); err != nil {
			tx.Rollback()
			return fmt.Errorf("store: migration %s: %w", m.name, err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`,
			m.version, m.name, s.now().UnixMilli()); err != nil {
			tx.Rollback()
			return fmt.Errorf("store: record migration %s: %w", m.name, err)
		}
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("store: commit migration %s: %w", m.name, err)
		}
		s.log.Info("applied migration", "name", m.name)
		if existed {
			s.migrations = append(s.migrations, m.name)
		}
	}
	return nil
}

// Migrated names the migrations this Open applied to a database that existed
// before it (none for a new one): what a command should tell its user it changed.
func (s *Store) Migrated() []string { return s.migrations }

// appliedVersions reads the set of migrations a database has recorded.
func appliedVersions(ctx context.Context, db *sql.DB) (map[int]bool, error) {
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
