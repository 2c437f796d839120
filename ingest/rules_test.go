package ingest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/store"
)

func TestRulesBadInput(t *testing.T) {
	for _, c := range []struct{ rules, want string }{
		{`{"filter": {"event": ["push"]}}`, `unknown field "event"`},
		{`{"filtre": {}}`, `unknown field "filtre"`},
		{`{"filter": {"match": {"pull_request/number": 1}}}`, `JSON pointer "pull_request/number" does not parse`},
		{`{"filter": {"match": {"/a~2b": 1}}}`, `JSON pointer "/a~2b" does not parse`},
		{`{"key": "octo/repo"}`, `has no {/json/pointer}`},
		{`{"key": "{/repository/full_name"}`, `a { without its }`},
		{`{"key": "{repository}"}`, `JSON pointer "repository" does not parse`},
		// Said as what is missing: "it starts with /" read as if it did.
		{`{"key": "{repository}"}`, `it does not start with /`},
		{`{"coalesce": true}`, `coalesce needs a key template`},
		{`{"key": "{/a}", "coalesce": true, "debounce": "soon"}`, `debounce "soon"`},
		{`{"key": "{/a}", "debounce": "30s"}`, `debounce needs coalesce`},
		{`{"priority": 5000}`, `priority 5000`},
		{`{"key": "{/a}"} {}`, `one JSON object`},
	} {
		_, err := ParseRules([]byte(c.rules))
		if !errors.Is(err, store.ErrInvalid) || !strings.Contains(RulesMessage(err), c.want) {
			t.Errorf("%s: %v, want ErrInvalid saying %q", c.rules, err, c.want)
		}
		if _, err := ParseNewRules([]byte(c.rules)); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("%s as new rules: %v, want ErrInvalid", c.rules, err)
		}
	}
}

// New rules with debounce_max but no debounce are refused: it would do
// nothing. Such rules stored before still parse, and apply as they did.
func TestNewRulesRefuseDebounceMaxAlone(t *testing.T) {
	rules := []byte(`{"key": "{/a}", "coalesce": true, "debounce_max": "5m"}`)
	if _, err := ParseNewRules(rules); !errors.Is(err, store.ErrInvalid) || !strings.Contains(RulesMessage(err), "debounce_max needs debounce") {
		t.Errorf("new rules with debounce_max alone: %v, want ErrInvalid saying debounce_max needs debounce", err)
	}
	r, err := ParseRules(rules)
	if err != nil {
		t.Fatalf("stored rules with debounce_max alone: %v", err)
	}
	if d := r.Apply("", []byte(`{"a": "x"}`)); d.Options.Key != "x" || !d.Options.Coalesce {
		t.Errorf("stored rules with debounce_max alone apply as %+v", d)
	}
	if _, err := ParseNewRules([]byte(`{"key": "{/a}", "coalesce": true, "debounce": "1m", "debounce_max": "5m"}`)); err != nil {
		t.Errorf("new rules with debounce and debounce_max: %v", err)
	}
}

func TestRulesApply(t *testing.T) {
	r, err := ParseRules([]byte(`{"filter": {"events": ["pull_request"], "actions": ["opened", "synchronize"],
		"match": {"/pull_request/draft": false, "/repository/id": 7}},
		"key": "{/repository/full_name}#{/pull_request/number}", "coalesce": true, "debounce": "30s", "priority": 4}`))
	if err != nil {
		t.Fatal(err)
	}
	pr := func(action string, draft bool) []byte {
		return []byte(fmt.Sprintf(`{"action": %q, "repository": {"id": 7, "full_name": "octo/repo"},
			"pull_request": {"number": 42, "draft": %v}}`, action, draft))
	}
	for _, c := range []struct {
		event    string
		body     []byte
		filtered bool
	}{
		{"pull_request", pr("opened", false), false},
		{"pull_request", pr("closed", false), true},
		{"pull_request", pr("synchronize", true), true},
		{"push", pr("opened", false), true},
		{"pull_request", []byte(`not json`), true},
	} {
		d := r.Apply(c.event, c.body)
		if d.Filtered != c.filtered {
			t.Errorf("%s %s: filtered %v, want %v", c.event, c.body, d.Filtered, c.filtered)
		}
	}
	d := r.Apply("pull_request", pr("opened", false))
	want := store.TodoOptions{Key: "octo/repo#42", Coalesce: true, Debounce: 30 * time.Second, Priority: 4}
	if d.Options != want {
		t.Fatalf("options %+v, want %+v", d.Options, want)
	}
	// A body without the key's pointers makes a keyless todo, never coalesced.
	k, _ := ParseRules([]byte(`{"key": "{/pull_request/number}", "coalesce": true, "priority": 2}`))
	if d := k.Apply("push", []byte(`{"ref": "main"}`)); d.Filtered || d.Options != (store.TodoOptions{Priority: 2}) {
		t.Fatalf("keyless: %+v", d)
	}
}

// Over real HTTP: a delivery the filter drops is verified, recorded (and
// deduplicated) as a filtered event, answered 202, and makes no todo; kept
// deliveries of one pull request fold into one pending todo.
func TestReceiverAppliesWebhookRules(t *testing.T) {
	ctx := context.Background()
	r := newRig(t, ReceiverOptions{})
	hook, secret := r.webhook("github", "prs")
	rules := []byte(`{"filter": {"actions": ["opened", "synchronize"]},
		"key": "{/repository/full_name}#{/pull_request/number}", "coalesce": true}`)
	if _, err := r.store.SetWebhookRules(ctx, hook.ID, 0, rules, "human:1"); err != nil {
		t.Fatal(err)
	}
	send := func(delivery, action string) reply {
		body := []byte(fmt.Sprintf(`{"action": %q, "repository": {"full_name": "octo/repo"}, "pull_request": {"number": 42}}`, action))
		h := r.signed("github", secret, delivery, body)
		h.Set("X-GitHub-Event", "pull_request")
		return r.post(hook.Token, h, body)
	}
	if rep := send("d1", "closed"); rep.status != http.StatusAccepted || rep.body["filtered"] != true || rep.body["todo_id"] != nil {
		t.Fatalf("filtered delivery: %d %v", rep.status, rep.body)
	}
	if rep := send("d1", "closed"); rep.status != http.StatusOK || rep.body["duplicate"] != true {
		t.Fatalf("its redelivery: %d %v", rep.status, rep.body)
	}
	first := send("d2", "opened")
	second := send("d3", "synchronize")
	if first.status != http.StatusAccepted || second.body["coalesced"] != true || id(second.body["todo_id"]) != id(first.body["todo_id"]) {
		t.Fatalf("kept deliveries: %v then %v, want the second folded into the first", first.body, second.body)
	}
	if n := r.count("todos"); n != 1 {
		t.Fatalf("%d todos, want 1", n)
	}
	events, err := r.store.ListWebhookEvents(ctx, store.EventFilter{WebhookID: hook.ID})
	if err != nil || len(events) != 3 || !events[2].Filtered || events[2].TodoID != 0 ||
		events[0].TodoID != id(first.body["todo_id"]) || events[1].TodoID != events[0].TodoID {
		t.Fatalf("events %+v (%v): want the filtered one without a todo, the two kept ones linked to one todo", events, err)
	}
	td, err := r.store.Todo(ctx, events[0].TodoID)
	if err != nil || td.Key != "octo/repo#42" || td.Coalesced != 1 || td.Source.EventID != events[0].ID ||
		!strings.Contains(td.Payload, "synchronize") {
		t.Fatalf("todo %+v (%v): want key octo/repo#42, coalesced 1, the newest event's payload", td, err)
	}
	flows, err := r.store.QueueFlows(ctx)
	if err != nil || len(flows) != 1 || flows[0].Filtered != 1 || flows[0].Coalesced != 1 {
		t.Fatalf("flows %+v (%v)", flows, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.outcome[OutcomeFiltered] != 1 {
		t.Fatalf("outcomes %v, want one filtered", r.outcome)
	}
}

// Rules changed after the receiver cached the webhook apply to the next delivery.
func TestReceiverRulesChangeApplyAtOnce(t *testing.T) {
	ctx := context.Background()
	r := newRig(t, ReceiverOptions{})
	hook, secret := r.webhook("github", "prs")
	post := func(delivery string) reply {
		body := []byte(`{"action": "closed", "n": "` + delivery + `"}`) // GitHub's body is its replay key
		h := r.signed("github", secret, delivery, body)
		h.Set("X-GitHub-Event", "pull_request")
		return r.post(hook.Token, h, body)
	}
	if rep := post("a"); rep.body["filtered"] == true {
		t.Fatalf("filtered without rules: %v", rep.body)
	}
	if _, err := r.store.SetWebhookRules(ctx, hook.ID, 0, []byte(`{"filter": {"actions": ["opened"]}}`), "human:1"); err != nil {
		t.Fatal(err)
	}
	if rep := post("b"); rep.body["filtered"] != true {
		t.Fatalf("the new rules were not applied: %v", rep.body)
	}
}

// A replay takes the key and priority of its webhook's rules, even for a
// delivery the filter drops, and nothing of coalescing or debounce.
func TestReplayOptions(t *testing.T) {
	rules := []byte(`{"filter": {"events": ["push"]}, "key": "pr#{/number}", "coalesce": true, "debounce": "1m", "priority": -2}`)
	if o := ReplayOptions(rules, []byte(`{"number": 7}`)); o != (store.TodoOptions{Key: "pr#7", Priority: -2}) {
		t.Errorf("replay options %+v, want key pr#7 priority -2 alone", o)
	}
	if o := ReplayOptions(rules, []byte(`{}`)); o != (store.TodoOptions{Priority: -2}) {
		t.Errorf("replay options without the key's pointer: %+v", o)
	}
	for _, none := range []string{``, `{"key": "{nope"}`} {
		if o := ReplayOptions([]byte(none), []byte(`{"number": 7}`)); o != (store.TodoOptions{}) {
			t.Errorf("replay options of rules %q: %+v, want none", none, o)
		}
	}
}
