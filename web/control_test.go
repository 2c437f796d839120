package web

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/store"
)

// Cancel from the todo page: the todo ends, marked cancelled, audited under the
// operator; a second cancel is a conflict that changes nothing.
func TestCancelTodoFromTheBoard(t *testing.T) {
	f := newFixture(t, Options{})
	cookie, csrf := f.login()
	td := f.claimed("inbox")
	_, page := f.get(fmt.Sprintf("/todos/%d", td.ID), cookie)
	if !strings.Contains(page, fmt.Sprintf(`action="/todos/%d/cancel"`, td.ID)) {
		t.Fatal("the todo page of a claimed todo has no Cancel button")
	}
	if res, _ := f.post(fmt.Sprintf("/todos/%d/cancel", td.ID), cookie, url.Values{}); res.StatusCode != http.StatusForbidden {
		t.Fatalf("cancel without the CSRF token: %d, want 403", res.StatusCode)
	}
	res, _ := f.post(fmt.Sprintf("/todos/%d/cancel", td.ID), cookie, url.Values{csrfField: {csrf}})
	if body := f.follow(res, cookie); !strings.Contains(body, "Cancelled: the todo has ended") || !strings.Contains(body, "badge cancelled") {
		t.Fatal("the todo page does not confirm the cancel")
	}
	got := f.todo(td.ID)
	if got.State != store.StateFailed || got.CancelledBy != store.OperatorActor(f.human.ID) {
		t.Fatalf("after cancel: %s cancelled by %q", got.State, got.CancelledBy)
	}
	rows := f.audited(fmt.Sprintf("todo:%d", td.ID))
	if rows[0].Action != "todo.cancel" || rows[0].Actor != store.OperatorActor(f.human.ID) {
		t.Fatalf("audit %+v", rows[0])
	}
	res, body := f.post(fmt.Sprintf("/todos/%d/cancel", td.ID), cookie, url.Values{csrfField: {csrf}})
	if res.StatusCode != http.StatusConflict || !strings.Contains(body, "cancelled by") {
		t.Fatalf("second cancel: %d", res.StatusCode)
	}
	if n := len(f.audited(fmt.Sprintf("todo:%d", td.ID))); n != len(rows) {
		t.Fatalf("a refused cancel wrote audit rows: %d, want %d", n, len(rows))
	}
}

// Pause and resume from the board: the card says paused, the toolbar offers
// Resume, claims pass the queue by until it is resumed.
func TestPauseQueueFromTheBoard(t *testing.T) {
	f := newFixture(t, Options{})
	cookie, csrf := f.login()
	f.addTodo("team/deploys", `{}`)
	_, page := f.get("/?queue=team/deploys", cookie)
	if !strings.Contains(page, `id="pause-queue"`) {
		t.Fatal("the board of one queue offers no Pause")
	}
	res, _ := f.post("/queue/pause", cookie, url.Values{csrfField: {csrf}, "queue": {"team/deploys"}})
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("pause: %d", res.StatusCode)
	}
	body := f.follow(res, cookie)
	if !strings.Contains(body, "Paused: the queue") || !strings.Contains(body, `id="resume-queue"`) || !strings.Contains(body, "badge paused") {
		t.Fatal("the board does not show the queue paused")
	}
	if _, ok, _ := f.st.ClaimNext(context.Background(), "agent:w", []string{"team/deploys"}, time.Minute); ok {
		t.Fatal("a paused queue's todo was claimed")
	}
	if res, _ := f.post("/queue/pause", cookie, url.Values{csrfField: {csrf}, "queue": {"team/deploys"}}); res.StatusCode != http.StatusConflict {
		t.Fatalf("second pause: %d, want 409", res.StatusCode)
	}
	if res, _ := f.post("/queue/pause", cookie, url.Values{csrfField: {csrf}, "queue": {"no spaces"}}); res.StatusCode != http.StatusBadRequest {
		t.Fatalf("pause of a bad name: %d, want 400", res.StatusCode)
	}
	res, _ = f.post("/queue/resume", cookie, url.Values{csrfField: {csrf}, "queue": {"team/deploys"}})
	if body := f.follow(res, cookie); !strings.Contains(body, "Resumed:") || strings.Contains(body, "badge paused") {
		t.Fatal("the board does not show the queue resumed")
	}
	if _, ok, _ := f.st.ClaimNext(context.Background(), "agent:w", []string{"team/deploys"}, time.Minute); !ok {
		t.Fatal("a resumed queue's todo was not claimable")
	}
}

// The board lists a todo awaiting approval with its question; the operator
// approves with a comment; a second decision is refused and changes nothing.
func TestApproveFromTheBoard(t *testing.T) {
	f := newFixture(t, Options{})
	cookie, csrf := f.login()
	td := f.claimed("deploys")
	if _, err := f.st.RequestApproval(context.Background(), store.Ack{ID: td.ID, Owner: "agent:worker", LeaseSeq: td.LeaseSeq},
		"Drop the <old> table?"); err != nil {
		t.Fatal(err)
	}
	_, page := f.get("/", cookie)
	if !strings.Contains(page, `id="approvals"`) || !strings.Contains(page, "Drop the &lt;old&gt; table?") ||
		!strings.Contains(page, fmt.Sprintf(`action="/todos/%d/decide"`, td.ID)) {
		t.Fatal("the board does not list the todo awaiting approval with its question")
	}
	decide := func(decision string) (*http.Response, string) {
		return f.post(fmt.Sprintf("/todos/%d/decide", td.ID), cookie,
			url.Values{csrfField: {csrf}, "decision": {decision}, "comment": {"after 18:00 only"}, "return": {"/"}})
	}
	if res, _ := decide("maybe"); res.StatusCode != http.StatusBadRequest {
		t.Fatalf("decision maybe: %d, want 400", res.StatusCode)
	}
	res, _ := decide("approve")
	if body := f.follow(res, cookie); !strings.Contains(body, "Approved:") || strings.Contains(body, `id="approvals"`) {
		t.Fatal("the board does not confirm the approval, or still lists the todo")
	}
	got := f.todo(td.ID)
	if got.State != store.StatePending || got.Approval == nil || got.Approval.State != store.ApprovalApproved ||
		got.Approval.Comment != "after 18:00 only" || got.Approval.By != store.OperatorActor(f.human.ID) {
		t.Fatalf("after approval: %s %+v", got.State, got.Approval)
	}
	rows := f.audited(fmt.Sprintf("todo:%d", td.ID))
	if rows[0].Action != "todo.approve" || rows[0].Actor != store.OperatorActor(f.human.ID) {
		t.Fatalf("audit %+v", rows[0])
	}
	if res, _ := decide("deny"); res.StatusCode != http.StatusConflict {
		t.Fatalf("a second decision: %d, want 409", res.StatusCode)
	}
	if after := f.todo(td.ID); after.Approval.State != store.ApprovalApproved || len(f.audited(fmt.Sprintf("todo:%d", td.ID))) != len(rows) {
		t.Fatalf("the refused decision changed the todo: %+v", after.Approval)
	}
	_, page = f.get(fmt.Sprintf("/todos/%d", td.ID), cookie)
	if !strings.Contains(page, "Approval: approved") || !strings.Contains(page, "after 18:00 only") {
		t.Fatal("the todo page does not show the decision")
	}
}

// The endpoint form shows add_todo, checked when granted, so that saving the
// form keeps it.
func TestEndpointFormShowsAddTodo(t *testing.T) {
	f := newFixture(t, Options{})
	cookie, _ := f.login()
	verbs := append(store.AllVerbs(), "add_todo")
	ep, _, err := f.st.CreateEndpoint(context.Background(), "triager",
		store.EndpointSpec{Queues: &[]string{"inbox"}, Verbs: &verbs, AddQueues: &[]string{"review"}}, "human:test")
	if err != nil {
		t.Fatal(err)
	}
	_, page := f.get(fmt.Sprintf("/endpoints/%d", ep.ID), cookie)
	if !strings.Contains(page, `value="add_todo" checked`) {
		t.Fatal("the endpoint form does not show add_todo granted")
	}
}
