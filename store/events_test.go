package store

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/internal/testkit"
)

// rings collects the doorbell's announcements.
type rings struct {
	mu   sync.Mutex
	list []TodoChange
}

func (r *rings) hook(c TodoChange) { r.mu.Lock(); r.list = append(r.list, c); r.mu.Unlock() }
func (r *rings) claimable() []TodoChange {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []TodoChange
	for _, c := range r.list {
		if c.Claimable {
			out = append(out, c)
		}
	}
	return out
}

func countRows(t *testing.T, s *Store, table string) int {
	t.Helper()
	var n int
	if err := s.rdb.QueryRow(`SELECT count(*) FROM ` + table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestRecordDelivery(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, Options{})
	var r rings
	s.OnTodoChange(r.hook)
	ep := ceilingEndpoint(t, s, 5, []string{"github"}, []string{"inbox"})
	h := mustWebhook(t, s, NewWebhook{SourceType: "github", Queue: "inbox", Secret: "x", CreatedBy: "agent:bot", EndpointID: ep.ID})
	body := []byte(`{"action":"opened","n":1}`)
	d := NewDelivery{WebhookID: h.ID, DeliveryID: "d-1", EventType: "pull_request", TrustMode: "signed",
		Headers: map[string]string{"X-GitHub-Event": "pull_request"}, Body: body}

	first, err := s.RecordDelivery(ctx, d)
	if err != nil || first.Duplicate || first.EventID == 0 || first.TodoID == 0 || first.Queue != "inbox" {
		t.Fatalf("first delivery: %+v, %v", first, err)
	}
	todo, err := s.Todo(ctx, first.TodoID)
	if err != nil {
		t.Fatal(err)
	}
	want := Todo{Queue: "inbox", Payload: string(body), Source: Source{Type: "github", WebhookID: h.ID, EventID: first.EventID,
		EventType: "pull_request"}, Trust: Trust{Verified: true, Mode: "signed", WebhookCreatedBy: "agent:bot"}}
	if todo.Queue != want.Queue || todo.Payload != want.Payload || todo.Source != want.Source || todo.Trust != want.Trust ||
		todo.State != StatePending {
		t.Fatalf("todo = %+v\nwant %+v", todo, want)
	}

	again, err := s.RecordDelivery(ctx, d)
	if err != nil || !again.Duplicate || again.EventID != first.EventID || again.TodoID != first.TodoID {
		t.Fatalf("redelivery: %+v, %v; want the first's ids", again, err)
	}
	if n := countRows(t, s, "todos"); n != 1 {
		t.Fatalf("%d todos after a redelivery, want 1", n)
	}
	if got := r.claimable(); len(got) != 1 || got[0].ID != first.TodoID || got[0].Source != "github" {
		t.Fatalf("doorbell rang %+v, want once for the todo", got)
	}

	// Without a delivery id nothing can be deduplicated: each is a new event.
	for i := 0; i < 2; i++ {
		res, err := s.RecordDelivery(ctx, NewDelivery{WebhookID: h.ID, TrustMode: "signed", Body: []byte("x")})
		if err != nil || res.Duplicate {
			t.Fatalf("id-less delivery %d: %+v, %v", i, res, err)
		}
	}
	// The same delivery id on another webhook is another delivery.
	other := mustWebhook(t, s, NewWebhook{SourceType: "github", Queue: "inbox", Secret: "y", CreatedBy: "human:1"})
	if res, err := s.RecordDelivery(ctx, NewDelivery{WebhookID: other.ID, DeliveryID: "d-1", TrustMode: "signed"}); err != nil || res.Duplicate {
		t.Fatalf("same id, other webhook: %+v, %v", res, err)
	}
	if n := countRows(t, s, "webhook_events"); n != 4 {
		t.Fatalf("%d events, want 4", n)
	}

	if err := s.DeleteWebhook(ctx, h.ID, 0, "human:1"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RecordDelivery(ctx, NewDelivery{WebhookID: h.ID, DeliveryID: "d-2", TrustMode: "signed"}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("delivery to a deleted webhook: %v, want ErrNotFound", err)
	}
	if n := countRows(t, s, "webhook_events"); n != 4 {
		t.Fatalf("a refused delivery left a row: %d events", n)
	}
}

// A delivery verified against secrets read before a rotation is refused, whole.
func TestRecordDeliveryRefusesStaleSecrets(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, Options{})
	h := mustWebhook(t, s, NewWebhook{SourceType: "github", Queue: "inbox", Secret: "x", CreatedBy: "human:1"})
	read, _, err := s.WebhookByToken(ctx, h.Token)
	if err != nil {
		t.Fatal(err)
	}
	d := NewDelivery{WebhookID: h.ID, DeliveryID: "d-1", TrustMode: "signed", Body: []byte("{}"),
		VerifiedWith: read.SecretsVersion()}
	if _, err := s.RecordDelivery(ctx, d); err != nil {
		t.Fatalf("secrets unchanged: %v", err)
	}
	if _, err := s.RotateWebhook(ctx, h.ID, 0, "y", time.Hour, "human:1"); err != nil {
		t.Fatal(err)
	}
	d.DeliveryID = "d-2"
	if _, err := s.RecordDelivery(ctx, d); !errors.Is(err, ErrStale) {
		t.Fatalf("secrets rotated since: %v, want ErrStale", err)
	}
	if n := countRows(t, s, "webhook_events"); n != 1 {
		t.Fatalf("a stale delivery left a row: %d events", n)
	}
	reread, _, err := s.WebhookByToken(ctx, h.Token)
	if err != nil {
		t.Fatal(err)
	}
	if reread.SecretsVersion() == read.SecretsVersion() {
		t.Fatal("a rotation left the secrets' version unchanged")
	}
	d.VerifiedWith = reread.SecretsVersion()
	if _, err := s.RecordDelivery(ctx, d); err != nil {
		t.Fatalf("verified against the current secrets: %v", err)
	}
}

func TestConcurrentRedeliveriesMakeOneTodo(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, Options{})
	h := mustWebhook(t, s, NewWebhook{SourceType: "github", Queue: "inbox", Secret: "x", CreatedBy: "human:1"})
	// Many copies of one delivery arrive at once and share group commits; the
	// unique key decides inside the transaction.
	var wg sync.WaitGroup
	results := make(chan DeliveryResult, 16)
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := s.RecordDelivery(ctx, NewDelivery{WebhookID: h.ID, DeliveryID: "same", TrustMode: "signed", Body: []byte("b")})
			if err != nil {
				t.Error(err)
			}
			results <- res
		}()
	}
	wg.Wait()
	close(results)
	fresh := 0
	var ids []int64
	for r := range results {
		if !r.Duplicate {
			fresh++
		}
		ids = append(ids, r.EventID)
	}
	for _, id := range ids {
		if id != ids[0] {
			t.Fatalf("event ids differ: %v", ids)
		}
	}
	if fresh != 1 || countRows(t, s, "todos") != 1 {
		t.Fatalf("%d fresh answers, %d todos; want 1 and 1", fresh, countRows(t, s, "todos"))
	}
}

func TestListGetReplayEvents(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, Options{})
	ep := ceilingEndpoint(t, s, 5, []string{"github"}, []string{"inbox"})
	mine := mustWebhook(t, s, NewWebhook{SourceType: "github", Queue: "inbox", Secret: "x", CreatedBy: "agent:bot", EndpointID: ep.ID})
	theirs := mustWebhook(t, s, NewWebhook{SourceType: "gitlab", Queue: "ops", Secret: "y", CreatedBy: "human:1"})
	var ids []int64
	for i, w := range []int64{mine.ID, theirs.ID, mine.ID, mine.ID} {
		res, err := s.RecordDelivery(ctx, NewDelivery{WebhookID: w, DeliveryID: string(rune('a' + i)), EventType: "push",
			TrustMode: "signed", Headers: map[string]string{"User-Agent": "GitHub-Hookshot/x"}, Body: bytes.Repeat([]byte("z"), 10+i)})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.EventID)
	}

	page, err := s.ListWebhookEvents(ctx, EventFilter{EndpointID: ep.ID, Limit: 2})
	if err != nil || len(page) != 2 || page[0].ID != ids[3] || page[1].ID != ids[2] {
		t.Fatalf("first page = %+v, %v", page, err)
	}
	if page[0].Body != nil || page[0].Headers != nil || page[0].PayloadSize != 13 || page[0].SourceType != "github" {
		t.Fatalf("listing row carries body/headers or wrong size: %+v", page[0])
	}
	rest, _ := s.ListWebhookEvents(ctx, EventFilter{EndpointID: ep.ID, Before: page[1].ID})
	if len(rest) != 1 || rest[0].ID != ids[0] {
		t.Fatalf("second page = %+v", rest)
	}
	if other, _ := s.ListWebhookEvents(ctx, EventFilter{WebhookID: theirs.ID}); len(other) != 1 || other[0].ID != ids[1] {
		t.Fatalf("by webhook = %+v", other)
	}

	ev, err := s.WebhookEvent(ctx, ids[0])
	if err != nil || string(ev.Body) != "zzzzzzzzzz" || ev.Headers["User-Agent"] != "GitHub-Hookshot/x" ||
		ev.DeliveryID != "a" || ev.EndpointID != ep.ID || !ev.Verified {
		t.Fatalf("event = %+v, %v", ev, err)
	}
	if _, err := s.WebhookEvent(ctx, 999); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown event: %v", err)
	}

	if _, err := s.ReplayWebhookEvent(ctx, ids[1], ep.ID, "agent:bot", nil); !errors.Is(err, ErrNotFound) {
		t.Fatalf("replay of another's event: %v, want ErrNotFound", err)
	}
	todo, err := s.ReplayWebhookEvent(ctx, ids[0], ep.ID, "agent:bot", nil)
	if err != nil {
		t.Fatal(err)
	}
	full, _ := s.Todo(ctx, todo.ID)
	if full.Payload != "zzzzzzzzzz" || full.Queue != "inbox" || full.CreatedBy != "agent:bot" ||
		full.Source != (Source{Type: "replay", WebhookID: mine.ID, EventID: ids[0], EventType: "push"}) ||
		full.Trust != (Trust{Verified: true, Mode: "signed", WebhookCreatedBy: "agent:bot"}) {
		t.Fatalf("replayed todo = %+v", full)
	}
	audit, _ := s.ListAudit(ctx, AuditFilter{Action: "webhook_event.replay"})
	if len(audit) != 1 || audit[0].Actor != "agent:bot" || audit[0].Target != "webhook_event:1" {
		t.Fatalf("replay audit = %+v", audit)
	}
}

func TestPrunedTodoLeavesEvent(t *testing.T) {
	ctx := context.Background()
	clock := testkit.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	s := openTest(t, Options{Now: clock.Now})
	h := mustWebhook(t, s, NewWebhook{SourceType: "github", Queue: "inbox", Secret: "x", CreatedBy: "human:1"})
	res, err := s.RecordDelivery(ctx, NewDelivery{WebhookID: h.ID, DeliveryID: "p", TrustMode: "signed", Body: []byte("b")})
	if err != nil {
		t.Fatal(err)
	}
	todo, ok, err := s.ClaimNext(ctx, "agent:bot", []string{"inbox"}, time.Minute)
	if err != nil || !ok {
		t.Fatalf("claim: %v %v", ok, err)
	}
	if _, err := s.Complete(ctx, Ack{ID: todo.ID, Owner: "agent:bot", LeaseSeq: todo.LeaseSeq, Queues: []string{"inbox"}}, "done"); err != nil {
		t.Fatal(err)
	}
	// Pruning always keeps the newest todo, so a later one comes first.
	if _, err := s.RecordDelivery(ctx, NewDelivery{WebhookID: h.ID, DeliveryID: "later", TrustMode: "signed", Body: []byte("c")}); err != nil {
		t.Fatal(err)
	}
	clock.Add(time.Hour)
	if n, err := s.PruneDone(ctx, clock.Now()); err != nil || n != 1 {
		t.Fatalf("prune: %d, %v (an event must not block pruning its todo)", n, err)
	}
	ev, err := s.WebhookEvent(ctx, res.EventID)
	if err != nil || ev.TodoID != 0 || string(ev.Body) != "b" {
		t.Fatalf("event after its todo was pruned: %+v, %v", ev, err)
	}
	// The redelivery is still recognised.
	again, err := s.RecordDelivery(ctx, NewDelivery{WebhookID: h.ID, DeliveryID: "p", TrustMode: "signed", Body: []byte("b")})
	if err != nil || !again.Duplicate || again.EventID != res.EventID || again.TodoID != 0 {
		t.Fatalf("redelivery after prune: %+v, %v", again, err)
	}
}

// Event retention deletes only events that no todo needs: not one whose todo is
// still kept (pending, failed or done within retention), nor one a live replay
// reads its payload from.
func TestPruneEventsKeepsWhatTodosNeed(t *testing.T) {
	ctx := context.Background()
	clock := testkit.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	s := openTest(t, Options{Now: clock.Now})
	h := mustWebhook(t, s, NewWebhook{SourceType: "github", Queue: "inbox", Secret: "x", CreatedBy: "human:1"})
	deliver := func(id string) DeliveryResult {
		t.Helper()
		res, err := s.RecordDelivery(ctx, NewDelivery{WebhookID: h.ID, DeliveryID: id, TrustMode: "signed", Body: []byte("body " + id)})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	finish := func(todoID int64) {
		t.Helper()
		td, err := s.Claim(ctx, Ack{ID: todoID, Owner: "agent:bot"}, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Complete(ctx, Ack{ID: todoID, Owner: "agent:bot", LeaseSeq: td.LeaseSeq}, "ok"); err != nil {
			t.Fatal(err)
		}
	}
	done := deliver("done")         // todo done, then pruned: its event may go
	pending := deliver("pending")   // todo still pending: its event stays
	replayed := deliver("replayed") // todo pruned, but a replay of it is pending
	finish(done.TodoID)
	finish(replayed.TodoID)
	replay, err := s.ReplayWebhookEvent(ctx, replayed.EventID, 0, "human:1", nil)
	if err != nil {
		t.Fatal(err)
	}
	clock.Add(ReplayWindow + time.Minute)
	if n, err := s.PruneDone(ctx, clock.Now()); err != nil || n != 2 {
		t.Fatalf("prune todos: %d, %v", n, err)
	}
	// A cutoff before the events arrived: nothing goes.
	if n, err := s.PruneEvents(ctx, clock.Now().Add(-ReplayWindow-2*time.Minute)); err != nil || n != 0 {
		t.Fatalf("prune events before they are old: %d, %v", n, err)
	}
	if n, err := s.PruneEvents(ctx, clock.Now()); err != nil || n != 1 {
		t.Fatalf("prune events: %d, %v (want only the done one)", n, err)
	}
	if _, err := s.WebhookEvent(ctx, done.EventID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the pruned todo's event is still there: %v", err)
	}
	for _, id := range []int64{pending.EventID, replayed.EventID} {
		if _, err := s.WebhookEvent(ctx, id); err != nil {
			t.Fatalf("event %d, which a todo still needs, was pruned: %v", id, err)
		}
	}
	// The replay still reads its payload from the event.
	got, err := s.Claim(ctx, Ack{ID: replay.ID, Owner: "agent:bot"}, time.Minute)
	if err != nil || got.Payload != "body replayed" {
		t.Fatalf("replay payload after event retention: %q, %v", got.Payload, err)
	}
	if _, err := s.Complete(ctx, Ack{ID: replay.ID, Owner: "agent:bot", LeaseSeq: got.LeaseSeq}, "ok"); err != nil {
		t.Fatal(err)
	}
	later := deliver("later") // pruning always keeps the newest todo and event
	clock.Add(time.Hour)
	if n, err := s.PruneDone(ctx, clock.Now()); err != nil || n != 1 {
		t.Fatalf("prune the replay: %d, %v", n, err)
	}
	if n, err := s.PruneEvents(ctx, clock.Now()); err != nil || n != 1 {
		t.Fatalf("prune events once the replay is gone: %d, %v", n, err)
	}
	// Ids are never handed out twice: the newest todo and event outlive any cutoff.
	finish(later.TodoID)
	clock.Add(time.Hour)
	if n, err := s.PruneDone(ctx, clock.Now()); err != nil || n != 0 {
		t.Fatalf("prune the newest todo: %d, %v", n, err)
	}
	next := deliver("next")
	if next.TodoID != later.TodoID+1 || next.EventID != later.EventID+1 {
		t.Fatalf("ids after pruning: todo %d event %d, want %d and %d", next.TodoID, next.EventID, later.TodoID+1, later.EventID+1)
	}
	// The newest event is kept even when a manual todo is newer than its own.
	finish(next.TodoID)
	if _, err := s.AddTodo(ctx, NewTodo{Queue: "inbox", Payload: "manual"}); err != nil {
		t.Fatal(err)
	}
	clock.Add(ReplayWindow + time.Minute)
	if n, err := s.PruneDone(ctx, clock.Now()); err != nil || n != 2 {
		t.Fatalf("prune later and next: %d, %v", n, err)
	}
	if n, err := s.PruneEvents(ctx, clock.Now()); err != nil || n != 1 {
		t.Fatalf("prune events with the newest orphaned: %d, %v (want only the older one)", n, err)
	}
	if after := deliver("after"); after.EventID != next.EventID+1 {
		t.Fatalf("event id after pruning: %d, want %d", after.EventID, next.EventID+1)
	}
	// A redelivery of a pruned event is new work.
	if again := deliver("done"); again.Duplicate || again.TodoID == 0 {
		t.Fatalf("redelivery after event retention: %+v", again)
	}
	audit, _ := s.ListAudit(ctx, AuditFilter{Action: "webhook_event.prune"})
	if len(audit) != 3 || audit[0].Actor != "system" {
		t.Fatalf("prune audit = %+v", audit)
	}
}

// A replay key is a second idempotency key beside the delivery id: a delivery that
// matches a kept event on either is a redelivery of it (the id first), on its own
// webhook only, and the event with its key is kept at least ReplayWindow, whatever
// cutoff retention asks for.
func TestReplayKeyDedupesWhileTheEventIsKept(t *testing.T) {
	ctx := context.Background()
	clock := testkit.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	s := openTest(t, Options{Now: clock.Now})
	h := mustWebhook(t, s, NewWebhook{SourceType: "github", Queue: "inbox", Secret: "x", CreatedBy: "human:1"})
	other := mustWebhook(t, s, NewWebhook{SourceType: "github", Queue: "inbox", Secret: "y", CreatedBy: "human:1"})
	key := func(b byte) []byte { return bytes.Repeat([]byte{b}, 32) }
	deliver := func(webhook int64, id string, k []byte) DeliveryResult {
		t.Helper()
		res, err := s.RecordDelivery(ctx, NewDelivery{WebhookID: webhook, DeliveryID: id, ReplayKey: k, TrustMode: "signed", Body: []byte("b")})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	same := func(what string, got, want DeliveryResult) {
		t.Helper()
		if !got.Duplicate || got.EventID != want.EventID || got.TodoID != want.TodoID {
			t.Fatalf("%s: %+v, want a redelivery of %+v", what, got, want)
		}
	}
	a := deliver(h.ID, "", key(1))
	b := deliver(h.ID, "d-b", key(2))
	if a.Duplicate || b.Duplicate || a.EventID == b.EventID {
		t.Fatalf("two keys: %+v and %+v", a, b)
	}
	same("a's key under a new id", deliver(h.ID, "d-new", key(1)), a)
	same("a's key with no id", deliver(h.ID, "", key(1)), a)
	same("b's id with a new key", deliver(h.ID, "d-b", key(3)), b)
	same("b's id with a's key", deliver(h.ID, "d-b", key(1)), b)
	if res := deliver(other.ID, "", key(1)); res.Duplicate {
		t.Fatalf("a's key on another webhook: %+v", res)
	}

	// a's todo is done and pruned; its event, and so its key, outlives any cutoff
	// for ReplayWindow.
	claimed, err := s.Claim(ctx, Ack{ID: a.TodoID, Owner: "agent:bot"}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Complete(ctx, Ack{ID: a.TodoID, Owner: "agent:bot", LeaseSeq: claimed.LeaseSeq}, "ok"); err != nil {
		t.Fatal(err)
	}
	clock.Add(time.Minute)
	if n, err := s.PruneDone(ctx, clock.Now()); err != nil || n != 1 {
		t.Fatalf("prune a's todo: %d, %v", n, err)
	}
	if n, err := s.PruneEvents(ctx, clock.Now()); err != nil || n != 0 {
		t.Fatalf("prune events a minute old: %d, %v (want none within ReplayWindow)", n, err)
	}
	same("a's key once its todo is pruned", deliver(h.ID, "", key(1)), DeliveryResult{EventID: a.EventID})
	clock.Add(ReplayWindow)
	if n, err := s.PruneEvents(ctx, clock.Now()); err != nil || n != 1 {
		t.Fatalf("prune events past ReplayWindow: %d, %v", n, err)
	}
	if res := deliver(h.ID, "", key(1)); res.Duplicate {
		t.Fatalf("a's key after its event was pruned: %+v", res)
	}
}
