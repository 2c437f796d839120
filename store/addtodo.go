package store

import (
	"context"
	"errors"
	"fmt"
)

// Agents hand work on: add_todo puts a todo on one of the queues an endpoint may
// add to (Endpoint.AddQueues). Such a todo's source type is "agent" and its
// trust mode "agent": the agent that made it authenticated with its credential,
// but nothing signed the content. A cap on the pending todos one agent has
// added bounds what a runaway loop can pile up, as the webhook ceiling bounds
// its webhooks.

// MaxAddedPending is, by default (Options.AddTodoCap), how many todos an agent
// may have added that are still pending.
const MaxAddedPending = 1000

// ErrAddCap: the agent has AddTodoCap pending todos it added.
var ErrAddCap = errors.New("add cap reached")

// AddTodoCap is how many pending todos one agent may have added.
func (s *Store) AddTodoCap() int {
	if s.opts.AddTodoCap > 0 {
		return s.opts.AddTodoCap
	}
	return MaxAddedPending
}

// AddAgentTodo adds a todo for agent actor (agent:<id>) to queue, if queue is one
// of addQueues and the agent's pending adds are under AddTodoCap.
func (s *Store) AddAgentTodo(ctx context.Context, actor, queue, payload string, addQueues []string, opts TodoOptions) (Todo, error) {
	if err := opts.Validate(); err != nil {
		return Todo{}, fmt.Errorf("store: add todo to %s: %w", queue, err)
	}
	if !contains(addQueues, queue) {
		return Todo{}, fmt.Errorf("store: add todo to %s: this endpoint may add to %v only: %w", queue, addQueues, ErrInvalid)
	}
	var t Todo
	// It sets t afresh on each run: it may run again (rerunReq).
	err := s.submit(ctx, rerunReq(ctx, func(w *wtx) error {
		// Two adds of one agent in two processes cannot both count below the cap:
		// on PostgreSQL every write transaction holds the writer lock (pgWriterLock).
		var n int
		err := w.queryRow(`SELECT count(*) FROM todos INDEXED BY todos_added_by_agent
			WHERE created_by = ? AND state = 'pending' AND source_type = 'agent'`, actor).Scan(&n)
		if err != nil {
			return fmt.Errorf("store: add todo to %s: count the agent's adds: %w", queue, err)
		}
		if n >= s.AddTodoCap() {
			return fmt.Errorf("store: add todo to %s: %s has %d pending todos it added, the most it may have: %w",
				queue, actor, n, ErrAddCap)
		}
		t, err = w.addTodo(NewTodo{Queue: queue, Payload: payload, CreatedBy: actor,
			Source: Source{Type: "agent"}, Trust: Trust{Mode: "agent", AddedBy: actor}, Options: opts})
		return err
	}))
	return t, err
}
