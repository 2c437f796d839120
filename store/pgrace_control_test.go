package store

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/internal/testkit"
)

// A human cancels a todo while its worker completes it, from two processes:
// exactly one wins, and the todo is what the winner made it.
func TestCancelRacingComplete(t *testing.T) {
	clock := testkit.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	stores := pgProcesses(t, clock, clock)
	worker, board := stores[0], stores[1]
	ctx := context.Background()
	wins := map[string]int{}
	for round := range 40 {
		id := addTodos(t, worker, "inbox", 1)[0]
		td, err := worker.Claim(ctx, Ack{ID: id, Owner: "agent:w"}, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		var doneErr, cancelErr error
		race(func() {
			_, doneErr = worker.Complete(ctx, Ack{ID: id, Owner: "agent:w", LeaseSeq: td.LeaseSeq}, "ok")
		}, func() {
			_, cancelErr = board.CancelTodo(ctx, id, "human:1")
		})
		now, err := board.Todo(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case doneErr == nil && errors.Is(cancelErr, ErrConflict) && now.State == StateDone && now.CancelledBy == "":
			wins["complete"]++
		case cancelErr == nil && errors.Is(doneErr, ErrConflict) && now.State == StateFailed && now.CancelledBy == "human:1":
			wins["cancel"]++
		default:
			t.Fatalf("round %d: complete %v, cancel %v, todo %s (cancelled by %q): both won, or neither",
				round, doneErr, cancelErr, now.State, now.CancelledBy)
		}
	}
	t.Logf("of 40 races: %v", wins)
	countsAgree(t, worker)
}

// Two operators decide on the same question from two processes at once: one
// decision stands, the other is a conflict.
func TestTwoDecisionsAtOnce(t *testing.T) {
	clock := testkit.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	stores := pgProcesses(t, clock, clock)
	one, two := stores[0], stores[1]
	ctx := context.Background()
	for round := range 40 {
		id := awaitingApproval(t, one, "agent:w")
		var yesErr, noErr error
		race(func() {
			_, yesErr = one.Decide(ctx, id, true, "yes", "human:1")
		}, func() {
			_, noErr = two.Decide(ctx, id, false, "no", "human:2")
		})
		now, err := one.Todo(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case yesErr == nil && errors.Is(noErr, ErrConflict) && now.Approval.State == ApprovalApproved && now.Approval.By == "human:1":
		case noErr == nil && errors.Is(yesErr, ErrConflict) && now.Approval.State == ApprovalDenied && now.Approval.By == "human:2":
		default:
			t.Fatalf("round %d: approve %v, deny %v, approval %+v: both won, or neither", round, yesErr, noErr, now.Approval)
		}
		if now.State != StatePending || now.Attempts != 0 {
			t.Fatalf("round %d: after the decision the todo is %s with %d attempts", round, now.State, now.Attempts)
		}
	}
	countsAgree(t, one)
}

// Two processes add for one agent at its cap's edge at once: the cap holds.
func TestAddsRacingTheCap(t *testing.T) {
	clock := testkit.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	stores := pgProcesses(t, clock, clock)
	ctx := context.Background()
	add := []string{"review"}
	for range MaxAddedPending - 1 {
		if _, err := stores[0].AddAgentTodo(ctx, "agent:bot", "review", "{}", add, TodoOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var errs [2]error
	race(func() {
		_, errs[0] = stores[0].AddAgentTodo(ctx, "agent:bot", "review", "{}", add, TodoOptions{})
	}, func() {
		_, errs[1] = stores[1].AddAgentTodo(ctx, "agent:bot", "review", "{}", add, TodoOptions{})
	})
	capped := 0
	for _, err := range errs {
		switch {
		case errors.Is(err, ErrAddCap):
			capped++
		case err != nil:
			t.Fatal(err)
		}
	}
	counts, err := stores[1].QueueCounts(ctx)
	if err != nil || capped != 1 || len(counts) != 1 || counts[0].Count != MaxAddedPending {
		t.Fatalf("after the race: %d refused, counts %+v (%v); want one refused and %d pending", capped, counts, err, MaxAddedPending)
	}
}
