package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5"

	"github.com/switchboardhq/switchboard/internal/textcut"
)

// Moving to PostgreSQL: a SQLite database (a backup, or the file itself with
// serve stopped) is copied into an empty PostgreSQL schema, every row of every
// table, in one transaction, so that the schema holds all of it or none.
// The source is first copied (VACUUM INTO, a snapshot) and migrated to this
// binary's schema, which both dialects share column for column
// (TestMigrationsAgree); what differs is read in PostgreSQL's terms (text that
// is not UTF-8, or holds a NUL, as textcut.Valid makes it). Ids stay as they
// were, and each table's id sequence goes on after the largest. Rows that are
// a process's own and not data (the fleet's processes and roles) are not
// copied, and the queue counts are counted again from the todos.

// notCopied are tables whose rows the copy leaves to the target: its schema
// version, the processes and roles of its own serves, the counts it keeps itself
// and the epoch that tells its serves the endpoints changed.
var notCopied = []string{"schema_migrations", "processes", "leaders", "queue_counts", "endpoint_epoch"}

// holdsData are the tables whose rows make a schema one that is in use: the copy
// refuses a target with any.
var holdsData = []string{"humans", "endpoints", "webhooks", "todos", "webhook_events", "oauth_clients", "tool_pins"}

// CopyReport says what CopyToPostgres copied: rows per table, in the order
// copied, and whether any webhook secret is sealed (serve then needs the key
// that sealed it).
type CopyReport struct {
	Tables []CopiedTable
	Sealed bool
}

// CopiedTable is one table's count of rows copied.
type CopiedTable struct {
	Name string
	Rows int64
}

// ErrTargetInUse: the PostgreSQL schema holds Switchboard data already, or a
// serve runs on it.
var ErrTargetInUse = errors.New("the PostgreSQL schema is in use")

// CopyToPostgres copies the SQLite database at src into the PostgreSQL schema
// db names, which must hold no Switchboard data and have no serve running on it
// (ErrTargetInUse). src is checked as restore checks a backup. The snapshot of
// src is made in tmpDir ("" is the system's), and removed.
func CopyToPostgres(ctx context.Context, src, db, tmpDir string) (CopyReport, error) {
	if !IsPostgres(db) {
		return CopyReport{}, fmt.Errorf("store: copy: --db names no PostgreSQL server: %w", ErrInvalid)
	}
	if err := checkBackup(ctx, src); err != nil {
		return CopyReport{}, err
	}
	// Held for the whole copy: a serve on src would commit what the snapshot
	// misses, and that would be lost with the move.
	unlock, err := holdIfServed(src)
	if err != nil {
		return CopyReport{}, err
	}
	defer unlock()
	sweepSnapshots(tmpDir)
	dir, err := os.MkdirTemp(tmpDir, fmt.Sprintf("%s%d-", snapshotPrefix, os.Getpid()))
	if err != nil {
		return CopyReport{}, fmt.Errorf("store: copy: a place for the snapshot of %s: %w", src, err)
	}
	defer os.RemoveAll(dir)
	snap := filepath.Join(dir, "snapshot.db")
	if err := vacuumInto(ctx, src, snap, false); err != nil {
		return CopyReport{}, err
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	migrated, err := Open(ctx, snap, Options{Logger: quiet}) // brings it to this binary's schema
	if err != nil {
		return CopyReport{}, fmt.Errorf("store: copy: bring %s to this version's schema: %w", src, err)
	}
	migrated.Close()
	from, err := openSnapshot(snap)
	if err != nil {
		return CopyReport{}, err
	}
	defer from.Close()
	target, err := Open(ctx, db, Options{}) // makes the tables, under the migration lock
	if err != nil {
		return CopyReport{}, err
	}
	defer target.Close()
	conn, err := pgx.ConnectConfig(ctx, target.pgcfg.Copy())
	if err != nil {
		return CopyReport{}, target.unreachable(err)
	}
	defer conn.Close(context.Background())
	tx, err := conn.Begin(ctx)
	if err != nil {
		return CopyReport{}, fmt.Errorf("store: copy: begin: %w", err)
	}
	defer tx.Rollback(context.Background())
	report, err := copyTables(ctx, from, tx)
	if err != nil {
		return CopyReport{}, err
	}
	if err := tx.Commit(ctx); err != nil {
		return CopyReport{}, fmt.Errorf("store: copy: commit (nothing was copied): %w", err)
	}
	return report, nil
}

// copyTables copies every table of from into tx's schema, once it has checked
// that the schema is free and taken the writers' lock, so that a serve that
// starts meanwhile waits for the copy.
func copyTables(ctx context.Context, from *sql.DB, tx pgx.Tx) (CopyReport, error) {
	if _, err := tx.Exec(ctx, `SELECT `+pgWriterLockCall); err != nil {
		return CopyReport{}, fmt.Errorf("store: copy: take the writers' lock: %w", err)
	}
	if err := targetFree(ctx, tx); err != nil {
		return CopyReport{}, err
	}
	tables, err := tablesInOrder(ctx, tx)
	if err != nil {
		return CopyReport{}, err
	}
	// Emptied children first: what a serve's first start wrote (its audit
	// rows, its settings) gives way to the source's.
	for _, t := range slices.Backward(tables) {
		if _, err := tx.Exec(ctx, `DELETE FROM `+pgx.Identifier{t}.Sanitize()); err != nil {
			return CopyReport{}, fmt.Errorf("store: copy: empty %s: %w", t, err)
		}
	}
	var report CopyReport
	for _, t := range tables {
		n, err := copyTable(ctx, from, tx, t)
		if err != nil {
			return CopyReport{}, err
		}
		report.Tables = append(report.Tables, CopiedTable{t, n})
	}
	if err := afterCopy(ctx, tx, tables); err != nil {
		return CopyReport{}, err
	}
	err = tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM webhooks WHERE starts_with(signing_secret, $1)
		OR starts_with(previous_secret, $1)) OR EXISTS (SELECT 1 FROM settings WHERE name LIKE 'secret:%' AND starts_with(value, $1))`,
		sealedPrefix).Scan(&report.Sealed)
	if err != nil {
		return CopyReport{}, fmt.Errorf("store: copy: look for sealed secrets: %w", err)
	}
	return report, nil
}

// targetFree refuses a schema that holds Switchboard data, or that a serve
// beat on in the last minute.
func targetFree(ctx context.Context, tx pgx.Tx) error {
	var held []string
	for _, t := range holdsData {
		var any bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM `+pgx.Identifier{t}.Sanitize()+`)`).Scan(&any); err != nil {
			return fmt.Errorf("store: copy: read %s: %w", t, err)
		}
		if any {
			held = append(held, t)
		}
	}
	if len(held) > 0 {
		return fmt.Errorf("store: copy: the schema already holds Switchboard data (%s): copy into an empty one: %w",
			strings.Join(held, ", "), ErrTargetInUse)
	}
	var live int
	if err := tx.QueryRow(ctx, pgServingCount).Scan(&live); err != nil {
		return fmt.Errorf("store: copy: read the processes: %w", err)
	}
	if live > 0 {
		return fmt.Errorf("store: copy: a serve runs on this schema (%d process(es) beat in the last minute): stop it first: %w",
			live, ErrTargetInUse)
	}
	return nil
}

// tablesInOrder lists the schema's tables that the copy fills, each after the
// tables its foreign keys name.
func tablesInOrder(ctx context.Context, tx pgx.Tx) ([]string, error) {
	rows, err := tx.Query(ctx, `SELECT c.relname, coalesce(array_agg(p.relname) FILTER (WHERE p.relname IS NOT NULL), '{}')
		FROM pg_class c
		LEFT JOIN pg_constraint k ON k.conrelid = c.oid AND k.contype = 'f'
		LEFT JOIN pg_class p ON p.oid = k.confrelid AND p.oid <> c.oid
		WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r'
		GROUP BY c.relname ORDER BY c.relname`)
	if err != nil {
		return nil, fmt.Errorf("store: copy: list the tables: %w", err)
	}
	parents := map[string][]string{}
	var names []string
	for rows.Next() {
		var name string
		var ps []string
		if err := rows.Scan(&name, &ps); err != nil {
			rows.Close()
			return nil, fmt.Errorf("store: copy: list the tables: %w", err)
		}
		if !slices.Contains(notCopied, name) {
			names, parents[name] = append(names, name), ps
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: copy: list the tables: %w", err)
	}
	var order []string
	for len(order) < len(names) {
		before := len(order)
		for _, n := range names {
			if !slices.Contains(order, n) && !slices.ContainsFunc(parents[n], func(p string) bool {
				return !slices.Contains(order, p) && slices.Contains(names, p)
			}) {
				order = append(order, n)
			}
		}
		if len(order) == before {
			return nil, fmt.Errorf("store: copy: the tables' foreign keys go round in a circle")
		}
	}
	return order, nil
}

// copyTable copies table's rows from the snapshot, column by column as
// PostgreSQL has them, and returns how many.
func copyTable(ctx context.Context, from *sql.DB, tx pgx.Tx, table string) (int64, error) {
	rows, err := tx.Query(ctx, `SELECT column_name, data_type FROM information_schema.columns
		WHERE table_schema = current_schema() AND table_name = $1 ORDER BY ordinal_position`, table)
	if err != nil {
		return 0, fmt.Errorf("store: copy: read %s's columns: %w", table, err)
	}
	var cols, types []string
	for rows.Next() {
		var c, t string
		if err := rows.Scan(&c, &t); err != nil {
			rows.Close()
			return 0, fmt.Errorf("store: copy: read %s's columns: %w", table, err)
		}
		cols, types = append(cols, c), append(types, t)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("store: copy: read %s's columns: %w", table, err)
	}
	quoted := make([]string, len(cols))
	for i, c := range cols {
		quoted[i] = `"` + c + `"`
	}
	src, err := from.QueryContext(ctx, `SELECT `+strings.Join(quoted, ", ")+` FROM "`+table+`"`)
	if err != nil {
		return 0, fmt.Errorf("store: copy: read %s from the SQLite database: %w", table, err)
	}
	defer src.Close()
	values := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range values {
		ptrs[i] = &values[i]
	}
	var convErr error
	n, err := tx.CopyFrom(ctx, pgx.Identifier{table}, cols, pgx.CopyFromFunc(func() ([]any, error) {
		if !src.Next() {
			return nil, src.Err()
		}
		if err := src.Scan(ptrs...); err != nil {
			return nil, err
		}
		row := make([]any, len(cols))
		for i, v := range values {
			if enc, ok := columnEncodings[table+"."+cols[i]]; ok && v != nil {
				v, convErr = enc(textOf(v))
			}
			if convErr == nil {
				row[i], convErr = asPostgres(v, types[i])
			}
			if convErr != nil {
				if id := slices.Index(cols, "id"); id >= 0 {
					return nil, fmt.Errorf("the row of id %v, column %s: %w", values[id], cols[i], convErr)
				}
				return nil, fmt.Errorf("column %s: %w", cols[i], convErr)
			}
		}
		return row, nil
	}))
	if err != nil {
		return 0, fmt.Errorf("store: copy: table %s (nothing was copied): %w", table, err)
	}
	return n, nil
}

// columnEncodings are the text columns that PostgreSQL keeps otherwise than as
// text made valid: a payload keeps every byte (pgPayloadIn); a webhook's
// plaintext secret that is not text cannot be kept, and is refused.
var columnEncodings = map[string]func(string) (any, error){
	"todo_payloads.payload":    func(p string) (any, error) { return pgPayloadIn(p), nil },
	"webhooks.signing_secret":  secretAsIs,
	"webhooks.previous_secret": secretAsIs,
}

// secretAsIs passes a webhook secret that PostgreSQL keeps as it is (sealed, or
// text), and refuses one it would change.
func secretAsIs(secret string) (any, error) {
	if strings.HasPrefix(secret, sealedPrefix) || secretText(secret) {
		return secret, nil
	}
	return nil, fmt.Errorf("a webhook's plaintext signing secret is not UTF-8 text, which PostgreSQL cannot keep " +
		"as it is: rotate that webhook's secret on SQLite first, or seal the secrets with a key (secrets reencrypt)")
}

// textOf is a SQLite text or blob value as a string.
func textOf(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case []byte:
		return string(x)
	}
	return fmt.Sprint(v)
}

// asPostgres is a SQLite value as the PostgreSQL column of type typ takes it.
func asPostgres(v any, typ string) (any, error) {
	if v == nil {
		return nil, nil
	}
	switch typ {
	case "text":
		switch v.(type) {
		case string, []byte:
			return textcut.Valid(textOf(v)), nil
		}
	case "bytea":
		switch x := v.(type) {
		case []byte:
			return x, nil
		case string:
			return []byte(x), nil
		}
	case "bigint":
		if x, ok := v.(int64); ok {
			return x, nil
		}
	case "double precision":
		switch x := v.(type) {
		case float64:
			return x, nil
		case int64:
			return float64(x), nil
		}
	}
	return nil, fmt.Errorf("a %T where PostgreSQL has %s", v, typ)
}

// afterCopy counts the todos per queue and state again, and sets each id
// sequence after the largest id copied.
func afterCopy(ctx context.Context, tx pgx.Tx, tables []string) error {
	if _, err := tx.Exec(ctx, `DELETE FROM queue_counts`); err != nil {
		return fmt.Errorf("store: copy: count the todos: %w", err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO queue_counts (queue, state, n)
		SELECT queue, state, count(*) FROM todos GROUP BY queue, state`); err != nil {
		return fmt.Errorf("store: copy: count the todos: %w", err)
	}
	rows, err := tx.Query(ctx, `SELECT table_name, pg_get_serial_sequence(quote_ident(table_name), column_name)
		FROM information_schema.columns WHERE table_schema = current_schema() AND is_identity = 'YES'`)
	if err != nil {
		return fmt.Errorf("store: copy: find the id sequences: %w", err)
	}
	seqs := map[string]string{}
	for rows.Next() {
		var t, seq string
		if err := rows.Scan(&t, &seq); err != nil {
			rows.Close()
			return fmt.Errorf("store: copy: find the id sequences: %w", err)
		}
		seqs[t] = seq
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("store: copy: find the id sequences: %w", err)
	}
	for _, t := range tables {
		seq, ok := seqs[t]
		if !ok {
			continue
		}
		if _, err := tx.Exec(ctx, `SELECT setval($1, coalesce((SELECT max(id) FROM `+pgx.Identifier{t}.Sanitize()+`), 0) + 1, false)`, seq); err != nil {
			return fmt.Errorf("store: copy: set %s's id sequence: %w", t, err)
		}
	}
	return nil
}

// IsSQLiteFile reports whether path is a SQLite database file (by its header).
func IsSQLiteFile(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	head := make([]byte, 16)
	n, _ := f.Read(head)
	return n == 16 && string(head) == "SQLite format 3\x00"
}

// snapshotPrefix begins the name of a copy's snapshot directory, followed by the
// copying process's id.
const snapshotPrefix = "switchboard-copy-"

// sweepSnapshots removes the snapshot directories in tmpDir that copies left
// when they were killed: those of processes no longer running. A snapshot is a
// whole copy of a database, secrets and all.
func sweepSnapshots(tmpDir string) {
	if tmpDir == "" {
		tmpDir = os.TempDir()
	}
	dirs, _ := filepath.Glob(filepath.Join(tmpDir, snapshotPrefix+"*"))
	for _, d := range dirs {
		pidText, _, _ := strings.Cut(strings.TrimPrefix(filepath.Base(d), snapshotPrefix), "-")
		pid, err := strconv.Atoi(pidText)
		if err != nil || pid <= 0 || processRuns(pid) {
			continue
		}
		os.RemoveAll(d)
	}
}

// processRuns reports whether a process with id pid exists (it may be another
// user's).
func processRuns(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
