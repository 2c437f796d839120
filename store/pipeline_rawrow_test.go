package store

import (
	"context"
	"database/sql"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/switchboardhq/switchboard/internal/testkit"
)

// A pipelined row's copy (rawRow) keeps each value as it was after pgx has
// read the rows that follow it into the same buffer: NULL stays NULL, an empty
// text stays empty, and no value runs into the next, however the copies share
// their memory.
func TestRawRowKeepsEachValueAfterTheNextRows(t *testing.T) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, testkit.PostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT 'a' || n, NULL::text, '', repeat('x', n), n
		FROM generate_series(1, 3) AS n ORDER BY n`)
	if err != nil {
		t.Fatal(err)
	}
	var copies []*pgRawRow
	for rows.Next() {
		copies = append(copies, rawRow(rows, rows.FieldDescriptions(), rows.RawValues()))
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(copies) != 3 {
		t.Fatalf("%d rows copied, want 3", len(copies))
	}
	for i, row := range copies {
		n := i + 1
		var first, rep string
		var null, empty sql.NullString
		var num int64
		if err := row.Scan(&first, &null, &empty, &rep, &num); err != nil {
			t.Fatalf("row %d: %v", n, err)
		}
		wantRep := ""
		for range n {
			wantRep += "x"
		}
		if first != "a"+string(rune('0'+n)) || null.Valid || !empty.Valid || empty.String != "" || rep != wantRep || num != int64(n) {
			t.Errorf("row %d scanned as (%q, %v, %v, %q, %d)", n, first, null, empty, rep, num)
		}
		// Appending to one value does not write over the next.
		_ = append(row.values[0], 'z', 'z', 'z', 'z')
		if err := row.Scan(&first, &null, &empty, &rep, &num); err != nil || null.Valid || empty.String != "" || rep != wantRep {
			t.Errorf("row %d after an append to its first value: (%q, %v, %v, %q, %v)", n, first, null, empty, rep, err)
		}
	}
}
