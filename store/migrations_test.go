package store

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/switchboardhq/switchboard/internal/testkit"
)

// The two dialects' migrations are written twice, by hand; this keeps them in step.
// A migration number must exist for both or neither, and after all of them the two
// databases must hold the same tables, columns (nullability included), indexes on
// the same columns, and the same primary, unique and foreign keys. Column types may
// differ only by the mapping in pgTypeFor; defaults, CHECKs and index predicates are
// spelt differently in the two dialects and are compared by hand in review. A
// foreign key names its referenced columns (REFERENCES t(id)) in both.

// pgTypeFor maps a SQLite declared type to the PostgreSQL type its twin must have.
var pgTypeFor = map[string]string{
	"INTEGER": "bigint",
	"TEXT":    "text",
	"BLOB":    "bytea",
	"REAL":    "double precision",
}

func TestMigrationsInStep(t *testing.T) {
	lite, err := migrationsOf("sqlite")
	if err != nil {
		t.Fatal(err)
	}
	pg, err := migrationsOf("postgres")
	if err != nil {
		t.Fatal(err)
	}
	if missing := migrationsNotIn(lite, pg); len(missing) > 0 {
		t.Errorf("migrations/postgres lacks a twin of %s", strings.Join(missing, ", "))
	}
	if missing := migrationsNotIn(pg, lite); len(missing) > 0 {
		t.Errorf("migrations/sqlite lacks a twin of %s", strings.Join(missing, ", "))
	}
	if t.Failed() {
		return
	}

	pgURL := testkit.PostgresURL(t)
	want := schemaAfterMigrations(t, filepath.Join(t.TempDir(), "sb.db"), describeSQLite)
	got := schemaAfterMigrations(t, pgURL, describePostgres)
	for _, line := range diffLines(want, got) {
		t.Error(line)
	}
}

// migrationsNotIn names the migrations of a whose number (and name) b lacks.
func migrationsNotIn(a, b []migration) []string {
	var missing []string
	for _, m := range a {
		if !slices.ContainsFunc(b, func(o migration) bool { return o.version == m.version && o.name == m.name }) {
			missing = append(missing, m.name)
		}
	}
	return missing
}

// schemaAfterMigrations opens (and so migrates) a fresh database and describes it.
func schemaAfterMigrations(t *testing.T, db string, describe func(context.Context, querier) ([]string, error)) []string {
	t.Helper()
	s := openAt(t, db)
	lines, err := describe(context.Background(), s.rdb)
	if err != nil {
		t.Fatalf("describe %s: %v", Redacted(db), err)
	}
	if len(lines) == 0 {
		t.Fatalf("describe %s: no tables", Redacted(db))
	}
	slices.Sort(lines)
	return lines
}

func openAt(t *testing.T, db string) *Store {
	t.Helper()
	s, err := Open(context.Background(), db, Options{})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// diffLines says what one schema has that the other lacks, line by line.
func diffLines(sqlite, postgres []string) []string {
	var out []string
	for _, l := range sqlite {
		if !slices.Contains(postgres, l) {
			out = append(out, "only on SQLite:     "+l)
		}
	}
	for _, l := range postgres {
		if !slices.Contains(sqlite, l) {
			out = append(out, "only on PostgreSQL: "+l)
		}
	}
	return out
}

// A schema is described as sorted lines, one per fact, the same on both dialects:
//
//	column todos.queue text not null
//	index todos.todos_claimable (queue,id,available_at) partial
//	primary key todos (id)
//	unique humans (username)
//	foreign key endpoints (owner_human_id) -> humans (id)

// describeSQLite reads the schema through SQLite's table-valued pragmas.
func describeSQLite(ctx context.Context, q querier) ([]string, error) {
	tables, err := strings1(ctx, q, `SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'`)
	if err != nil {
		return nil, err
	}
	var lines []string
	for _, table := range tables {
		more, err := describeSQLiteTable(ctx, q, table)
		if err != nil {
			return nil, fmt.Errorf("table %s: %w", table, err)
		}
		lines = append(lines, more...)
	}
	return lines, nil
}

func describeSQLiteTable(ctx context.Context, q querier, table string) ([]string, error) {
	var lines []string
	var pk []string
	err := eachRow(ctx, q, `SELECT name, upper(type), "notnull", pk FROM pragma_table_info(?) ORDER BY pk, cid`,
		[]any{table}, func(scan func(...any) error) error {
			var col, typ string
			var notNull bool
			var pkAt int
			if err := scan(&col, &typ, &notNull, &pkAt); err != nil {
				return err
			}
			if pg, ok := pgTypeFor[typ]; ok {
				typ = pg
			}
			if pkAt > 0 {
				pk = append(pk, col)
			}
			lines = append(lines, columnLine(table, col, typ, notNull || pkAt > 0))
			return nil
		})
	if err != nil {
		return nil, err
	}
	if len(pk) > 0 {
		lines = append(lines, fmt.Sprintf("primary key %s (%s)", table, strings.Join(pk, ",")))
	}
	type index struct {
		name, origin   string
		unique, partly bool
	}
	var indexes []index
	err = eachRow(ctx, q, `SELECT name, "unique", origin, partial FROM pragma_index_list(?)`,
		[]any{table}, func(scan func(...any) error) error {
			var ix index
			if err := scan(&ix.name, &ix.unique, &ix.origin, &ix.partly); err != nil {
				return err
			}
			indexes = append(indexes, ix)
			return nil
		})
	if err != nil {
		return nil, err
	}
	for _, ix := range indexes {
		// An expression's column is NULL in index_info; it reads "<expr>" on both sides.
		cols, err := strings1(ctx, q, `SELECT coalesce(name, '<expr>') FROM pragma_index_info(?) ORDER BY seqno`, ix.name)
		if err != nil {
			return nil, err
		}
		switch ix.origin {
		case "pk": // described by the primary key line
		case "u":
			lines = append(lines, fmt.Sprintf("unique %s (%s)", table, strings.Join(cols, ",")))
		default:
			lines = append(lines, indexLine(table, ix.name, cols, ix.unique, ix.partly))
		}
	}
	fks, err := describeSQLiteForeignKeys(ctx, q, table)
	return append(lines, fks...), err
}

// describeSQLiteForeignKeys: one line per foreign key, its columns in order.
func describeSQLiteForeignKeys(ctx context.Context, q querier, table string) ([]string, error) {
	type fk struct{ ref, from, to []string }
	keys := map[int]*fk{}
	var order []int
	err := eachRow(ctx, q, `SELECT id, "table", "from", coalesce("to", '') FROM pragma_foreign_key_list(?) ORDER BY id, seq`,
		[]any{table}, func(scan func(...any) error) error {
			var id int
			var ref, from, to string
			if err := scan(&id, &ref, &from, &to); err != nil {
				return err
			}
			k := keys[id]
			if k == nil {
				k = &fk{ref: []string{ref}}
				keys[id] = k
				order = append(order, id)
			}
			k.from = append(k.from, from)
			k.to = append(k.to, to)
			return nil
		})
	var lines []string
	for _, id := range order {
		k := keys[id]
		lines = append(lines, foreignKeyLine(table, k.from, k.ref[0], k.to))
	}
	return lines, err
}

// describePostgres reads the same facts from PostgreSQL's catalogs, for the
// current schema (the test's own).
func describePostgres(ctx context.Context, q querier) ([]string, error) {
	var lines []string
	err := eachRow(ctx, q, `SELECT table_name, column_name, data_type, is_nullable = 'NO'
		FROM information_schema.columns c
		WHERE table_schema = current_schema()
		  AND EXISTS (SELECT 1 FROM information_schema.tables t WHERE t.table_schema = c.table_schema
		              AND t.table_name = c.table_name AND t.table_type = 'BASE TABLE')`,
		nil, func(scan func(...any) error) error {
			var table, col, typ string
			var notNull bool
			if err := scan(&table, &col, &typ, &notNull); err != nil {
				return err
			}
			lines = append(lines, columnLine(table, col, typ, notNull))
			return nil
		})
	if err != nil {
		return nil, err
	}
	// Indexes that no constraint owns, with their key columns in order (0 is an expression).
	err = eachRow(ctx, q, `SELECT t.relname, i.relname, x.indisunique, x.indpred IS NOT NULL,
			array_to_string(ARRAY(SELECT coalesce(a.attname, '<expr>')
				FROM unnest(x.indkey::int2[]) WITH ORDINALITY AS k(attnum, n)
				LEFT JOIN pg_attribute a ON a.attrelid = x.indrelid AND a.attnum = k.attnum
				ORDER BY k.n), ',')
		FROM pg_index x
		JOIN pg_class i ON i.oid = x.indexrelid
		JOIN pg_class t ON t.oid = x.indrelid
		WHERE t.relnamespace = current_schema()::regnamespace
		  AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = x.indexrelid)`,
		nil, func(scan func(...any) error) error {
			var table, name, cols string
			var unique, partly bool
			if err := scan(&table, &name, &unique, &partly, &cols); err != nil {
				return err
			}
			lines = append(lines, indexLine(table, name, strings.Split(cols, ","), unique, partly))
			return nil
		})
	if err != nil {
		return nil, err
	}
	more, err := describePostgresConstraints(ctx, q)
	return append(lines, more...), err
}

// describePostgresConstraints: primary, unique and foreign keys, columns in order.
func describePostgresConstraints(ctx context.Context, q querier) ([]string, error) {
	var lines []string
	err := eachRow(ctx, q, `SELECT c.contype::text, t.relname, coalesce(r.relname, ''),
			array_to_string(ARRAY(SELECT a.attname FROM unnest(c.conkey) WITH ORDINALITY AS k(attnum, n)
				JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.attnum ORDER BY k.n), ','),
			array_to_string(ARRAY(SELECT a.attname FROM unnest(c.confkey) WITH ORDINALITY AS k(attnum, n)
				JOIN pg_attribute a ON a.attrelid = c.confrelid AND a.attnum = k.attnum ORDER BY k.n), ',')
		FROM pg_constraint c
		JOIN pg_class t ON t.oid = c.conrelid
		LEFT JOIN pg_class r ON r.oid = c.confrelid
		WHERE t.relnamespace = current_schema()::regnamespace AND c.contype IN ('p', 'u', 'f')`,
		nil, func(scan func(...any) error) error {
			var kind, table, ref, cols, refCols string
			if err := scan(&kind, &table, &ref, &cols, &refCols); err != nil {
				return err
			}
			switch kind {
			case "p":
				lines = append(lines, fmt.Sprintf("primary key %s (%s)", table, cols))
			case "u":
				lines = append(lines, fmt.Sprintf("unique %s (%s)", table, cols))
			case "f":
				lines = append(lines, foreignKeyLine(table, strings.Split(cols, ","), ref, strings.Split(refCols, ",")))
			}
			return nil
		})
	return lines, err
}

func columnLine(table, col, typ string, notNull bool) string {
	line := fmt.Sprintf("column %s.%s %s", table, col, strings.ToLower(typ))
	if notNull {
		line += " not null"
	}
	return line
}

func indexLine(table, name string, cols []string, unique, partial bool) string {
	line := fmt.Sprintf("index %s.%s (%s)", table, name, strings.Join(cols, ","))
	if unique {
		line += " unique"
	}
	if partial {
		line += " partial"
	}
	return line
}

func foreignKeyLine(table string, cols []string, ref string, refCols []string) string {
	return fmt.Sprintf("foreign key %s (%s) -> %s (%s)", table, strings.Join(cols, ","), ref, strings.Join(refCols, ","))
}

// eachRow runs query and hands each row's Scan to row.
func eachRow(ctx context.Context, q querier, query string, args []any, row func(scan func(...any) error) error) error {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := row(rows.Scan); err != nil {
			return err
		}
	}
	return rows.Err()
}

// strings1 is a one-column query's values.
func strings1(ctx context.Context, q querier, query string, args ...any) ([]string, error) {
	var out []string
	err := eachRow(ctx, q, query, args, func(scan func(...any) error) error {
		var v string
		err := scan(&v)
		out = append(out, v)
		return err
	})
	return out, err
}
