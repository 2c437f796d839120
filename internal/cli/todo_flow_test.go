package cli

import (
	"context"
	"encoding/json"
	"github.com/switchboardhq/switchboard/internal/testkit"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/store"
)

// todo add's flow control: a key, a priority, a delay, coalescing; bad values
// are refused with the reason and add nothing.
func TestTodoAddFlowControl(t *testing.T) {
	db := filepath.Join(t.TempDir(), "sb.db")
	code, out, errs := cli(t, "", "todo", "add", "--queue", "prs", "--payload", "v1", "--key", "octo/repo#42",
		"--coalesce", "--priority", "5", "--json", "--db", db)
	var first store.Todo
	if err := json.Unmarshal([]byte(out), &first); code != 0 || err != nil || first.Key != "octo/repo#42" || first.Priority != 5 {
		t.Fatalf("add --key --priority: exit %d, %q %q (%v)", code, out, errs, err)
	}
	code, out, errs = cli(t, "", "todo", "add", "--queue", "prs", "--payload", "v2", "--key", "octo/repo#42",
		"--coalesce", "--db", db)
	if want := "folded into todo " + itoa(first.ID) + " on prs (pending; coalesced 1)"; code != 0 || !strings.Contains(out, want) {
		t.Fatalf("second add --coalesce: exit %d, %q %q, want %q", code, out, errs, want)
	}
	code, out, errs = cli(t, "", "todo", "add", "--queue", "prs", "--payload", "later", "--delay", "10m", "--json", "--db", db)
	var later store.Todo
	if err := json.Unmarshal([]byte(out), &later); code != 0 || err != nil ||
		later.AvailableAt.Sub(later.CreatedAt) != 10*time.Minute {
		t.Fatalf("add --delay 10m: exit %d, %q %q (%v)", code, out, errs, err)
	}
	for _, bad := range [][]string{
		{"--key", strings.Repeat("k", store.MaxKeyBytes+1)},
		{"--priority", "5000"},
		{"--delay", "-1s"},
		{"--coalesce"},
		{"--key", "k", "--debounce", "1m"},
		{"--key", "k", "--coalesce", "--debounce-max", "5m"},
	} {
		args := append([]string{"todo", "add", "--queue", "prs", "--payload", "x", "--db", db}, bad...)
		code, out, errs = cli(t, "", args...)
		if code != 2 || out != "" || errs == "" {
			t.Errorf("todo add %v: exit %d, %q %q, want a usage error", bad, code, out, errs)
		}
	}
	st := openRW(t, db)
	todos, err := st.ListTodos(context.Background(), store.TodoFilter{})
	if err != nil || len(todos) != 2 {
		t.Fatalf("%d todos (%v), want the folded one and the delayed one", len(todos), err)
	}
}

// todo list shows each todo's key (cut when long, marked when it waits behind
// its key) and priority; --key lists one key's todos.
func TestTodoListShowsKeysAndPriorities(t *testing.T) {
	db := filepath.Join(t.TempDir(), "sb.db")
	long := "octo/" + strings.Repeat("r", 60) + "#7"
	for _, add := range [][]string{
		{"--key", "octo/repo#42", "--priority", "7"},
		{"--key", "octo/repo#42"},
		{"--key", long, "--priority", "-3"},
		{},
	} {
		args := append([]string{"todo", "add", "--queue", "prs", "--payload", "x", "--db", db}, add...)
		if code, out, errs := cli(t, "", args...); code != 0 {
			t.Fatalf("todo add %v: exit %d, %q %q", add, code, out, errs)
		}
	}
	code, out, errs := cli(t, "", "todo", "list", "--queue", "prs", "--db", db)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 5 {
		t.Fatalf("todo list: exit %d, %q %q, want a header and 4 rows", code, out, errs)
	}
	if f := strings.Fields(lines[0]); len(f) < 5 || f[3] != "KEY" || f[4] != "PRI" {
		t.Errorf("header %q: want KEY and PRI after STATE", lines[0])
	}
	for i, want := range [][]string{ // newest first
		{"pending", "-", "0"},
		{"pending", "octo/" + strings.Repeat("r", 26) + "…", "-3"},
		{"pending", "octo/repo#42", "(waits)", "0"},
		{"pending", "octo/repo#42", "7"},
	} {
		if f := strings.Fields(lines[i+1]); len(f) < 2+len(want) || !slices.Equal(f[2:2+len(want)], want) {
			t.Errorf("row %d: %q, want %q after the id and queue", i, lines[i+1], want)
		}
	}
	code, out, errs = cli(t, "", "todo", "list", "--key", "octo/repo#42", "--db", db)
	if n := strings.Count(out, "octo/repo#42"); code != 0 || n != 2 {
		t.Errorf("todo list --key: exit %d, %q %q, want the key's 2 todos", code, out, errs)
	}
}

// todo show prints the todo whole, its flow control and the human gate too: its
// key (and that it waits behind it), priority and folds; a delay as a delay, not
// a retry's backoff; and the question a todo awaiting approval asks, which the
// board lists and a human at the shell would otherwise see as a bare "claimed".
func TestTodoShowsKeyPriorityDelayAndApproval(t *testing.T) {
	db := filepath.Join(t.TempDir(), "sb.db")
	st := openRW(t, db)
	ctx := t.Context()
	opts := store.TodoOptions{Key: "octo/repo#42", Priority: 7, Coalesce: true}
	front, err := st.AddTodo(ctx, store.NewTodo{Queue: "prs", Payload: "a", Options: opts})
	if err != nil {
		t.Fatal(err)
	}
	td, err := st.Claim(ctx, store.Ack{ID: front.ID, Owner: "agent:bot"}, time.Minute)
	if err == nil {
		_, err = st.RequestApproval(ctx, store.Ack{ID: front.ID, Owner: "agent:bot", LeaseSeq: td.LeaseSeq}, "deploy to prod?")
	}
	var waiting store.Todo
	for _, p := range []string{"b", "c"} {
		if err == nil {
			waiting, err = st.AddTodo(ctx, store.NewTodo{Queue: "prs", Payload: p, Options: opts})
		}
	}
	var later store.Todo
	if err == nil {
		later, err = st.AddTodo(ctx, store.NewTodo{Queue: "prs", Payload: "d", Options: store.TodoOptions{Delay: time.Hour}})
	}
	if err != nil {
		t.Fatal(err)
	}
	for id, wants := range map[int64][]string{
		front.ID:   {"key:        octo/repo#42\n", "priority:   7\n", "awaiting approval: agent:bot asks: deploy to prod?\n"},
		waiting.ID: {"key:        octo/repo#42 (waits behind an earlier todo of its key)\n", "coalesced:  1 later todo folded into it\n"},
		later.ID:   {"delayed:    claimable at "},
	} {
		code, out, errs := cli(t, "", "todo", "show", itoa(id), "--db", db)
		for _, want := range wants {
			if code != 0 || !strings.Contains(out, want) {
				t.Errorf("show %d: exit %d, want %q in\n%s%s", id, code, want, out, errs)
			}
		}
		if strings.Contains(out, "backs off") {
			t.Errorf("show %d: a todo never tried is said to back off:\n%s", id, out)
		}
	}
}

// todo retry of a dead letter whose key has a todo at its front now says that it
// waits behind it, as todo add does: "back on prs" alone had the user wait for
// a todo that no agent could claim yet.
func TestTodoRetrySaysTheTodoWaitsBehindItsKey(t *testing.T) {
	db := filepath.Join(t.TempDir(), "sb.db")
	st := openRW(t, db)
	ctx := t.Context()
	opts := store.TodoOptions{Key: "octo/repo#42"}
	dead, err := st.AddTodo(ctx, store.NewTodo{Queue: "prs", Payload: "a", MaxAttempts: 1, Options: opts})
	if err == nil {
		_, err = st.AddTodo(ctx, store.NewTodo{Queue: "prs", Payload: "b", Options: opts})
	}
	var td store.Todo
	if err == nil {
		td, err = st.Claim(ctx, store.Ack{ID: dead.ID, Owner: "agent:bot"}, time.Minute)
	}
	if err == nil {
		_, err = st.Fail(ctx, store.Ack{ID: dead.ID, Owner: "agent:bot", LeaseSeq: td.LeaseSeq}, "boom", false)
	}
	if err != nil {
		t.Fatal(err)
	}
	code, out, errs := cli(t, "", "todo", "retry", itoa(dead.ID), "--db", db)
	want := "todo " + itoa(dead.ID) + " is back on prs, attempts reset; it waits behind an earlier todo of key octo/repo#42\n"
	if code != 0 || out != want {
		t.Fatalf("retry: exit %d, %q %q, want %q", code, out, errs, want)
	}
}

// A decided todo held for the worker that asked is "held" in todo show even when
// an earlier attempt failed: Decide leaves attempts above 0 then, and show said
// it "backs off", sending the reader to look for an error that is not why it
// waits.
func TestTodoShowSaysAHeldTodoIsHeldAfterAFailedAttempt(t *testing.T) {
	db := filepath.Join(t.TempDir(), "sb.db")
	// An hour ahead, so that the hold is still on when show reads it.
	clock := testkit.NewClock(time.Now().Add(time.Hour))
	st, err := store.Open(t.Context(), db, store.Options{Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := t.Context()
	td, err := st.AddTodo(ctx, store.NewTodo{Queue: "deploy", Payload: "a"})
	if err == nil {
		td, err = st.Claim(ctx, store.Ack{ID: td.ID, Owner: "agent:bot"}, time.Minute)
	}
	if err == nil {
		_, err = st.Fail(ctx, store.Ack{ID: td.ID, Owner: "agent:bot", LeaseSeq: td.LeaseSeq}, "flaky", true)
	}
	clock.Add(time.Minute)
	if err == nil {
		td, err = st.Claim(ctx, store.Ack{ID: td.ID, Owner: "agent:bot"}, time.Minute)
	}
	if err == nil {
		_, err = st.RequestApproval(ctx, store.Ack{ID: td.ID, Owner: "agent:bot", LeaseSeq: td.LeaseSeq}, "deploy?")
	}
	var decided store.Todo
	if err == nil {
		decided, err = st.Decide(ctx, td.ID, true, "go", "human:alice")
	}
	if err != nil {
		t.Fatal(err)
	}
	if decided.Attempts == 0 {
		t.Fatalf("decided todo has attempts 0; the case this test is about needs more")
	}
	code, out, errs := cli(t, "", "todo", "show", itoa(td.ID), "--db", db)
	if code != 0 || !strings.Contains(out, "held:       for the worker that asked for approval") || strings.Contains(out, "backs off") {
		t.Errorf("show of a todo held for its asker after a failed attempt: exit %d\n%s%s", code, out, errs)
	}
}
