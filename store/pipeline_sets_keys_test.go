package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/internal/testkit"
)

// addWith adds a todo to queue with opts and returns its id.
func addWith(t *testing.T, s *Store, queue string, opts TodoOptions) int64 {
	t.Helper()
	td, err := s.AddTodo(context.Background(), NewTodo{Queue: queue, Payload: "p", Options: opts})
	if err != nil {
		t.Fatal(err)
	}
	return td.ID
}

// claimsInOneSet runs one claim per owner on queue in one set-based statement
// and returns what each got (0 for nothing).
func claimsInOneSet(t *testing.T, s *Store, queue string, owners ...string) []Todo {
	t.Helper()
	got := make([]Todo, len(owners))
	errs := make([]error, len(owners))
	var writes []func()
	for i, o := range owners {
		writes = append(writes, func() {
			td, ok, err := s.ClaimNext(context.Background(), o, []string{queue}, time.Minute)
			if ok {
				got[i] = td
			}
			errs[i] = err
		})
	}
	inOneSet(t, s, writes...)
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return got
}

// Claims in one statement take what the same claims one after another would
// take: the highest priorities, oldest first within one; one todo per key,
// the key's oldest; nothing delayed. Their completes in one statement free each
// key's next todo once, and a second set of claims takes exactly those.
func TestClaimSetKeepsKeysPriorityAndDelay(t *testing.T) {
	clock := testkit.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	s := pgProcesses(t, clock)[0]
	ctx := context.Background()
	k1a := addWith(t, s, "inbox", TodoOptions{Key: "k1"})
	k1b := addWith(t, s, "inbox", TodoOptions{Key: "k1", Priority: 9})
	k2a := addWith(t, s, "inbox", TodoOptions{Key: "k2", Priority: 5})
	k2b := addWith(t, s, "inbox", TodoOptions{Key: "k2", Priority: 5})
	plain := addWith(t, s, "inbox", TodoOptions{})
	addWith(t, s, "inbox", TodoOptions{Priority: 9, Delay: time.Hour})
	high := addWith(t, s, "inbox", TodoOptions{Priority: 7})

	first := claimsInOneSet(t, s, "inbox", "agent:a", "agent:b")
	firstIDs := []int64{first[0].ID, first[1].ID}
	slices.Sort(firstIDs)
	if ids := firstIDs; ids[0] != k2a || ids[1] != high {
		t.Fatalf("two claims got %v; want the two highest priorities, %d and %d", ids, k2a, high)
	}
	got := append(first, claimsInOneSet(t, s, "inbox", "agent:c", "agent:d", "agent:e", "agent:f")...)
	claimed := map[int64]bool{}
	for _, td := range got {
		if td.ID != 0 {
			claimed[td.ID] = true
		}
	}
	want := map[int64]bool{high: true, k2a: true, k1a: true, plain: true}
	if len(claimed) != len(want) || !claimed[high] || !claimed[k2a] || !claimed[k1a] || !claimed[plain] {
		t.Fatalf("claimed %v; want %v (k1b %d and k2b %d wait for their keys, one is delayed)", claimed, want, k1b, k2b)
	}
	countsAgree(t, s)

	var writes []func()
	errs := make([]error, len(got))
	for i, td := range got {
		if td.ID == 0 {
			continue
		}
		a := Ack{ID: td.ID, Owner: td.Owner, LeaseSeq: td.LeaseSeq}
		writes = append(writes, func() { _, errs[i] = s.Complete(ctx, a, "ok") })
	}
	inOneSet(t, s, writes...)
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	got = claimsInOneSet(t, s, "inbox", "agent:a", "agent:b", "agent:c")
	ids := []int64{got[0].ID, got[1].ID, got[2].ID}
	slices.Sort(ids)
	if ids[0] != 0 || ids[1] != k1b || ids[2] != k2b {
		t.Errorf("after the completes, claims got %v; want %d, %d and nothing", ids, k1b, k2b)
	}
	if n := auditCount(t, s, "todo.claim_next"); n != 6 {
		t.Errorf("%d claim audit rows, want 6", n)
	}
	if n := auditCount(t, s, "todo.complete"); n != 4 {
		t.Errorf("%d complete audit rows, want 4", n)
	}
	countsAgree(t, s)
}

// queue_counts follows count(*) through every kind of statement that moves
// todos, set-based or not, from two processes on one schema: claims and
// completes in sets, a fail with retry, a dead letter, a cancel, the reaper's
// requeue, the retention's delete and the bench's seed.
func TestCountsFollowEveryStatement(t *testing.T) {
	clock := testkit.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	stores := pgProcesses(t, clock, clock)
	s, other := stores[0], stores[1]
	ctx := context.Background()
	addTodos(t, s, "inbox", 8)
	addTodos(t, other, "side", 3)
	if err := other.SeedTodosForBench(ctx, "seeded", 50, "x"); err != nil {
		t.Fatal(err)
	}
	countsAgree(t, s)
	got := claimsInOneSet(t, s, "inbox", "agent:a", "agent:b", "agent:c", "agent:d", "agent:e", "agent:f")
	countsAgree(t, s)
	ack := func(td Todo) Ack { return Ack{ID: td.ID, Owner: td.Owner, LeaseSeq: td.LeaseSeq} }
	errs := make([]error, 3)
	inOneSet(t, s,
		func() { _, errs[0] = s.Complete(ctx, ack(got[0]), "ok") },
		func() { _, errs[1] = s.Complete(ctx, ack(got[1]), "ok") },
		func() { _, errs[2] = s.Complete(ctx, ack(got[1]), "again") })
	if errs[0] != nil || (errs[1] == nil) == (errs[2] == nil) {
		t.Fatalf("completes = %v", errs)
	}
	countsAgree(t, s)
	if _, err := other.Fail(ctx, ack(got[2]), "retry", true); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Fail(ctx, ack(got[3]), "dead", false); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CancelTodo(ctx, got[4].ID, "human:1"); err != nil {
		t.Fatal(err)
	}
	countsAgree(t, s)
	clock.Add(2 * time.Minute) // got[5]'s lease lapses
	if res, err := other.ReapExpired(ctx); err != nil || res.Requeued+res.DeadLettered != 1 {
		t.Fatalf("reap = %+v, %v", res, err)
	}
	countsAgree(t, s)
	if n, err := s.PruneDone(ctx, clock.Now().Add(time.Hour)); err != nil || n == 0 {
		t.Fatalf("prune = %d, %v", n, err)
	}
	countsAgree(t, s)
}

// Two processes, six workers each, drain a queue of keyed todos with claims and
// completes that the writers batch into set-based statements: no key ever has
// two todos claimed at once, each key's todos are claimed oldest first, every
// todo is claimed and completed once, with one audit row each.
func TestTwoProcessesDrainKeysInSets(t *testing.T) {
	clock := testkit.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	stores := pgProcesses(t, clock, clock)
	ctx := context.Background()
	const n, keys, workers = 240, 12, 6
	keyOf := map[int64]string{}
	for i := range n {
		k := fmt.Sprintf("k%d", i%keys)
		keyOf[addWith(t, stores[i%2], "inbox", TodoOptions{Key: k, Priority: i % 3})] = k
	}
	var mu sync.Mutex
	holder := map[string]int64{} // key -> the todo of it claimed now
	last := map[string]int64{}   // key -> its todo claimed last
	done := map[int64]int{}
	var wg sync.WaitGroup
	for i := range 2 * workers {
		s := stores[i%2]
		owner := fmt.Sprintf("agent:%d", i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				td, ok, err := s.ClaimNext(ctx, owner, []string{"inbox"}, time.Hour)
				if err != nil || !ok {
					if err != nil {
						t.Errorf("claim: %v", err)
					}
					return
				}
				k := keyOf[td.ID]
				mu.Lock()
				if h, held := holder[k]; held {
					t.Errorf("todo %d of key %s claimed while todo %d of it is", td.ID, k, h)
				}
				if td.ID < last[k] {
					t.Errorf("todo %d of key %s claimed after todo %d", td.ID, k, last[k])
				}
				holder[k], last[k] = td.ID, td.ID
				mu.Unlock()
				a := Ack{ID: td.ID, Owner: owner, LeaseSeq: td.LeaseSeq}
				mu.Lock()
				delete(holder, k) // before the complete: its commit may free the next at once
				mu.Unlock()
				if _, err := s.Complete(ctx, a, "ok"); err != nil {
					t.Errorf("complete %d: %v", td.ID, err)
					return
				}
				mu.Lock()
				done[td.ID]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(done) != n {
		t.Errorf("%d todos completed, want %d", len(done), n)
	}
	for id, c := range done {
		if c != 1 {
			t.Errorf("todo %d completed %d times", id, c)
		}
	}
	for _, action := range []string{"todo.claim_next", "todo.complete"} {
		if c := auditCount(t, stores[0], action); c != n {
			t.Errorf("%d %s audit rows, want %d", c, action, n)
		}
	}
	countsAgree(t, stores[1])
	t.Logf("writes in sets: %d and %d", stores[0].WriterStats().InSets, stores[1].WriterStats().InSets)
}

// Completes in one statement audit each todo before the key's next todo it
// frees, as one at a time does (TestAnEndIsAuditedBeforeTheKeyItFrees).
func TestCompleteSetAuditsTheEndBeforeTheKeyItFrees(t *testing.T) {
	clock := testkit.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	s := pgProcesses(t, clock)[0]
	ctx := context.Background()
	keys := []string{"k1", "k2", "k3"}
	next := map[string]int64{}
	for _, k := range keys {
		addWith(t, s, "inbox", TodoOptions{Key: k})
		next[k] = addWith(t, s, "inbox", TodoOptions{Key: k})
	}
	got := claimsInOneSet(t, s, "inbox", "agent:a", "agent:b", "agent:c")
	var writes []func()
	errs := make([]error, len(got))
	for i, td := range got {
		a := Ack{ID: td.ID, Owner: td.Owner, LeaseSeq: td.LeaseSeq}
		writes = append(writes, func() { _, errs[i] = s.Complete(ctx, a, "ok") })
	}
	inOneSet(t, s, writes...)
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	rows, err := s.ListAudit(ctx, AuditFilter{Limit: 6})
	if err != nil {
		t.Fatal(err)
	}
	at := map[string]int64{}
	for _, r := range rows {
		at[r.Action+" "+r.Target] = r.ID
	}
	for _, td := range got {
		done, freed := at[fmt.Sprintf("todo.complete todo:%d", td.ID)], at[fmt.Sprintf("todo.key_free todo:%d", next[td.Key])]
		if done == 0 || freed == 0 || done > freed {
			t.Errorf("key %s: complete audited as %d, its next todo freed as %d; want the complete first", td.Key, done, freed)
		}
	}
}
