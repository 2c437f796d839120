package store

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/internal/testkit"
)

// searchFixture is a store with todos from two webhooks' deliveries, a replay,
// todos added by hand, dead letters with look-alike errors, and claims.
type searchFixture struct {
	s                           *Store
	gh, st                      Webhook
	push, pull, invoice, replay int64
	byHuman1, byCLI             int64
	percent, plain, under, any  int64
	accent                      int64
	heldA, heldB                int64
}

func newSearchFixture(t *testing.T) searchFixture {
	t.Helper()
	ctx := context.Background()
	s := openTest(t, Options{})
	f := searchFixture{s: s}
	f.gh = mustWebhook(t, s, NewWebhook{SourceType: "github", Queue: "inbox", Secret: "x", CreatedBy: "human:1"})
	f.st = mustWebhook(t, s, NewWebhook{SourceType: "stripe", Queue: "billing", Secret: "x", CreatedBy: "human:1"})
	deliver := func(h Webhook, id, typ string) int64 {
		t.Helper()
		res, err := s.RecordDelivery(ctx, NewDelivery{WebhookID: h.ID, DeliveryID: id, EventType: typ, TrustMode: "signed", Body: []byte("{}")})
		if err != nil {
			t.Fatal(err)
		}
		return res.TodoID
	}
	add := func(queue, by string) int64 {
		t.Helper()
		td, err := s.AddTodo(ctx, NewTodo{Queue: queue, Payload: "{}", CreatedBy: by})
		if err != nil {
			t.Fatal(err)
		}
		return td.ID
	}
	f.push = deliver(f.gh, "d-1", "push")
	f.pull = deliver(f.gh, "d-2", "pull_request")
	f.invoice = deliver(f.st, "evt_1", "invoice.paid")
	pushTodo, err := s.Todo(ctx, f.push)
	if err != nil {
		t.Fatal(err)
	}
	rp, err := s.ReplayWebhookEvent(ctx, pushTodo.Source.EventID, 0, "human:2", nil)
	if err != nil {
		t.Fatal(err)
	}
	f.replay = rp.ID
	f.byHuman1, f.byCLI = add("inbox", "human:1"), add("inbox", "human:cli")
	// Dead letters whose errors differ only where LIKE's wildcards would match.
	for _, e := range []struct {
		id  *int64
		err string
	}{{&f.percent, "upload 100% sent, then Timeout"}, {&f.plain, "upload 1000 sent"},
		{&f.under, "bad a_b field"}, {&f.any, "bad axb field"}, {&f.accent, "temporaire ÉCHEC"}} {
		*e.id = add("errs", "human:1")
		td, ok, err := s.ClaimNext(ctx, "agent:w", []string{"errs"}, time.Minute)
		if err != nil || !ok || td.ID != *e.id {
			t.Fatalf("claim %d: %v %v %v", *e.id, td.ID, ok, err)
		}
		if _, err := s.Fail(ctx, Ack{ID: td.ID, Owner: "agent:w", LeaseSeq: td.LeaseSeq, Queues: []string{"errs"}}, e.err, false); err != nil {
			t.Fatal(err)
		}
	}
	claim := func(owner string) int64 {
		t.Helper()
		td, ok, err := s.ClaimNext(ctx, owner, []string{"held"}, time.Minute)
		if err != nil || !ok {
			t.Fatalf("claim for %s: %v %v", owner, ok, err)
		}
		return td.ID
	}
	add("held", "human:1")
	add("held", "human:1")
	f.heldA, f.heldB = claim("agent:a"), claim("agent:b")
	return f
}

// Each of the search's terms finds the todos it names, alone and with the queue,
// state and cursor filters; LIKE's wildcards in an error's text match only
// themselves.
func TestSearchTodos(t *testing.T) {
	f := newSearchFixture(t)
	gh := fmt.Sprint(f.gh.ID)
	for _, c := range []struct {
		name string
		f    TodoFilter
		want []int64
	}{
		{"key of a delivery, and its replay", TodoFilter{Search: TodoSearch{Key: "d-1"}}, []int64{f.replay, f.push}},
		{"key on another webhook", TodoFilter{Search: TodoSearch{Key: "evt_1"}}, []int64{f.invoice}},
		{"key with a queue", TodoFilter{Queues: []string{"billing"}, Search: TodoSearch{Key: "d-1"}}, nil},
		{"unknown key", TodoFilter{Search: TodoSearch{Key: "d-"}}, nil},
		{"webhook by number", TodoFilter{Search: TodoSearch{Source: gh}}, []int64{f.pull, f.push}},
		{"webhook by name", TodoFilter{Search: TodoSearch{Source: "webhook:" + gh}}, []int64{f.pull, f.push}},
		{"source type", TodoFilter{Search: TodoSearch{Source: "stripe"}}, []int64{f.invoice}},
		{"replays", TodoFilter{Search: TodoSearch{Source: "replay"}}, []int64{f.replay}},
		{"who replayed", TodoFilter{Search: TodoSearch{Source: "human:2"}}, []int64{f.replay}},
		{"who added, on a queue", TodoFilter{Queues: []string{"inbox"}, Search: TodoSearch{Source: "human:1"}}, []int64{f.byHuman1}},
		{"the CLI", TodoFilter{Search: TodoSearch{Source: "human:cli"}}, []int64{f.byCLI}},
		{"event type", TodoFilter{Search: TodoSearch{Type: "push"}}, []int64{f.replay, f.push}},
		{"event type and source", TodoFilter{Search: TodoSearch{Type: "push", Source: "github"}}, []int64{f.push}},
		{"event type, paged", TodoFilter{Before: f.replay, Search: TodoSearch{Type: "push"}}, []int64{f.push}},
		{"event type and state", TodoFilter{State: StateFailed, Search: TodoSearch{Type: "push"}}, nil},
		{"event type is exact", TodoFilter{Search: TodoSearch{Type: "pus"}}, nil},
		{"error: a literal %", TodoFilter{Search: TodoSearch{Error: "100%"}}, []int64{f.percent}},
		{"error: a literal _", TodoFilter{Search: TodoSearch{Error: "a_b"}}, []int64{f.under}},
		{"error: any case", TodoFilter{Search: TodoSearch{Error: "TIMEOUT"}}, []int64{f.percent}},
		// As SQLite's LIKE: the case of ASCII letters only, on both backends.
		{"error: ASCII in any case", TodoFilter{Search: TodoSearch{Error: "TEMPORAIRE ÉCHEC"}}, []int64{f.accent}},
		{"error: other letters as written", TodoFilter{Search: TodoSearch{Error: "échec"}}, nil},
		{"error: no folding of İ", TodoFilter{Search: TodoSearch{Error: "İ"}}, nil},
		{"error: a backslash", TodoFilter{Search: TodoSearch{Error: `\`}}, nil},
		{"error on the Failed tab", TodoFilter{State: StateFailed, ByFailure: true, Search: TodoSearch{Error: "upload"}}, []int64{f.plain, f.percent}},
		{"error and source on the Failed tab", TodoFilter{State: StateFailed, ByFailure: true, Search: TodoSearch{Error: "bad", Source: "human:1"}}, []int64{f.any, f.under}},
		{"holder", TodoFilter{Search: TodoSearch{Holder: "agent:a"}}, []int64{f.heldA}},
		{"holder by agent id", TodoFilter{Search: TodoSearch{Holder: "b"}}, []int64{f.heldB}},
		{"holder of done work", TodoFilter{Search: TodoSearch{Holder: "agent:w"}}, nil},
		{"everything", TodoFilter{Search: TodoSearch{Key: "d-1", Source: "human:2", Type: "push"}}, []int64{f.replay}},
		// Text that is not UTF-8 matches no stored text (none is stored): on
		// PostgreSQL, which refuses to compare it, as on SQLite.
		{"error not UTF-8", TodoFilter{Search: TodoSearch{Error: "bad\xffutf"}}, nil},
		{"holder not UTF-8", TodoFilter{Search: TodoSearch{Holder: "agent:\xff"}}, nil},
		{"key not UTF-8", TodoFilter{Search: TodoSearch{Key: "d-\xff", TodoKey: "k\xfe"}}, nil},
		{"source and type not UTF-8", TodoFilter{Search: TodoSearch{Source: "\xff", Type: "\xff"}}, nil},
		{"queue not UTF-8", TodoFilter{Queues: []string{"\xff"}}, nil},
		{"dead letters of an error not UTF-8", TodoFilter{State: StateFailed, LastError: ptr("\xff")}, nil},
	} {
		got, err := f.s.ListTodos(context.Background(), c.f)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		var ids []int64
		for _, td := range got {
			ids = append(ids, td.ID)
		}
		if !slices.Equal(ids, c.want) {
			t.Errorf("%s: listed %v, want %v", c.name, ids, c.want)
		}
	}
}

// A key or a holder walks an index (a key: its few rowids); the other terms read
// the todos newest first, by rowid or the board's queue and state index, and
// stop when a page is full: no search sorts, with the statistics of a busy
// database. No term costs ingest an index entry of its own.
func TestSearchTodosWalksAnIndex(t *testing.T) {
	testkit.SQLiteOnly(t, "SQLite's query plans and INDEXED BY")
	s := openTest(t, Options{})
	ctx := context.Background()
	err := s.exclusive(ctx, func(c *sql.Conn) error {
		_, err := c.ExecContext(ctx, `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < 4000)
			INSERT INTO todos (queue, state, payload_size, created_by, source_type, source_event_type,
				available_at, created_at, updated_at)
			SELECT iif(i % 100 = 0, 'quiet', 'deep'), iif(i % 100 = 0, 'done', 'pending'), 0, 'webhook:' || (i % 3),
				'github', iif(i % 7 = 0, 'push', 'issues'), 0, 0, 0 FROM n`)
		if err == nil {
			_, err = c.ExecContext(ctx, `ANALYZE`)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	pending := TodoFilter{State: StatePending, Queues: []string{"deep"}}
	for _, c := range []struct {
		search TodoSearch
		index  string
	}{
		{TodoSearch{Key: "d-1"}, "SEARCH todos USING INTEGER PRIMARY KEY (rowid=?)"},
		{TodoSearch{Holder: "agent:a"}, "SEARCH todos USING INDEX todos_state_id (state=?"},
		{TodoSearch{TodoKey: "octo/repo#42"}, "SEARCH todos USING INDEX todos_key (key=?"},
		{TodoSearch{Source: "webhook:1"}, ""},
		{TodoSearch{Source: "github"}, ""},
		{TodoSearch{Type: "push"}, ""},
		{TodoSearch{Type: "push", Error: "x"}, ""},
	} {
		for _, f := range []TodoFilter{{}, pending, {Queues: []string{"quiet"}, Before: 3000}} {
			f.Search, f.Limit = c.search, 51
			q, args := todoListQuery(f, false)
			plan := queryPlan(t, s, q, args...)
			if c.index == "" {
				if slices.ContainsFunc(plan, func(l string) bool { return strings.Contains(l, "TEMP B-TREE") }) {
					t.Errorf("%+v with %+v: plan %q, want the todos newest first without a sort", c.search, f, plan)
				}
				continue
			}
			if !strings.HasPrefix(plan[0], c.index) || slices.ContainsFunc(plan, func(l string) bool {
				return strings.Contains(l, "TEMP B-TREE") || strings.HasPrefix(l, "SCAN todos") || strings.HasPrefix(l, "SCAN e")
			}) {
				t.Errorf("%+v with %+v: plan %q, want %s first and no scan or sort", c.search, f, plan, c.index)
			}
		}
	}
}

// A filter of text that is not UTF-8 lists nothing, and retries nothing, on
// either database, rather than failing.
func TestFiltersOfTextThatIsNotUTF8MatchNothing(t *testing.T) {
	f := newSearchFixture(t)
	ctx := context.Background()
	for _, af := range []AuditFilter{{Actor: "human:\xff"}, {Action: "todo.\xff"}, {Action: "\xff."}, {Target: "todo:\xff"}} {
		if got, err := f.s.ListAudit(ctx, af); err != nil || len(got) != 0 {
			t.Errorf("audit %#v: %d rows, %v", af, len(got), err)
		}
	}
	inbox, err := f.s.ListTodos(ctx, TodoFilter{Queues: []string{"inbox"}})
	if err != nil || len(inbox) == 0 {
		t.Fatalf("inbox: %v, %v", inbox, err)
	}
	if got, err := f.s.ListTodos(ctx, TodoFilter{Queues: []string{"inbox", "\xff"}}); err != nil || !slices.Equal(ids(got), ids(inbox)) {
		t.Errorf("inbox and a queue not UTF-8: %v, %v; want inbox's %v", ids(got), err, ids(inbox))
	}
	for _, ff := range []Failed{{Queue: "\xff"}, {Error: ptr("bad\xffutf")}} {
		if n, err := f.s.RetryFailed(ctx, ff, "human:test"); err != nil || n != 0 {
			t.Errorf("retry %#v: %d, %v", ff, n, err)
		}
	}
}

func ptr[T any](v T) *T { return &v }

func ids(todos []Todo) []int64 {
	var out []int64
	for _, td := range todos {
		out = append(out, td.ID)
	}
	return out
}
