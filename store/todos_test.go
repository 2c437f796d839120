package store

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/internal/testkit"
)

// ListTodos filters by each state (written into its SQL as a literal), by an
// unknown one (bound, matching nothing), by queue and by cursor, newest first.
func TestListTodosByState(t *testing.T) {
	s := openTest(t, Options{})
	ctx := context.Background()
	add := func(q string) int64 { return addTodos(t, s, q, 1)[0] }
	claim := func(q string) Ack {
		t.Helper()
		td, ok, err := s.ClaimNext(ctx, "agent:a", []string{q}, time.Minute)
		if err != nil || !ok {
			t.Fatalf("claim in %s: %v %v", q, ok, err)
		}
		return Ack{ID: td.ID, Owner: "agent:a", LeaseSeq: td.LeaseSeq, Queues: []string{q}}
	}
	done, failed, claimed := add("c"), add("f"), add("k")
	if _, err := s.Complete(ctx, claim("c"), "ok"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Fail(ctx, claim("f"), "no", false); err != nil {
		t.Fatal(err)
	}
	claim("k")
	p1, p2, p3 := add("q"), add("r"), add("q")

	for _, c := range []struct {
		f    TodoFilter
		want []int64
	}{
		{TodoFilter{State: StatePending}, []int64{p3, p2, p1}},
		{TodoFilter{State: StatePending, Queues: []string{"q"}}, []int64{p3, p1}},
		{TodoFilter{State: StatePending, Before: p3}, []int64{p2, p1}},
		{TodoFilter{State: StatePending, Limit: 1}, []int64{p3}},
		{TodoFilter{State: StateClaimed}, []int64{claimed}},
		{TodoFilter{State: StateDone}, []int64{done}},
		{TodoFilter{State: StateFailed}, []int64{failed}},
		{TodoFilter{State: StateFailed, Queues: []string{"q", "r"}}, nil},
		{TodoFilter{State: "bogus' OR 1=1 --"}, nil},
		{TodoFilter{}, []int64{p3, p2, p1, claimed, failed, done}},
	} {
		got, err := s.ListTodos(ctx, c.f)
		if err != nil {
			t.Fatalf("%+v: %v", c.f, err)
		}
		var ids []int64
		for _, td := range got {
			if c.f.State != "" && td.State != c.f.State {
				t.Errorf("%+v: listed todo %d in state %s", c.f, td.ID, td.State)
			}
			ids = append(ids, td.ID)
		}
		if !slices.Equal(ids, c.want) {
			t.Errorf("%+v: listed %v, want %v", c.f, ids, c.want)
		}
	}
}

// One queue's pending todos are listed from the claim index, newest first without
// a sort: not by walking every pending todo of every queue, nor every todo of the
// queue (a board filtered to a quiet queue beside a deep one).
func TestListingOneQueuesPendingReadsTheClaimIndex(t *testing.T) {
	testkit.SQLiteOnly(t, "SQLite's query plans and INDEXED BY")
	s := openTest(t, Options{})
	ctx := context.Background()
	// ANALYZE's statistics for a deep queue and a quiet one, as a busy database has
	// them, are what led SQLite to another index.
	err := s.exclusive(ctx, func(c *sql.Conn) error {
		_, err := c.ExecContext(ctx, `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < 4000)
			INSERT INTO todos (queue, state, payload_size, created_by, available_at, created_at, updated_at)
			SELECT iif(i % 100 = 0, 'quiet', 'deep'), iif(i % 100 = 0, 'done', 'pending'), 0, 'x', 0, 0, 0 FROM n`)
		if err == nil {
			_, err = c.ExecContext(ctx, `ANALYZE`)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	q, args := todoListQuery(TodoFilter{State: StatePending, Queues: []string{"quiet"}, Limit: 51}, false)
	if plan := queryPlan(t, s, q, args...); len(plan) != 1 || !strings.Contains(plan[0], "USING INDEX todos_claimable (queue=?)") {
		t.Fatalf("plan %q, want one search of todos_claimable by queue", plan)
	}
}

// queryPlan returns the lines of SQLite's plan for q.
func queryPlan(t *testing.T, s *Store, q string, args ...any) []string {
	t.Helper()
	rows, err := s.rdb.QueryContext(context.Background(), "EXPLAIN QUERY PLAN "+q, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, notused int
		var detail string
		if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return plan
}

// Every dead letter is audited as todo.dead_letter, an agent's (fail without a
// retry, with its error) as the reaper's: one action finds them all.
func TestDeadLettersAreAuditedAsSuch(t *testing.T) {
	s := openTest(t, Options{})
	ctx := context.Background()
	ids := addTodos(t, s, "inbox", 2)
	for i, retry := range []bool{true, false} {
		td, err := s.Claim(ctx, Ack{ID: ids[i], Owner: "agent:a"}, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Fail(ctx, Ack{ID: td.ID, Owner: "agent:a", LeaseSeq: td.LeaseSeq}, fmt.Sprintf("error %d", i), retry); err != nil {
			t.Fatal(err)
		}
	}
	if said := auditDetails(t, s, "todo.dead_letter"); len(said) != 1 || said[0] != "error 1" {
		t.Fatalf("dead letters audited: %q", said)
	}
	if said := auditDetails(t, s, "todo.fail"); len(said) != 1 || said[0] != "error 0" {
		t.Fatalf("retried failures audited: %q", said)
	}
}

func TestClaimsByOwner(t *testing.T) {
	s := openTest(t, Options{})
	ctx := context.Background()
	ids := addTodos(t, s, "inbox", 4)
	var last Todo
	for i, owner := range []string{"agent:a", "agent:a", "agent:b"} {
		var err error
		if last, err = s.Claim(ctx, Ack{ID: ids[i], Owner: owner}, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Complete(ctx, Ack{ID: ids[2], Owner: "agent:b", LeaseSeq: last.LeaseSeq}, ""); err != nil {
		t.Fatal(err)
	}
	got, err := s.ClaimsByOwner(ctx)
	if err != nil || len(got) != 1 || got["agent:a"] != 2 {
		t.Fatalf("claims by owner: %v %v, want agent:a holding 2", got, err)
	}
}

// A queue's head is the todo claim_next takes next: the oldest claimable one, past
// any that back off; a queue whose pending todos all back off has none.
func TestQueueHeads(t *testing.T) {
	ctx := context.Background()
	start := time.UnixMilli(1_800_000_000_000)
	var clock atomic.Int64
	clock.Store(start.UnixMilli())
	s := openTest(t, Options{Now: func() time.Time { return time.UnixMilli(clock.Load()) }})
	add := func(queue string) Todo {
		t.Helper()
		td, err := s.AddTodo(ctx, NewTodo{Queue: queue, Payload: "p"})
		if err != nil {
			t.Fatal(err)
		}
		return td
	}
	backOff := func(td Todo) {
		t.Helper()
		c, err := s.Claim(ctx, Ack{ID: td.ID, Owner: "agent:a"}, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Fail(ctx, Ack{ID: td.ID, Owner: "agent:a", LeaseSeq: c.LeaseSeq}, "flaky", true); err != nil {
			t.Fatal(err)
		}
	}
	a1 := add("a")
	add("a")
	backOff(add("b"))
	c1 := add("c")
	clock.Add(1000)
	c2 := add("c")
	backOff(c1)

	heads, err := s.QueueHeads(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []QueueHead{{Queue: "a", TodoID: a1.ID, Since: start}, {Queue: "c", TodoID: c2.ID, Since: start.Add(time.Second)}}
	if !slices.EqualFunc(heads, want, func(x, y QueueHead) bool {
		return x.Queue == y.Queue && x.TodoID == y.TodoID && x.Since.Equal(y.Since)
	}) {
		t.Fatalf("heads %+v, want %+v", heads, want)
	}
}

// What a write answers carries its times as a later read of the row does: to
// the millisecond, as they are stored (todo add --json printed nanoseconds).
func TestWrittenTimesMatchTheStoredOnes(t *testing.T) {
	s := openTest(t, Options{Now: func() time.Time { return time.Unix(1_800_000_000, 123_456_789) }})
	ctx := context.Background()
	added, err := s.AddTodo(ctx, NewTodo{Queue: "q", Payload: "x"})
	if err != nil {
		t.Fatal(err)
	}
	read, err := s.Todo(ctx, added.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !added.CreatedAt.Equal(read.CreatedAt) || added.CreatedAt.Nanosecond() != 123_000_000 {
		t.Fatalf("added at %v, read back as %v", added.CreatedAt, read.CreatedAt)
	}
}
