package store

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/internal/testkit"
)

// Keys and coalescing on PostgreSQL, where two processes add, claim and
// complete side by side (see pgrace_test.go).

// pastDeadlocks runs f again while PostgreSQL answers a deadlock (40P01). Two
// processes that add, claim and complete on one queue at once deadlock now and
// then whatever keys do (keyless too, as far as we can tell on the queue_counts
// rows, which each batch holds in the order it touched them); the victim's write
// is rolled back and safe to run again, which these tests do. The count is logged.
func pastDeadlocks(deadlocks *atomic.Int32, f func() error) error {
	for {
		err := f()
		if pgErrorCode(err) != "40P01" {
			return err
		}
		deadlocks.Add(1)
	}
}

// Two processes add keyed todos while four workers in each claim and complete
// them: a key is never held twice at once, each key's todos are claimed in the
// order they were added, and none is left waiting behind a key nobody holds.
func TestTwoProcessesNeverHoldOneKeyTwice(t *testing.T) {
	ctx := context.Background()
	clock := testkit.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	stores := pgProcesses(t, clock, clock)
	const keys, perKey, workers = 6, 12, 3

	var mu sync.Mutex
	held := map[string]bool{}
	lastID := map[string]int64{}
	var adding, deadlocks atomic.Int32
	adding.Store(2)
	var wg sync.WaitGroup
	fail := make(chan string, 1)
	report := func(msg string) {
		select {
		case fail <- msg:
		default:
		}
	}
	for p, s := range stores {
		wg.Add(1)
		go func() { // a producer per process: the keys' todos, interleaved
			defer wg.Done()
			defer adding.Add(-1)
			for i := 0; i < perKey; i++ {
				for k := 0; k < keys; k++ {
					err := pastDeadlocks(&deadlocks, func() error {
						_, err := s.AddTodo(ctx, NewTodo{Queue: "prs", Payload: fmt.Sprintf("p%d-%d", p, i),
							Options: TodoOptions{Key: fmt.Sprintf("octo/repo#%d", k)}})
						return err
					})
					if err != nil {
						report(err.Error())
						return
					}
				}
			}
		}()
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					var td Todo
					var ok bool
					err := pastDeadlocks(&deadlocks, func() (err error) {
						td, ok, err = s.ClaimNext(ctx, "agent:w", []string{"prs"}, time.Hour)
						return err
					})
					if err != nil {
						report(err.Error())
						return
					}
					if !ok {
						if adding.Load() == 0 {
							return
						}
						time.Sleep(time.Millisecond) // not an assertion: a worker's poll
						continue
					}
					mu.Lock()
					if held[td.Key] {
						report(fmt.Sprintf("todo %d claimed while key %s was held", td.ID, td.Key))
					}
					if td.ID < lastID[td.Key] {
						report(fmt.Sprintf("key %s: todo %d claimed after %d", td.Key, td.ID, lastID[td.Key]))
					}
					held[td.Key], lastID[td.Key] = true, td.ID
					mu.Unlock()
					time.Sleep(200 * time.Microsecond) // the work: a double claim would meet it held
					// Let go of the key before the completion commits: no other claim can
					// take it before then.
					mu.Lock()
					held[td.Key] = false
					mu.Unlock()
					if err := pastDeadlocks(&deadlocks, func() error {
						_, err := s.Complete(ctx, Ack{ID: td.ID, Owner: "agent:w", LeaseSeq: td.LeaseSeq}, "")
						return err
					}); err != nil {
						report(err.Error())
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	t.Logf("%d writes met a deadlock and ran again", deadlocks.Load())
	select {
	case msg := <-fail:
		t.Fatal(msg)
	default:
	}
	var left int
	if err := stores[0].rdb.QueryRow(`SELECT count(*) FROM todos WHERE state != 'done'`).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		t.Fatalf("%d todos were left undone (waiting behind a key nobody holds?)", left)
	}
	countsAgree(t, stores[0])
}

// Two processes add coalescing todos of one key at once: they make one pending
// todo that absorbed all the others, never two.
func TestTwoProcessesCoalesceIntoOne(t *testing.T) {
	ctx := context.Background()
	clock := testkit.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	stores := pgProcesses(t, clock, clock)
	const each = 60
	add := func(s *Store) func() {
		return func() {
			for i := 0; i < each; i++ {
				if _, err := s.AddTodo(ctx, NewTodo{Queue: "prs", Payload: "x",
					Options: TodoOptions{Key: "octo/repo#1", Coalesce: true}}); err != nil {
					t.Error(err)
					return
				}
			}
		}
	}
	race(add(stores[0]), add(stores[1]))
	todos, err := stores[1].ListTodos(ctx, TodoFilter{Queues: []string{"prs"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(todos) != 1 || todos[0].Coalesced != 2*each-1 {
		t.Fatalf("%d todos (%+v), want one that absorbed %d", len(todos), todos, 2*each-1)
	}
}
