package store

import (
	"context"
	"errors"
	"testing"
	"time"
)

// add_todo's store side: only into the endpoint's add queues, marked as the
// agent's (source agent, trust mode agent, added_by), and never past the cap of
// pending adds; a refused add leaves nothing behind.
func TestAddAgentTodo(t *testing.T) {
	s := openTest(t, Options{})
	ctx := context.Background()
	const bot = "agent:bot"
	if _, err := s.AddAgentTodo(ctx, bot, "elsewhere", "{}", []string{"review"}, TodoOptions{}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("add outside the add queues: %v, want invalid", err)
	}
	td, err := s.AddAgentTodo(ctx, bot, "review", `{"pr": 1}`, []string{"review"}, TodoOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Todo(ctx, td.ID)
	if err != nil || got.Source.Type != "agent" || got.Trust.Mode != "agent" || got.Trust.Verified ||
		got.Trust.AddedBy != bot || got.CreatedBy != bot || got.Payload != `{"pr": 1}` {
		t.Fatalf("the added todo = %+v, %v", got, err)
	}
	for range MaxAddedPending - 1 {
		if _, err := s.AddAgentTodo(ctx, bot, "review", "{}", []string{"review"}, TodoOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.AddAgentTodo(ctx, bot, "review", "{}", []string{"review"}, TodoOptions{}); !errors.Is(err, ErrAddCap) {
		t.Fatalf("add over the cap: %v, want ErrAddCap", err)
	}
	counts, _ := s.QueueCounts(ctx)
	if len(counts) != 1 || counts[0].Count != MaxAddedPending {
		t.Fatalf("after the refused add: %+v, want %d pending", counts, MaxAddedPending)
	}
	// Another agent's adds are its own; a claimed add no longer counts.
	if _, err := s.AddAgentTodo(ctx, "agent:other", "review", "{}", []string{"review"}, TodoOptions{}); err != nil {
		t.Fatalf("another agent's add: %v", err)
	}
	if _, ok, err := s.ClaimNext(ctx, "agent:worker", []string{"review"}, time.Minute); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if _, err := s.AddAgentTodo(ctx, bot, "review", "{}", []string{"review"}, TodoOptions{}); err != nil {
		t.Fatalf("add after one of the agent's todos was claimed: %v", err)
	}
}

// An endpoint's add queues are kept, changed, and checked.
func TestEndpointAddQueues(t *testing.T) {
	s := openTest(t, Options{})
	ctx := context.Background()
	add := []string{"review", "team/triage"}
	ep, _, err := s.CreateEndpoint(ctx, "bot", EndpointSpec{Queues: &[]string{"inbox"}, AddQueues: &add}, "human:1")
	if err != nil || len(ep.AddQueues) != 2 || ep.AddQueues[1] != "team/triage" {
		t.Fatalf("create = %+v, %v", ep.AddQueues, err)
	}
	none := []string{}
	if ep, err = s.UpdateEndpoint(ctx, ep.ID, EndpointSpec{AddQueues: &none}, "human:1"); err != nil || len(ep.AddQueues) != 0 {
		t.Fatalf("update = %+v, %v", ep.AddQueues, err)
	}
	bad := []string{"no spaces"}
	if _, err := s.UpdateEndpoint(ctx, ep.ID, EndpointSpec{AddQueues: &bad}, "human:1"); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a bad add queue: %v, want invalid", err)
	}
}

// serve --add-todo-cap sets the cap of pending adds per agent.
func TestAddTodoCapIsConfigured(t *testing.T) {
	s := openTest(t, Options{AddTodoCap: 2})
	ctx := context.Background()
	if got := s.AddTodoCap(); got != 2 {
		t.Fatalf("AddTodoCap() = %d, want 2", got)
	}
	for range 2 {
		if _, err := s.AddAgentTodo(ctx, "agent:bot", "review", "{}", []string{"review"}, TodoOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.AddAgentTodo(ctx, "agent:bot", "review", "{}", []string{"review"}, TodoOptions{}); !errors.Is(err, ErrAddCap) {
		t.Fatalf("a third add under a cap of 2: %v, want ErrAddCap", err)
	}
}
