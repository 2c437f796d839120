package agent

import (
	"sync"
	"testing"

	"github.com/switchboardhq/switchboard/store"
)

// N workers race claim_next over M todos: every todo is completed exactly once,
// none twice, none lost.
func TestWorkersRaceClaimNext(t *testing.T) {
	const workers, todos = 8, 120
	e := newEnv(t)
	_, credA := e.endpoint("pool-a", []string{"inbox"}, nil)
	_, credB := e.endpoint("pool-b", []string{"inbox", "spare"}, nil)
	want := map[int64]bool{}
	for range todos {
		want[e.addTodo("inbox", "p").ID] = true
	}
	clients := make([]*agentClient, workers)
	for i := range clients {
		cred := credA
		if i%2 == 1 {
			cred = credB
		}
		clients[i] = e.dial(cred, false)
	}

	var mu sync.Mutex
	completed := map[int64]int{}
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for _, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				res, err := c.call(VerbClaimNext, nil)
				if err != nil || res.IsError {
					errs <- errFromResult("claim_next", res, err)
					return
				}
				var claim claimResult
				if err := decodeResult(res, &claim); err != nil {
					errs <- err
					return
				}
				if !claim.Claimed {
					return
				}
				res, err = c.call(VerbComplete, map[string]any{"todo_id": claim.Todo.ID, "lease_seq": claim.LeaseSeq})
				if err != nil || res.IsError {
					errs <- errFromResult("complete", res, err)
					return
				}
				mu.Lock()
				completed[claim.Todo.ID]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for id := range want {
		if n := completed[id]; n != 1 {
			t.Errorf("todo %d completed %d times", id, n)
		}
		if got := e.todo(id); got.State != store.StateDone || got.Attempts != 1 {
			t.Errorf("todo %d is %s after %d attempts", id, got.State, got.Attempts)
		}
	}
	if len(completed) != len(want) {
		t.Errorf("completed %d distinct todos, want %d", len(completed), len(want))
	}
	audit, err := e.st.ListAudit(t.Context(), store.AuditFilter{Action: "todo.complete", Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(audit) != todos {
		t.Errorf("%d complete audit rows, want %d", len(audit), todos)
	}
}
