package cli

import (
	"context"
	"fmt"

	"github.com/switchboardhq/switchboard/store"
)

// todoCancel ends a pending or claimed todo on an operator's word: it is failed,
// marked cancelled (not a dead letter), and never retried by itself. A worker
// that held it hears so at its next heartbeat, complete or fail.
func todoCancel(ctx context.Context, env *environ, args []string) error {
	return onID(ctx, env, args, "todo cancel", todoSynopsis, "todo",
		func(ctx context.Context, s *store.Store, id int64) error {
			t, err := s.CancelTodo(ctx, id, "human:cli")
			if err != nil {
				return err
			}
			fmt.Fprintf(env.stdout, "todo %d on %s is cancelled; it will not be claimed or retried by itself\n", t.ID, t.Queue)
			return nil
		})
}

// stateLabel is t's state with what it waits for, or that it was cancelled.
func stateLabel(t store.Todo) string {
	switch {
	case t.CancelledBy != "":
		return t.State + " (cancelled)"
	case t.Waiting == store.WaitingApproval:
		return t.State + " (awaiting approval)"
	case t.Waiting != "":
		return t.State + " (" + t.Waiting + ")"
	}
	return t.State
}
