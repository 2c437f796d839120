package cli

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/store"
)

// queue pause, list and resume; a paused queue's todos are not claimable and its
// listing says why they wait.
func TestQueuePauseListResume(t *testing.T) {
	db := filepath.Join(t.TempDir(), "sb.db")
	ctx := context.Background()
	st := openRW(t, db)
	if _, err := st.AddTodo(ctx, store.NewTodo{Queue: "deploys", Payload: "x"}); err != nil {
		t.Fatal(err)
	}
	code, out, errs := cli(t, "", "queue", "pause", "deploys", "--db", db)
	if code != 0 || !strings.Contains(out, "queue deploys is paused") {
		t.Fatalf("pause: exit %d, %q %q", code, out, errs)
	}
	if code, _, errs = cli(t, "", "queue", "pause", "--db", db, "deploys"); code != 1 || !strings.Contains(errs, "paused already") {
		t.Fatalf("second pause: exit %d, %q", code, errs)
	}
	if code, _, errs = cli(t, "", "queue", "pause", "bad name", "--db", db); code != 2 || !strings.Contains(errs, "not a valid queue name") {
		t.Fatalf("pause of a bad name: exit %d, %q", code, errs)
	}
	if _, ok, err := st.ClaimNext(ctx, "agent:w", []string{"deploys"}, time.Minute); ok || err != nil {
		t.Fatalf("claim on a paused queue: %v, %v", ok, err)
	}
	code, out, errs = cli(t, "", "queue", "list", "--db", db)
	if code != 0 || !strings.Contains(out, "deploys") || !strings.Contains(out, "paused by human:cli") {
		t.Fatalf("list: exit %d, %q %q", code, out, errs)
	}
	code, out, _ = cli(t, "", "todo", "list", "--db", db)
	if code != 0 || !strings.Contains(out, "pending (paused)") {
		t.Fatalf("todo list on a paused queue: exit %d, %q", code, out)
	}
	code, out, errs = cli(t, "", "queue", "resume", "deploys", "--db", db)
	if code != 0 || !strings.Contains(out, "running again") {
		t.Fatalf("resume: exit %d, %q %q", code, out, errs)
	}
	if code, _, errs = cli(t, "", "queue", "resume", "deploys", "--db", db); code != 1 || !strings.Contains(errs, "not paused") {
		t.Fatalf("second resume: exit %d, %q", code, errs)
	}
	code, out, _ = cli(t, "", "queue", "list", "--json", "--db", db)
	var rows []queueRow
	if err := json.Unmarshal([]byte(out), &rows); code != 0 || err != nil || len(rows) != 1 || rows[0].Paused || rows[0].Pending != 1 {
		t.Fatalf("list --json: exit %d, %q (%v)", code, out, err)
	}
	if _, ok, err := st.ClaimNext(ctx, "agent:w", []string{"deploys"}, time.Minute); !ok || err != nil {
		t.Fatalf("claim after resume: %v, %v", ok, err)
	}
}

// todo cancel ends a claimed todo; a second cancel, or one of no such todo, fails
// and says why.
func TestTodoCancel(t *testing.T) {
	db := filepath.Join(t.TempDir(), "sb.db")
	ctx := context.Background()
	st := openRW(t, db)
	td, err := st.AddTodo(ctx, store.NewTodo{Queue: "inbox", Payload: "x"})
	if err == nil {
		td, err = st.Claim(ctx, store.Ack{ID: td.ID, Owner: "agent:bot"}, time.Hour)
	}
	if err != nil {
		t.Fatal(err)
	}
	id := strconv.FormatInt(td.ID, 10)
	code, out, errs := cli(t, "", "todo", "cancel", id, "--db", db)
	if code != 0 || !strings.Contains(out, "todo "+id+" on inbox is cancelled") {
		t.Fatalf("cancel: exit %d, %q %q", code, out, errs)
	}
	if code, _, errs = cli(t, "", "todo", "cancel", id, "--db", db); code != 1 || !strings.Contains(errs, "cancelled by human:cli") {
		t.Fatalf("second cancel: exit %d, %q", code, errs)
	}
	if code, _, errs = cli(t, "", "todo", "cancel", "999", "--db", db); code != 1 || !strings.Contains(errs, "todo 999") {
		t.Fatalf("cancel of no todo: exit %d, %q", code, errs)
	}
	_, err = st.Complete(ctx, store.Ack{ID: td.ID, Owner: "agent:bot", LeaseSeq: td.LeaseSeq}, "done")
	if err == nil || !strings.Contains(err.Error(), "cancelled by human:cli") {
		t.Fatalf("the worker's complete after cancel: %v", err)
	}
	code, out, _ = cli(t, "", "todo", "list", "--db", db)
	if code != 0 || !strings.Contains(out, "failed (cancelled)") {
		t.Fatalf("todo list: exit %d, %q", code, out)
	}
}

// endpoint create --add-queues grants add_todo with them; update changes them;
// a bad queue name is a usage mistake that stores nothing.
func TestEndpointAddQueues(t *testing.T) {
	db := filepath.Join(t.TempDir(), "sb.db")
	code, out, errs := cli(t, "", "endpoint", "create", "--agent", "triager", "--queues", "inbox",
		"--add-queues", "review,team/ops", "--json", "--db", db)
	var ep store.Endpoint
	if err := json.Unmarshal([]byte(out), &ep); code != 0 || err != nil {
		t.Fatalf("create: exit %d, %q %q (%v)", code, out, errs, err)
	}
	if len(ep.AddQueues) != 2 || ep.AddQueues[1] != "team/ops" || !slices.Contains(ep.Verbs, "add_todo") {
		t.Fatalf("created endpoint: add queues %v, verbs %v", ep.AddQueues, ep.Verbs)
	}
	code, _, errs = cli(t, "", "endpoint", "update", strconv.FormatInt(ep.ID, 10), "--add-queues", "bad name", "--db", db)
	if code != 2 || !strings.Contains(errs, "not a valid queue name") {
		t.Fatalf("update with a bad name: exit %d, %q", code, errs)
	}
	code, out, errs = cli(t, "", "endpoint", "update", strconv.FormatInt(ep.ID, 10), "--add-queues", "review", "--json", "--db", db)
	if err := json.Unmarshal([]byte(out), &ep); code != 0 || err != nil || len(ep.AddQueues) != 1 {
		t.Fatalf("update: exit %d, %q %q (%v)", code, out, errs, err)
	}
	_, out, _ = cli(t, "", "endpoint", "create", "--agent", "plain", "--queues", "inbox", "--json", "--db", db)
	if err := json.Unmarshal([]byte(out), &ep); err != nil || slices.Contains(ep.Verbs, "add_todo") {
		t.Fatalf("an endpoint created without --add-queues: verbs %v (%v)", ep.Verbs, err)
	}
}

// queue list counts a todo awaiting approval there and not among the claimed,
// in the table and in --json alike (--json counted it in both).
func TestQueueListCountsAwaitingApprovalOnce(t *testing.T) {
	db := filepath.Join(t.TempDir(), "sb.db")
	ctx := context.Background()
	st := openRW(t, db)
	for range 3 {
		if _, err := st.AddTodo(ctx, store.NewTodo{Queue: "deploys", Payload: "x"}); err != nil {
			t.Fatal(err)
		}
	}
	var held []store.Todo
	for range 2 {
		td, ok, err := st.ClaimNext(ctx, "agent:w", []string{"deploys"}, time.Minute)
		if !ok || err != nil {
			t.Fatalf("claim: %v, %v", ok, err)
		}
		held = append(held, td)
	}
	if _, err := st.RequestApproval(ctx, store.Ack{ID: held[0].ID, Owner: "agent:w", LeaseSeq: held[0].LeaseSeq}, "ship it?"); err != nil {
		t.Fatal(err)
	}
	code, out, errs := cli(t, "", "queue", "list", "--json", "--db", db)
	var rows []queueRow
	if err := json.Unmarshal([]byte(out), &rows); code != 0 || err != nil || len(rows) != 1 {
		t.Fatalf("list --json: exit %d, %q %q (%v)", code, out, errs, err)
	}
	if r := rows[0]; r.Pending != 1 || r.Claimed != 1 || r.AwaitingApproval != 1 {
		t.Errorf("list --json: pending %d, claimed %d, awaiting approval %d; want 1 of each", r.Pending, r.Claimed, r.AwaitingApproval)
	}
	code, out, errs = cli(t, "", "queue", "list", "--db", db)
	if fields := strings.Fields(strings.Split(strings.TrimSpace(out), "\n")[1]); code != 0 || !slices.Equal(fields[:5], []string{"deploys", "1", "1", "1", "0"}) {
		t.Errorf("list: exit %d, %q %q; want deploys 1 1 1 0", code, out, errs)
	}
}
