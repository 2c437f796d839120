package store

import (
	"context"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// RetryFailed puts a queue's dead letters back in chunks, each audited and rung
// as a retry, and leaves alone those that failed after it was called, other
// queues' and other states'.
func TestRetryFailedPutsEveryDeadLetterBack(t *testing.T) {
	ctx := context.Background()
	start := time.UnixMilli(1_800_000_000_000)
	var clock atomic.Int64
	clock.Store(start.UnixMilli())
	s := openTest(t, Options{Now: func() time.Time { return time.UnixMilli(clock.Load()) }})
	now := start
	var mu sync.Mutex
	rung := map[string]int{}
	s.OnTodoChange(func(c TodoChange) {
		if c.Claimable {
			mu.Lock()
			rung[c.Cause+":"+c.Queue]++
			mu.Unlock()
		}
	})
	seed := func(queue, state string, n int, updated time.Time) {
		t.Helper()
		err := s.write(ctx, func(w *wtx) error {
			for range n {
				if _, err := w.exec(`INSERT INTO todos (queue, state, payload_size, created_by, attempts, max_attempts,
						available_at, last_error, created_at, updated_at, finished_at)
					VALUES (?, ?, 0, 'test', 5, 5, ?, 'boom', ?, ?, ?)`,
					queue, state, ms(updated), ms(updated), ms(updated), ms(updated)); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	seed("a", StateFailed, 2*retryChunk+50, now.Add(-time.Hour))
	seed("a", StatePending, 2, now.Add(-time.Hour))
	seed("a", StateDone, 1, now.Add(-time.Hour))
	seed("b", StateFailed, 3, now.Add(-time.Hour))
	// Failed while the retry runs: its last change is after the call's start.
	seed("a", StateFailed, 1, now.Add(time.Second))

	n, err := s.RetryFailed(ctx, Failed{Queue: "a"}, "human:1")
	if err != nil {
		t.Fatal(err)
	}
	if n != 2*retryChunk+50 {
		t.Fatalf("retried %d on a, want %d", n, 2*retryChunk+50)
	}
	counts := func() map[string]int {
		got := map[string]int{}
		rows, err := s.rdb.Query(`SELECT queue || ':' || state, count(*) FROM todos GROUP BY 1`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var k string
			var c int
			if err := rows.Scan(&k, &c); err != nil {
				t.Fatal(err)
			}
			got[k] = c
		}
		return got
	}
	want := map[string]int{"a:pending": 2*retryChunk + 52, "a:failed": 1, "a:done": 1, "b:failed": 3}
	if got := counts(); !maps.Equal(got, want) {
		t.Fatalf("after retrying a: %v, want %v", got, want)
	}
	var retried, attempts int // attempts: retried todos with their attempts reset
	if err := s.rdb.QueryRow(`SELECT count(*) FROM audit WHERE action = 'todo.retry' AND actor = 'human:1'
		AND detail = 'every failed todo on a'`).Scan(&retried); err != nil {
		t.Fatal(err)
	}
	if err := s.rdb.QueryRow(s.q(`SELECT count(*) FROM todos WHERE queue = 'a' AND state = 'pending' AND attempts = 0
		AND available_at <= ? AND finished_at IS NULL`), ms(now)).Scan(&attempts); err != nil {
		t.Fatal(err)
	}
	if retried != n || attempts != n {
		t.Fatalf("%d audit rows and %d claimable todos with no attempts for %d retried", retried, attempts, n)
	}
	mu.Lock()
	if rung["retry:a"] != n || len(rung) != 1 {
		t.Fatalf("rang %v, want %d retries on a", rung, n)
	}
	mu.Unlock()

	// Later, every queue: b's and the one that failed during the first call.
	clock.Add(time.Minute.Milliseconds())
	if n, err := s.RetryFailed(ctx, Failed{}, "human:1"); err != nil || n != 4 {
		t.Fatalf("retried %d (%v) on every queue, want 4", n, err)
	}
	want = map[string]int{"a:pending": 2*retryChunk + 53, "a:done": 1, "b:pending": 3}
	if got := counts(); !maps.Equal(got, want) {
		t.Fatalf("after retrying every queue: %v, want %v", got, want)
	}
	if n, err := s.RetryFailed(ctx, Failed{}, "human:1"); err != nil || n != 0 {
		t.Fatalf("retried %d (%v) with no dead letters left", n, err)
	}
}

// Dead letters grouped by their last error, the most common first; retrying one
// group leaves the others failed.
func TestFailedErrorsAndRetryByError(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, Options{})
	fail := func(queue, msg string) {
		t.Helper()
		td, err := s.AddTodo(ctx, NewTodo{Queue: queue, Payload: "p", MaxAttempts: 1})
		if err == nil {
			td, err = s.Claim(ctx, Ack{ID: td.ID, Owner: "agent:a"}, time.Minute)
		}
		if err == nil {
			_, err = s.Fail(ctx, Ack{ID: td.ID, Owner: "agent:a", LeaseSeq: td.LeaseSeq}, msg, true)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		fail("a", "HTTP 500 from api.example.com")
	}
	fail("a", "timeout")
	fail("b", "HTTP 500 from api.example.com")
	fail("c", "timeout")
	// a holds fewer todos than there are dead letters: its groups are read by
	// queue, past its pending todo.
	if _, err := s.AddTodo(ctx, NewTodo{Queue: "a", Payload: "p"}); err != nil {
		t.Fatal(err)
	}
	groups, err := s.FailedErrors(ctx, "a", 5)
	if err != nil {
		t.Fatal(err)
	}
	if len(groups) != 2 || groups[0].Error != "HTTP 500 from api.example.com" || groups[0].Count != 3 ||
		groups[1].Error != "timeout" || groups[1].Count != 1 || groups[0].Newest.IsZero() {
		t.Fatalf("groups on a: %+v", groups)
	}
	// b holds more todos than there are dead letters: its groups are read by state.
	for range 6 {
		if _, err := s.AddTodo(ctx, NewTodo{Queue: "b", Payload: "p"}); err != nil {
			t.Fatal(err)
		}
	}
	if bs, err := s.FailedErrors(ctx, "b", 5); err != nil || len(bs) != 1 || bs[0].Error != "HTTP 500 from api.example.com" || bs[0].Count != 1 {
		t.Fatalf("groups on b: %+v %v", bs, err)
	}
	if all, err := s.FailedErrors(ctx, "", 1); err != nil || len(all) != 1 || all[0].Count != 4 || all[0].Error != "HTTP 500 from api.example.com" {
		t.Fatalf("the top group on every queue: %+v %v", all, err)
	}
	msg := "HTTP 500 from api.example.com"
	if n, err := s.RetryFailed(ctx, Failed{Queue: "a", Error: &msg}, "human:1"); err != nil || n != 3 {
		t.Fatalf("retried %d (%v) with the HTTP 500 on a, want 3", n, err)
	}
	groups, err = s.FailedErrors(ctx, "", 5)
	if err != nil {
		t.Fatal(err)
	}
	if len(groups) != 2 || groups[0].Error != "timeout" || groups[0].Count != 2 || groups[1].Count != 1 {
		t.Fatalf("left failed: %+v, want a's and c's timeout and b's HTTP 500", groups)
	}
	var detail string
	if err := s.rdb.QueryRow(`SELECT detail FROM audit WHERE action = 'todo.retry' ORDER BY id DESC LIMIT 1`).Scan(&detail); err != nil {
		t.Fatal(err)
	}
	if detail != `every failed todo on a with error "HTTP 500 from api.example.com"` {
		t.Fatalf("audit detail %q", detail)
	}
}

// The Failed tab's listing by failure time: newest failure first, whatever the
// ids, paged by (failure time, id) so that todos failing in the same millisecond
// are neither skipped nor repeated; by one queue, and by one error. Each is one
// walk of an index, with no sort.
func TestFailedTodosByFailureTime(t *testing.T) {
	ctx := context.Background()
	var clock atomic.Int64
	clock.Store(1_800_000_000_000)
	s := openTest(t, Options{Now: func() time.Time { return time.UnixMilli(clock.Load()) }})
	var ids []int64
	for i := range 6 {
		td, err := s.AddTodo(ctx, NewTodo{Queue: []string{"a", "b"}[i%2], Payload: "p"})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, td.ID)
	}
	// Fail them in this order, the last two in the same millisecond.
	order := []int{3, 0, 5, 1, 4, 2}
	for i, k := range order {
		if i < 5 {
			clock.Add(1000)
		}
		td, err := s.Claim(ctx, Ack{ID: ids[k], Owner: "agent:a"}, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Fail(ctx, Ack{ID: ids[k], Owner: "agent:a", LeaseSeq: td.LeaseSeq}, []string{"x", "y"}[k%2], false); err != nil {
			t.Fatal(err)
		}
	}
	// Newest failure first; within a millisecond, the higher id first.
	want := []int64{ids[4], ids[2], ids[1], ids[5], ids[0], ids[3]}
	list := func(f TodoFilter) []int64 {
		t.Helper()
		f.State, f.ByFailure = StateFailed, true
		var got []int64
		for {
			rows, err := s.ListTodos(ctx, f)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rows {
				got = append(got, r.ID)
			}
			if len(rows) < f.Limit {
				return got
			}
			last := rows[len(rows)-1]
			f.Before, f.FailedBefore = last.ID, *last.FinishedAt
		}
	}
	if got := list(TodoFilter{Limit: 1}); !slices.Equal(got, want) {
		t.Fatalf("by failure, a page of 1 at a time: %v, want %v", got, want)
	}
	if got := list(TodoFilter{Limit: 4}); !slices.Equal(got, want) {
		t.Fatalf("by failure, pages of 4: %v, want %v", got, want)
	}
	if got, want := list(TodoFilter{Limit: 2, Queues: []string{"a"}}), []int64{ids[4], ids[2], ids[0]}; !slices.Equal(got, want) {
		t.Fatalf("queue a by failure: %v, want %v", got, want)
	}
	y := "y"
	if got, want := list(TodoFilter{Limit: 2, LastError: &y}), []int64{ids[1], ids[5], ids[3]}; !slices.Equal(got, want) {
		t.Fatalf("error y by failure: %v, want %v", got, want)
	}
	if s.pg {
		return // what follows reads SQLite's query plans
	}
	for _, f := range []TodoFilter{{}, {Queues: []string{"a"}}, {Before: 9, FailedBefore: time.UnixMilli(1_800_000_003_000)},
		{Queues: []string{"b"}, Before: 9, FailedBefore: time.UnixMilli(1_800_000_003_000)}} {
		f.State, f.ByFailure, f.Limit = StateFailed, true, 51
		q, args := todoListQuery(f, false)
		plan := queryPlan(t, s, q, args...)
		if len(plan) != 1 || !strings.Contains(plan[0], "todos_failed") {
			t.Errorf("plan for %+v: %q, want one walk of a failed-todos index and no sort", f, plan)
		}
	}
}
