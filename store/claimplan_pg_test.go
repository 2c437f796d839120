package store

import (
	"context"
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/internal/testkit"
)

// On a queue filled faster than PostgreSQL's statistics follow (a burst of adds,
// the table not analysed since), the one-statement claim still finds a worker's
// reserved todo through todos_reserved, not by reading every pending todo of the
// queue on each claim.
func TestClaimFindsReservationsByTheirIndex(t *testing.T) {
	s := pgSeeded(t, "bench", 5000)
	ctx := context.Background()
	at := ms(s.now())
	text, err := planText(s.rdb.QueryContext(ctx, "EXPLAIN "+s.q(pgClaimGated), pgClaimGatedArgs("bench", "agent:a", time.Minute, 0, 0, at)...))
	if err != nil {
		t.Fatal(err)
	}
	start, end := strings.Index(text, "CTE mine"), strings.Index(text, "CTE head")
	if start < 0 || end < start {
		t.Fatalf("no CTE mine before CTE head in the plan:\n%s", text)
	}
	if mine := text[start:end]; !strings.Contains(mine, "todos_reserved") || strings.Contains(mine, "todos_claimable") {
		t.Fatalf("the reservation lookup does not go by todos_reserved alone:\n%s", mine)
	}
}

// planText reads the rows of an EXPLAIN as its text, a line each.
func planText(rows *sql.Rows, err error) (string, error) {
	if err != nil {
		return "", err
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			return "", err
		}
		plan = append(plan, line)
	}
	return strings.Join(plan, "\n"), rows.Err()
}

// pgStore opens a store on a new PostgreSQL schema.
func pgStore(t *testing.T) *Store {
	t.Helper()
	return pgProcesses(t, testkit.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)))[0]
}

// pgSeeded is pgStore with queue filled with n pending todos (SeedTodosForBench).
func pgSeeded(t *testing.T, queue string, n int) *Store {
	t.Helper()
	s := pgStore(t)
	if err := s.SeedTodosForBench(context.Background(), queue, n, "x"); err != nil {
		t.Fatal(err)
	}
	return s
}
