package agent

import (
	"context"
	"fmt"
	"slices"

	"github.com/switchboardhq/switchboard/store"
)

// checkScope is the one gate between an agent and the store: the verb must be
// granted to the endpoint, and every queue named must be in its queue scope. It
// fails closed and reads nothing, so a refusal reveals nothing about the queue.
func checkScope(ep store.Endpoint, verb string, queues ...string) error {
	if !slices.Contains(ep.Verbs, verb) {
		return errorf(CodeForbidden, "the verb %s is not granted to this endpoint", verb)
	}
	for _, q := range queues {
		if !slices.Contains(ep.Queues, q) {
			return errorf(CodeForbidden, "queue %q is outside this endpoint's scope", q)
		}
	}
	return nil
}

// todoInScope checks a verb on a todo named by id: it reads only the todo's queue,
// then applies checkScope. The store checks the queue again inside the transition.
// A todo in a queue outside the scope is answered exactly as one that does not
// exist, so that ids cannot be probed for other tenants' todos and queue names (as
// webhooks and events outside the scope are).
func (a *Agent) todoInScope(ctx context.Context, ep store.Endpoint, verb string, id int64) error {
	if err := checkScope(ep, verb); err != nil {
		return err
	}
	q, err := a.st.TodoQueue(ctx, id)
	if err != nil {
		return err
	}
	if !slices.Contains(ep.Queues, q) {
		return fmt.Errorf("store: todo %d: %w", id, store.ErrNotFound)
	}
	return nil
}
