package agent

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/switchboardhq/switchboard/internal/testkit/teststore"
	"github.com/switchboardhq/switchboard/store"
)

// nextRing waits for the next doorbell notification on c.
func nextRing(t *testing.T, c *agentClient) mcp.JSONRPCNotification {
	t.Helper()
	return waitNote(t, c, ChannelMethod)
}

func ringOf(t *testing.T, n mcp.JSONRPCNotification) (content string, meta map[string]any) {
	t.Helper()
	content, _ = n.Params.AdditionalFields["content"].(string)
	meta, _ = n.Params.AdditionalFields["meta"].(map[string]any)
	if content == "" || meta == nil {
		t.Fatalf("ring without content or meta: %+v", n.Params.AdditionalFields)
	}
	return content, meta
}

// A new todo rings every attached session whose scope covers its queue, on the
// GET stream, and no other.
func TestDoorbellRingsTheRightSessions(t *testing.T) {
	e := newEnv(t)
	_, inboxCred := e.endpoint("inbox-worker", []string{"inbox"}, nil)
	_, otherCred := e.endpoint("other-worker", []string{"other"}, nil)
	inbox1 := e.dial(inboxCred, true)
	inbox2 := e.dial(inboxCred, true)
	other := e.dial(otherCred, true)

	td := e.addTodo("inbox", "p")
	for _, c := range []*agentClient{inbox1, inbox2} {
		content, meta := ringOf(t, nextRing(t, c))
		if want := "todo " + strconv.FormatInt(td.ID, 10) + " ready on queue inbox"; content != want {
			t.Errorf("content %q, want %q", content, want)
		}
		if meta["queue"] != "inbox" || meta["todo_id"] != strconv.FormatInt(td.ID, 10) || meta["source"] != "manual" {
			t.Errorf("meta = %v", meta)
		}
	}
	// The out-of-scope session's first ring is for its own queue: rings are sent
	// in order, so it never got the inbox one.
	mine := e.addTodo("other", "q")
	_, meta := ringOf(t, nextRing(t, other))
	if meta["todo_id"] != strconv.FormatInt(mine.ID, 10) {
		t.Fatalf("out-of-scope session got a ring for todo %v (queue %v)", meta["todo_id"], meta["queue"])
	}

	// A requeue rings too (the reaper's, a release, a retry): claimable again.
	inbox1.ok(t, VerbClaim, map[string]any{"todo_id": td.ID}, nil)
	inbox1.ok(t, VerbRelease, map[string]any{"todo_id": td.ID}, nil)
	_, meta = ringOf(t, nextRing(t, inbox2))
	if meta["todo_id"] != strconv.FormatInt(td.ID, 10) {
		t.Fatalf("release rang for %v", meta["todo_id"])
	}
	if s := e.ag.Stats(); s.Streams != 3 || s.RingsSent < 3 { // the last ring may still be counting
		t.Fatalf("stats = %+v", s)
	}
}

// otherProcess starts the foreign-commit watch on e's store and opens the same
// file as another process would (the CLI while serve runs), on the same clock.
func (e *env) otherProcess() *store.Store {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	watching := make(chan struct{})
	go func() { e.st.WatchForeign(ctx, 5*time.Millisecond); close(watching) }()
	e.t.Cleanup(func() { cancel(); <-watching })
	return teststore.OpenPath(e.t, e.st.Path(), store.Options{Now: e.clock.Now})
}

// A todo added by another process on the same file (the CLI while serve runs)
// rings too, through the foreign-commit watcher.
func TestDoorbellRingsForForeignCommits(t *testing.T) {
	e := newEnv(t)
	_, cred := e.endpoint("watcher", []string{"inbox"}, nil)
	c := e.dial(cred, true)
	cli := e.otherProcess()
	ctx := t.Context()
	// The watcher takes its baseline when it starts, and a todo committed before
	// that is not news; add until one rings (the first almost always does).
	for attempt := 0; ; attempt++ {
		td, err := cli.AddTodo(ctx, store.NewTodo{Queue: "inbox", Payload: "from the cli", CreatedBy: "human:cli"})
		if err != nil {
			t.Fatal(err)
		}
		select {
		case n := <-c.notes:
			if n.Method != ChannelMethod {
				continue
			}
			_, meta := ringOf(t, n)
			if meta["queue"] != "inbox" {
				t.Fatalf("foreign ring meta = %v", meta)
			}
			id, _ := strconv.ParseInt(meta["todo_id"].(string), 10, 64)
			if id < 1 || id > td.ID {
				t.Fatalf("ring for todo %d, newest foreign todo is %d", id, td.ID)
			}
			return
		case <-time.After(2 * time.Second):
			if attempt == 5 {
				t.Fatal("a foreign commit never rang the doorbell")
			}
		}
	}
}

// Publishing never blocks the committing goroutine: a full doorbell drops rings
// and counts them; changes that make nothing claimable never ring.
func TestDoorbellPublishNeverBlocks(t *testing.T) {
	d := newDoorbell(1)
	d.publish(store.TodoChange{ID: 1, Queue: "q", Claimable: true})
	d.publish(store.TodoChange{ID: 2, Queue: "q", Claimable: true}) // full: dropped, not blocked
	d.publish(store.TodoChange{ID: 3, Queue: "q", State: store.StateDone})
	if got := d.dropped.Load(); got != 1 {
		t.Fatalf("dropped %d, want 1", got)
	}
	if c := <-d.ch; c.ID != 1 || len(d.ch) != 0 {
		t.Fatalf("queued %d, %d left", c.ID, len(d.ch))
	}
}

// Revalidate ends the sessions of a revoked endpoint: their ids stop working and
// their streams get no more rings.
func TestRevokedEndpointLosesItsStream(t *testing.T) {
	e := newEnv(t)
	ep, cred := e.endpoint("revoked", []string{"inbox"}, nil)
	_, keep := e.endpoint("kept", []string{"inbox"}, nil)
	gone := e.dial(cred, true)
	kept := e.dial(keep, true)
	if err := e.st.RevokeEndpoint(t.Context(), ep.ID, "human:test"); err != nil {
		t.Fatal(err)
	}
	e.ag.Revalidate(t.Context())
	if e.ag.sessions.get(gone.GetSessionId()) != nil {
		t.Fatal("the revoked endpoint's session survived")
	}
	if err := e.ag.mcp.SendNotificationToSpecificClient(gone.GetSessionId(), "notifications/message", nil); !errors.Is(err, server.ErrSessionNotFound) {
		t.Fatalf("mcp-go still holds the revoked endpoint's session: %v", err)
	}
	if e.ag.sessions.get(kept.GetSessionId()) == nil {
		t.Fatal("another endpoint's session was ended")
	}
	// Ring synchronously, so that the count is final when ring returns.
	before := e.ag.Stats().RingsSent
	e.ag.ring(store.TodoChange{ID: 99, Queue: "inbox", Source: "manual", Claimable: true})
	if sent := e.ag.Stats().RingsSent - before; sent != 1 {
		t.Fatalf("%d rings sent after the revocation, want 1 (the kept session's)", sent)
	}
	nextRing(t, kept)
}

// A todo failed with a retry rings when its backoff ends, when claim_next can
// take it; the failure itself rings nobody (the todo is not claimable yet).
func TestDoorbellRingsWhenABackoffEnds(t *testing.T) {
	e := newEnv(t)
	_, cred := e.endpoint("retrier", []string{"inbox"}, nil)
	worker := e.dial(cred, true)
	td := e.addTodo("inbox", "p")
	nextRing(t, worker)
	var claim claimResult
	worker.ok(t, VerbClaimNext, nil, &claim)
	worker.ok(t, VerbFail, map[string]any{"todo_id": td.ID, "lease_seq": claim.LeaseSeq, "error": "transient"}, nil)
	// A marker todo on the same stream: rings arrive in order, so the first ring
	// after the failure being the marker's means the failure rang nothing.
	marker := e.addTodo("inbox", "marker")
	if _, meta := ringOf(t, nextRing(t, worker)); meta["todo_id"] != strconv.FormatInt(marker.ID, 10) {
		t.Fatalf("the failure rang todo %v while it backs off", meta["todo_id"])
	}
	e.clock.Add(store.RetryBackoff(1))
	e.st.RingDue()
	if _, meta := ringOf(t, nextRing(t, worker)); meta["todo_id"] != strconv.FormatInt(td.ID, 10) {
		t.Fatalf("after the backoff rang todo %v, want %d", meta["todo_id"], td.ID)
	}
	claim = claimResult{}
	worker.ok(t, VerbClaim, map[string]any{"todo_id": td.ID}, &claim)
	if claim.Todo == nil || claim.Todo.ID != td.ID {
		t.Fatalf("the rung todo could not be claimed: %+v", claim)
	}
}

// A revocation made by another process (the CLI) ends the endpoint's sessions,
// open streams included, as soon as the foreign-commit watch sees it, not at the
// next periodic re-check (30 s): until then the stream kept getting rings.
func TestRevocationFromAnotherProcessEndsStreamsAtOnce(t *testing.T) {
	e := newEnv(t)
	ep, cred := e.endpoint("revoked", []string{"inbox"}, nil)
	c := e.dial(cred, true)
	e.st.OnForeignCommit(e.ag.EndpointsMayHaveChanged)
	cli := e.otherProcess()
	ctx := t.Context()
	if err := cli.RevokeEndpoint(ctx, ep.ID, "human:cli"); err != nil {
		t.Fatal(err)
	}
	// The watcher takes its baseline when it starts, and a commit made before
	// that is not news: later foreign commits (elsewhere) make it look again.
	deadline := time.Now().Add(10 * time.Second)
	for e.ag.sessions.get(c.GetSessionId()) != nil {
		if time.Now().After(deadline) {
			t.Fatal("the revoked endpoint's session outlived the foreign-commit watch")
		}
		if _, err := cli.AddTodo(ctx, store.NewTodo{Queue: "elsewhere", Payload: "nudge", CreatedBy: "human:cli"}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Run may start after sessions opened and after another process revoked their
// endpoint (serve starts it beside the HTTP server): the first signal of a
// foreign commit still re-checks them, rather than taking the endpoints as they
// were when Run started for what it has already seen.
func TestRevocationBeforeRunStartsEndsSessionsAtTheFirstSignal(t *testing.T) {
	e := newEnv(t, func(c *envConfig) { c.runLater = true; c.agent.RevalidateEvery = time.Hour })
	ep, cred := e.endpoint("revoked", []string{"inbox"}, nil)
	c := e.dial(cred, true)
	cli := teststore.OpenPath(t, e.st.Path(), store.Options{Now: e.clock.Now})
	if err := cli.RevokeEndpoint(t.Context(), ep.ID, "human:cli"); err != nil {
		t.Fatal(err)
	}
	e.run()
	deadline := time.Now().Add(10 * time.Second)
	for e.ag.sessions.get(c.GetSessionId()) != nil {
		if time.Now().After(deadline) {
			t.Fatal("the session of an endpoint revoked before Run started outlived the foreign-commit signals")
		}
		e.ag.EndpointsMayHaveChanged() // as the foreign-commit watch does
		time.Sleep(20 * time.Millisecond)
	}
}

// Revoking an agent from another process (the CLI while serve runs) hands the
// todos it held back to their queue, and the agents idle on their doorbells hear
// of them through the foreign-commit watch: nothing else would wake them.
func TestDoorbellRingsForTodosAForeignRevocationReturned(t *testing.T) {
	e := newEnv(t)
	leavingEp, leavingCred := e.endpoint("leaving", []string{"inbox"}, nil)
	_, stayingCred := e.endpoint("staying", []string{"inbox"}, nil)
	leaving := e.dial(leavingCred, false)
	staying := e.dial(stayingCred, true)
	td := e.addTodo("inbox", "p")
	ringOf(t, nextRing(t, staying))
	leaving.ok(t, VerbClaim, map[string]any{"todo_id": td.ID}, nil)

	watching := make(chan struct{}, 1)
	e.st.OnTodoChange(func(c store.TodoChange) {
		if c.Queue == "elsewhere" {
			select {
			case watching <- struct{}{}:
			default:
			}
		}
	})
	cli := e.otherProcess()
	ctx := t.Context()
	// The watcher takes its baseline when it starts: once it announces a foreign
	// add, it is surely watching.
	for attempt := 0; ; attempt++ {
		if _, err := cli.AddTodo(ctx, store.NewTodo{Queue: "elsewhere", Payload: "nudge", CreatedBy: "human:cli"}); err != nil {
			t.Fatal(err)
		}
		select {
		case <-watching:
		case <-time.After(50 * time.Millisecond):
			if attempt == 200 {
				t.Fatal("the watcher never announced a foreign add")
			}
			continue
		}
		break
	}
	rev, err := cli.RevokeEndpointReleasing(ctx, leavingEp.ID, "human:cli")
	if err != nil || rev.Released != 1 {
		t.Fatalf("revoke: %+v, %v", rev, err)
	}
	_, meta := ringOf(t, nextRing(t, staying))
	if meta["todo_id"] != strconv.FormatInt(td.ID, 10) {
		t.Fatalf("rang for todo %v, want the returned %d", meta["todo_id"], td.ID)
	}
	var claim map[string]any
	staying.ok(t, VerbClaimNext, map[string]any{}, &claim)
	if claim["todo"] == nil {
		t.Fatalf("the returned todo could not be claimed: %+v", claim)
	}
}
