package store

import (
	"context"
	"errors"
	"fmt"
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
	if r, err := s.RevokeEndpointReleasing(ctx, old.ID, "human:1"); err != nil || r != (Revocation{Kept: true, Holds: 2}) {
		t.Fatalf("revoking one of two endpoints: %+v (%v), want the todos kept", r, err)
	}
	if r, err := s.RevokeEndpointReleasing(ctx, rotated.ID, "human:1"); err != nil || r != (Revocation{Released: 2}) {
		t.Fatalf("revoking the last endpoint: %+v (%v), want the agent's 2 released", r, err)
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
	// The audit log says which releases a revocation made, and what each
	// revocation did with the agent's todos.
	said := auditDetails(t, s, "todo.release")
	want := fmt.Sprintf("endpoint %d revoked", rotated.ID)
	if len(said) != 2 || said[0] != want || said[1] != want {
		t.Errorf("the releases' audit details: %q, want %q twice", said, want)
	}
	said = auditDetails(t, s, "endpoint.revoke")
	if len(said) != 2 || said[0] != "handed 2 todos of agent w back to their queues" ||
		said[1] != "agent w keeps its todos: another endpoint of it is live" {
		t.Errorf("the revocations' audit details: %q", said)
	}
}

// auditDetails lists the details of the audit rows of action, newest first.
func auditDetails(t *testing.T, s *Store, action string) []string {
	t.Helper()
	rows, err := s.ListAudit(context.Background(), AuditFilter{Action: action})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range rows {
		out = append(out, r.Detail)
	}
	return out
}

// An endpoint's update is audited as what changed to what, not as SQL.
func TestEndpointUpdateAuditSaysWhatChanged(t *testing.T) {
	s := openTest(t, Options{})
	ctx := context.Background()
	ep, _, err := s.CreateEndpoint(ctx, "w", EndpointSpec{}, "human:1")
	if err != nil {
		t.Fatal(err)
	}
	q, rate := []string{"inbox", "ci"}, 0.0
	if _, err := s.UpdateEndpoint(ctx, ep.ID, EndpointSpec{Queues: &q, RatePerSecond: &rate}, "human:1"); err != nil {
		t.Fatal(err)
	}
	if said := auditDetails(t, s, "endpoint.update"); len(said) != 1 ||
		said[0] != `scope_queues=["inbox","ci"] rate_per_second=default` {
		t.Fatalf("the update's audit detail: %q", said)
	}
}
