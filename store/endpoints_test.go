package store

import (
	"context"
	"errors"
	"testing"
	"time"
)

// Revoking the last live endpoint of an agent hands the todos it holds back to
// their queues at once (it can no longer complete them), as a release; while
// another endpoint speaks for the agent (a credential rotation), its work stays.
func TestRevokingAnAgentsLastEndpointReleasesItsTodos(t *testing.T) {
	s := openTest(t, Options{})
	ctx := context.Background()
	log := watchChanges(s)
	q := []string{"inbox"}
	old, _, err := s.CreateEndpoint(ctx, "w", EndpointSpec{Queues: &q}, "human:1")
	if err != nil {
		t.Fatal(err)
	}
	rotated, _, err := s.CreateEndpoint(ctx, "w", EndpointSpec{Queues: &q}, "human:1")
	if err != nil {
		t.Fatal(err)
	}
	var held []Todo
	for _, owner := range []string{"agent:w", "agent:w", "agent:x"} {
		if _, err := s.AddTodo(ctx, NewTodo{Queue: "inbox", Payload: "p"}); err != nil {
			t.Fatal(err)
		}
		td, ok, err := s.ClaimNext(ctx, owner, q, time.Hour)
		if err != nil || !ok {
			t.Fatalf("claim: %v %v", ok, err)
		}
		held = append(held, td)
	}
	if n, err := s.RevokeEndpointReleasing(ctx, old.ID, "human:1"); err != nil || n != 0 {
		t.Fatalf("revoking one of two endpoints released %d (%v)", n, err)
	}
	if n, err := s.RevokeEndpointReleasing(ctx, rotated.ID, "human:1"); err != nil || n != 2 {
		t.Fatalf("revoking the last endpoint released %d (%v), want the agent's 2", n, err)
	}
	for i, td := range held {
		now, err := s.Todo(ctx, td.ID)
		if err != nil {
			t.Fatal(err)
		}
		wantState := StatePending
		if i == 2 {
			wantState = StateClaimed // another agent's
		}
		if now.State != wantState || (i < 2 && (now.Attempts != 0 || now.Owner != "")) {
			t.Errorf("todo %d after the revocation: %+v, want %s", td.ID, now, wantState)
		}
		if i < 2 && len(log.claimable(td.ID)) != 2 { // added, then released
			t.Errorf("todo %d was not rung when released", td.ID)
		}
	}
	if _, err := s.RevokeEndpointReleasing(ctx, rotated.ID, "human:1"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("revoking twice: %v", err)
	}
}
