package store

import (
	"database/sql"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
)

// Set-based statements in a pipelined batch. When a batch holds several writes
// of one kind that a statement can do for many at once (claims on one queue,
// completes), the batch sends that one statement for them all, with the writes'
// arguments as arrays (unnest), as River does: the server plans and runs one
// statement, not one per todo. The statement returns one row per write that it
// changed or refused, led by the write's place in the arrays (1, 2, …), in the
// columns the write's own statement returns; each write reads its row with its
// own read, so each gets its own answer (a lapsed lease or a stale lease_seq is
// that write's conflict, not the batch's). A write without a row reads "no row",
// as it would from its own statement. If the statement fails, the batch runs
// again one write at a time (pipeline.go).

// pgSetWrite is a write's part in a set-based statement.
type pgSetWrite struct {
	kind *pgSetKind
	key  string // writes of one kind with one key in a batch share a statement
	elem []any  // the write's element of each array
}

// pgSetKind is a set-based statement and how to make its arguments from the
// elems of its writes, in order, at the batch's time (unix ms).
type pgSetKind struct {
	query string
	args  func(now int64, elems [][]any) []any
}

// pgUnits splits live into what the batch sends: each write alone, or the writes
// that share a set-based statement together, in the order of their first write.
// Follow-ups (submitThen) come after every other write, so that each runs after
// the write it follows; their statements check that it succeeded (see
// pgClaimAfter), and they share no statement with writes that are not
// follow-ups.
func pgUnits(live []*writeReq) [][]*writeReq {
	var units [][]*writeReq
	at := map[pgSetKey]int{}
	ordered := make([]*writeReq, 0, len(live))
	for _, r := range live {
		if r.lead == nil {
			ordered = append(ordered, r)
		}
	}
	for _, r := range live {
		if r.lead != nil {
			ordered = append(ordered, r)
		}
	}
	for _, r := range ordered {
		set := r.one.set
		if set == nil {
			units = append(units, []*writeReq{r})
			continue
		}
		k := pgSetKey{set.kind, set.key}
		if i, ok := at[k]; ok {
			units[i] = append(units[i], r)
			continue
		}
		at[k] = len(units)
		units = append(units, []*writeReq{r})
	}
	return units
}

type pgSetKey struct {
	kind *pgSetKind
	key  string
}

// queueSet queues unit's set-based statement on b.
func queueSet(b *pgx.Batch, s *Store, unit []*writeReq, now int64) {
	elems := make([][]any, len(unit))
	for i, r := range unit {
		elems[i] = r.one.set.elem
		pgText(elems[i])
	}
	kind := unit[0].one.set.kind
	b.Queue(s.q(kind.query), kind.args(now, elems)...)
}

// readSet reads the rows of unit's set-based statement and answers each write
// through its own read.
func readSet(br pgx.BatchResults, unit []*writeReq) error {
	rows, err := br.Query()
	if err != nil {
		rows.Close()
		return fmt.Errorf("%w: %w", errStatementFailed, err)
	}
	byPlace := make(map[int64]*pgRawRow, len(unit))
	// pgx may reuse the descriptions' memory for a later result.
	fields := slices.Clone(rows.FieldDescriptions())
	for rows.Next() {
		values := rows.RawValues()
		var place int64
		if err := pgx.ScanRow(rows.Conn().TypeMap(), fields[:1], values[:1], &place); err != nil {
			rows.Close()
			return fmt.Errorf("%w: %w", errStatementFailed, err)
		}
		byPlace[place] = rawRow(rows, fields[1:], values[1:])
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("%w: %w", errStatementFailed, err)
	}
	for i, r := range unit {
		var row scanner = errRow{sql.ErrNoRows} // its statement returned no row for it
		if found, ok := byPlace[int64(i+1)]; ok {
			row = found
		}
		readOne(r, row)
	}
	return nil
}

// rawRow copies a row's values (fields from the place on, for a set-based
// statement): the values' buffer is the next row's. The copies share one
// buffer, and the list is made at its length: a todo's row is some 35 values,
// which appended one by one cost a dozen allocations (a third of the bytes a
// drain on PostgreSQL allocated), where these cost two.
func rawRow(rows pgx.Rows, fields []pgconn.FieldDescription, values [][]byte) *pgRawRow {
	size := 0
	for _, v := range values {
		size += len(v)
	}
	buf := make([]byte, 0, size)
	row := &pgRawRow{typeMap: rows.Conn().TypeMap(), fields: fields, values: make([][]byte, len(values))}
	for i, v := range values {
		if v != nil {
			// A full slice expression: a value never runs into the next one.
			start := len(buf)
			buf = append(buf, v...)
			v = buf[start:len(buf):len(buf)]
		}
		row.values[i] = v
	}
	return row
}

// pgRawRow is one row of a pipelined statement (of a set-based statement, after
// its place), scanned as database/sql scans one, which the reads are written
// for: pgx will not put an integer column into a bool.
type pgRawRow struct {
	typeMap *pgtype.Map
	fields  []pgconn.FieldDescription
	values  [][]byte
	err     error // the scan's error
}

func (r *pgRawRow) Scan(dest ...any) error {
	r.err = scanIntBools(dest, r.fields, func(dest ...any) error {
		return pgx.ScanRow(r.typeMap, r.fields, r.values, dest...)
	})
	return r.err
}

// scanIntBools runs scan with each *bool of dest whose column is not a boolean
// (fields) scanned from an integer, as database/sql does and pgx will not.
func scanIntBools(dest []any, fields []pgconn.FieldDescription, scan func(dest ...any) error) error {
	var flags []*bool
	var ints []*int64
	for i, d := range dest {
		if i < len(fields) && fields[i].DataTypeOID == pgtype.BoolOID {
			continue
		}
		if b, ok := d.(*bool); ok {
			n := new(int64)
			flags, ints = append(flags, b), append(ints, n)
			dest[i] = n
		}
	}
	if err := scan(dest...); err != nil {
		return err
	}
	for i, b := range flags {
		*b = *ints[i] != 0
	}
	return nil
}
