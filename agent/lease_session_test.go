package agent

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/reaper"
	"github.com/switchboardhq/switchboard/store"
)

// Two workers of one MCP session (an agent that runs tasks in parallel over its one
// connection to the server, as Claude Code's subagents share their parent's MCP
// servers): worker A claims the todo, its lease lapses, worker B claims it again in
// the same session. A, not knowing, completes without lease_seq: the session's
// memory now holds B's lease, so A's stale complete acts under it and finishes the
// todo B is working on. A lost lease must never act; a session whose claim
// memory has been overwritten for the same todo cannot tell its workers apart,
// so it must ask for lease_seq.
func TestStaleAckInTheSameSessionDoesNotActUnderTheNewLease(t *testing.T) {
	for _, fast := range []bool{true, false} {
		t.Run(map[bool]string{true: "fast path", false: "mcp-go"}[fast], func(t *testing.T) {
			e := newEnv(t)
			e.ag.fastOff.Store(!fast)
			_, cred := e.endpoint("pool", []string{"inbox"}, nil)
			session := e.dial(cred, false)
			td := e.addTodo("inbox", "p")
			session.ok(t, VerbClaim, map[string]any{"todo_id": td.ID, "lease_ttl_seconds": 60}, nil) // worker A
			e.clock.Add(61 * time.Second)
			if res, err := reaper.New(e.st, reaper.Options{Logger: e.quiet}).RunOnce(t.Context()); err != nil || res.Requeued != 1 {
				t.Fatalf("reaper pass = %+v, %v; want 1 requeued", res, err)
			}
			var b claimResult
			session.ok(t, VerbClaimNext, map[string]any{"lease_ttl_seconds": 600}, &b) // worker B

			res, err := session.call(VerbComplete, map[string]any{"todo_id": td.ID, "result": "from A's lost lease"})
			var p errorPayload
			if err == nil && res.IsError {
				err = json.Unmarshal(res.RawStructuredContent, &p)
			}
			if err != nil || p.Code != CodeConflict {
				t.Errorf("complete without lease_seq after the session's lease was lost and re-claimed: %v %+v, want conflict", err, p)
			}
			if got := e.todo(td.ID); got.State != store.StateClaimed || got.LeaseSeq != b.LeaseSeq {
				t.Fatalf("the todo is %s (result %q) under lease %d, want still claimed by worker B under %d",
					got.State, got.Result, got.LeaseSeq, b.LeaseSeq)
			}
		})
	}
}
