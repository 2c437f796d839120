package store

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
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

// migrations lists the embedded migrations in order. Names are NNNN_what.sql.
func migrations() ([]migration, error) {
	entries, err := fs.ReadDir(migrationFS, "migrations")
	if err != nil {
		return nil, fmt.Errorf("store: read migrations: %w", err)
	}
	var list []migration
	for _, e := range entries {
		num, _, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("store: migration %q is not named NNNN_name.sql", e.Name())
		}
		body, err := migrationFS.ReadFile("migrations/" + e.Name())
		if err != nil {
			return nil, fmt.Errorf("store: read migration %s: %w", e.Name(), err)
		}
		list = append(list, migration{version: v, name: e.Name(), sql: string(body)})
	}
	sort.Slice(list, func(i, j int) bool { return list[i].version < list[j].version })
	for i := range list {
		if list[i].version != i+1 {
			return nil, fmt.Errorf("store: migrations must be numbered 1..n without gaps; %s is out of place", list[i].name)
		}
	}
	return list, nil
}

// SchemaVersion is the newest migration this binary knows.
func SchemaVersion() int {
	list, err := migrations()
	if err != nil {
		return 0
	}
	return len(list)
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
	var newest int
	if err := db.QueryRowContext(ctx, `SELECT coalesce(max(version), 0) FROM schema_migrations`).Scan(&newest); err != nil {
		return fmt.Errorf("store: read schema version of %s: %w", path, err)
	}
	if known := SchemaVersion(); newest > known {
		return fmt.Errorf("store: %s: %w (database is at version %d, this binary knows %d; upgrade Switchboard)",
			path, ErrSchemaTooNew, newest, known)
	}
	return nil
}

// checkSchema is checkVersion on the open read pool, for read-only opens, which also
// require the schema to be complete.
func (s *Store) checkSchema(ctx context.Context) error {
	if err := checkVersion(ctx, s.rdb, s.path); err != nil {
		return err
	}
	var newest int
	if err := s.rdb.QueryRowContext(ctx, `SELECT coalesce(max(version), 0) FROM schema_migrations`).Scan(&newest); err != nil {
		return fmt.Errorf("store: %s: %w", s.path, ErrNotSwitchboard)
	}
	if newest < SchemaVersion() {
		return fmt.Errorf("store: %s is at schema %d, this binary needs %d: run serve once to migrate", s.path, newest, SchemaVersion())
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
	var current int
	if err := s.wdb.QueryRowContext(ctx, `SELECT coalesce(max(version), 0) FROM schema_migrations`).Scan(&current); err != nil {
		return fmt.Errorf("store: read schema version: %w", err)
	}
	for _, m := range list[current:] {
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
	}
	return nil
}
