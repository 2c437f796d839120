package store

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/internal/testkit"
)

// An acknowledgement must name the lease it acts under. A worker whose lease
// lapsed, after another worker of the same agent re-claimed the todo, cannot
// heartbeat, complete, fail or release it by leaving lease_seq out: the owner
// alone does not say which worker holds the todo now.
func TestAckWithoutLeaseSeqIsRefused(t *testing.T) {
	clock := testkit.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	s := openTest(t, Options{Now: clock.Now})
	ctx := context.Background()
	id := addTodos(t, s, "inbox", 1)[0]
	const owner = "agent:pool"
	first, err := s.Claim(ctx, Ack{ID: id, Owner: owner}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	clock.Add(2 * time.Minute)
	if r, err := s.ReapExpired(ctx); err != nil || r.Requeued != 1 {
		t.Fatalf("reap = %+v, %v; want 1 requeued", r, err)
	}
	second, ok, err := s.ClaimNext(ctx, owner, []string{"inbox"}, time.Minute)
	if err != nil || !ok || second.ID != id || second.LeaseSeq <= first.LeaseSeq {
		t.Fatalf("re-claim = %+v, %v, %v", second, ok, err)
	}

	acts := map[string]func(Ack) error{
		"heartbeat": func(a Ack) error { _, err := s.Heartbeat(ctx, a, time.Minute); return err },
		"complete":  func(a Ack) error { _, err := s.Complete(ctx, a, "stale"); return err },
		"fail":      func(a Ack) error { _, err := s.Fail(ctx, a, "stale", false); return err },
		"release":   func(a Ack) error { _, err := s.Release(ctx, a); return err },
	}
	for verb, act := range acts {
		err := act(Ack{ID: id, Owner: owner})
		if !errors.Is(err, ErrNoLeaseSeq) || !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "pass lease_seq") {
			t.Errorf("%s without lease_seq: %v, want a conflict saying to pass lease_seq", verb, err)
		}
		if err := act(Ack{ID: id, Owner: owner, LeaseSeq: first.LeaseSeq}); !errors.Is(err, ErrConflict) {
			t.Errorf("%s with the lost lease_seq: %v, want conflict", verb, err)
		}
	}
	got, err := s.Todo(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != StateClaimed || got.LeaseSeq != second.LeaseSeq || got.LeaseExpiry == nil || !got.LeaseExpiry.Equal(*second.LeaseExpiry) {
		t.Fatalf("after the refused acks the todo is %s, lease %d until %v; want the second claim untouched", got.State, got.LeaseSeq, got.LeaseExpiry)
	}
	if _, err := s.Complete(ctx, Ack{ID: id, Owner: owner, LeaseSeq: second.LeaseSeq}, "ok"); err != nil {
		t.Fatalf("the holder's complete: %v", err)
	}
}

// TestClaimNextAuditRow: a claim by ClaimNext writes one audit row, its detail
// the claim's attempt and lease (on PostgreSQL the claim and its audit row are
// one statement), and the row answered is the claimed one with its payload.
func TestClaimNextAuditRow(t *testing.T) {
	s := openTest(t, Options{})
	ctx := context.Background()
	added, err := s.AddTodo(ctx, NewTodo{Queue: "inbox", Payload: `{"n":1}`})
	if err != nil {
		t.Fatal(err)
	}
	for attempt := 1; attempt <= 2; attempt++ {
		got, ok, err := s.ClaimNext(ctx, "agent:a", []string{"inbox"}, time.Minute)
		if err != nil || !ok || got.ID != added.ID || got.State != StateClaimed || got.Owner != "agent:a" ||
			got.Attempts != 1 || got.LeaseSeq != int64(attempt) || got.Payload != `{"n":1}` {
			t.Fatalf("claim %d: %+v, %v, %v", attempt, got, ok, err)
		}
		if attempt == 1 {
			if _, err := s.Release(ctx, Ack{ID: got.ID, Owner: "agent:a", LeaseSeq: got.LeaseSeq}); err != nil {
				t.Fatal(err)
			}
		}
	}
	rows, err := s.ListAudit(ctx, AuditFilter{Action: "todo.claim_next"})
	if err != nil || len(rows) != 2 {
		t.Fatalf("audit rows %+v, %v; want two", rows, err)
	}
	for _, r := range rows {
		want := map[int64]string{1: "attempt=1 lease_seq=1", 2: "attempt=1 lease_seq=2"} // a release gives the attempt back
		if r.Actor != "agent:a" || r.Target != todoTarget(added.ID) || r.Outcome != "ok" ||
			(r.Detail != want[1] && r.Detail != want[2]) {
			t.Fatalf("audit row %+v", r)
		}
	}
	if rows[0].Detail == rows[1].Detail {
		t.Fatalf("audit rows %+v: both claims have the same detail", rows)
	}
	if _, ok, err := s.ClaimNext(ctx, "agent:a", []string{"inbox"}, time.Minute); ok || err != nil {
		t.Fatalf("claimed a claimed todo: %v, %v", ok, err)
	}
}
