package web

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

func TestTodoPage(t *testing.T) {
	f := newFixture(t, Options{})
	cookie, _ := f.login()
	td := f.claimed("inbox")
	res, body := f.get(fmt.Sprintf("/todos/%d", td.ID), cookie)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("status %d", res.StatusCode)
	}
	for _, want := range []string{
		"Todo #" + fmt.Sprint(td.ID),
		"{\n  &#34;n&#34;: 1\n}", // pretty-printed JSON payload, escaped
		"agent:worker",           // lease owner
		"1 of 5",                 // attempts
		"todo.claim",             // audit trail
		"todo.add",
		`action="/todos/` + fmt.Sprint(td.ID) + `/release"`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("todo page lacks %q", want)
		}
	}

	// A payload that is not JSON is shown as it is, escaped.
	raw := f.addTodo("inbox", "<b>not json</b>")
	_, body = f.get(fmt.Sprintf("/todos/%d", raw.ID), cookie)
	if !strings.Contains(body, "&lt;b&gt;not json&lt;/b&gt;") || strings.Contains(body, "<b>not json") {
		t.Fatal("raw payload not shown escaped")
	}

	for _, path := range []string{"/todos/999999", "/todos/abc", "/todos/-1"} {
		if res, _ := f.get(path, cookie); res.StatusCode != http.StatusNotFound {
			t.Errorf("%s: status %d, want 404", path, res.StatusCode)
		}
	}
}

func TestReleaseTodo(t *testing.T) {
	f := newFixture(t, Options{})
	cookie, csrf := f.login()
	td := f.claimed("inbox")
	res, _ := f.post(fmt.Sprintf("/todos/%d/release", td.ID), cookie, url.Values{csrfField: {csrf}})
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != fmt.Sprintf("/todos/%d?flash=released", td.ID) {
		t.Fatalf("status %d Location %q", res.StatusCode, res.Header.Get("Location"))
	}
	got := f.todo(td.ID)
	if got.State != "pending" || got.Owner != "" || got.Attempts != 0 {
		t.Fatalf("after release: state %s owner %q attempts %d", got.State, got.Owner, got.Attempts)
	}
	rows := f.audited(fmt.Sprintf("todo:%d", td.ID))
	if rows[0].Action != "todo.release" || rows[0].Actor != humanActor(f.human.ID) {
		t.Fatalf("audit %+v, want todo.release by %s", rows[0], humanActor(f.human.ID))
	}

	// Releasing what is not claimed is a conflict and changes nothing.
	res, body := f.post(fmt.Sprintf("/todos/%d/release", td.ID), cookie, url.Values{csrfField: {csrf}})
	if res.StatusCode != http.StatusConflict || !strings.Contains(body, "not claimed") {
		t.Fatalf("second release: status %d", res.StatusCode)
	}
	if n := len(f.audited(fmt.Sprintf("todo:%d", td.ID))); n != len(rows) {
		t.Fatalf("audit rows %d after a refused release, want %d", n, len(rows))
	}
	if res, _ := f.post("/todos/424242/release", cookie, url.Values{csrfField: {csrf}}); res.StatusCode != http.StatusNotFound {
		t.Fatalf("unknown todo: %d", res.StatusCode)
	}

	// From the board, the action returns to the board's filter.
	td2 := f.claimed("inbox")
	res, _ = f.post(fmt.Sprintf("/todos/%d/release", td2.ID), cookie,
		url.Values{csrfField: {csrf}, "return": {"/?queue=inbox&state=claimed"}})
	if loc := res.Header.Get("Location"); loc != "/?flash=released&queue=inbox&state=claimed" {
		t.Fatalf("Location %q", loc)
	}
	res, _ = f.post(fmt.Sprintf("/todos/%d/release", td2.ID), cookie, url.Values{csrfField: {csrf}, "return": {"//evil.example"}})
	if res.StatusCode != http.StatusConflict {
		t.Fatalf("status %d", res.StatusCode)
	}
}

func TestRetryTodo(t *testing.T) {
	f := newFixture(t, Options{})
	cookie, csrf := f.login()
	td := f.failed("inbox")
	res, _ := f.post(fmt.Sprintf("/todos/%d/retry", td.ID), cookie, url.Values{csrfField: {csrf}})
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("status %d", res.StatusCode)
	}
	if got := f.todo(td.ID); got.State != "pending" || got.Attempts != 0 {
		t.Fatalf("after retry: %s, %d attempts", got.State, got.Attempts)
	}
	if rows := f.audited(fmt.Sprintf("todo:%d", td.ID)); rows[0].Action != "todo.retry" || rows[0].Actor != humanActor(f.human.ID) {
		t.Fatalf("audit %+v", rows[0])
	}
	if res, _ := f.post(fmt.Sprintf("/todos/%d/retry", td.ID), cookie, url.Values{csrfField: {csrf}}); res.StatusCode != http.StatusConflict {
		t.Fatalf("retrying a pending todo: %d, want 409", res.StatusCode)
	}
}

func TestAddTodo(t *testing.T) {
	f := newFixture(t, Options{})
	cookie, csrf := f.login()
	res, _ := f.post("/todos", cookie, url.Values{csrfField: {csrf}, "queue": {"inbox"}, "payload": {`{"task":"hello"}`}})
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("status %d", res.StatusCode)
	}
	var id int64
	if _, err := fmt.Sscanf(res.Header.Get("Location"), "/todos/%d?flash=added", &id); err != nil {
		t.Fatalf("Location %q: %v", res.Header.Get("Location"), err)
	}
	got := f.todo(id)
	if got.Queue != "inbox" || got.Payload != `{"task":"hello"}` || got.CreatedBy != humanActor(f.human.ID) {
		t.Fatalf("added %+v", got)
	}
	if rows := f.audited(fmt.Sprintf("todo:%d", id)); rows[0].Action != "todo.add" || rows[0].Actor != humanActor(f.human.ID) {
		t.Fatalf("audit %+v", rows[0])
	}
	for name, form := range map[string]url.Values{
		"bad queue":     {"queue": {"no spaces"}, "payload": {"x"}},
		"empty queue":   {"queue": {""}, "payload": {"x"}},
		"payload > 1MB": {"queue": {"inbox"}, "payload": {strings.Repeat("x", maxPayload+1)}},
	} {
		form.Set(csrfField, csrf)
		before := f.countTodos()
		if res, _ := f.post("/todos", cookie, form); res.StatusCode != http.StatusBadRequest {
			t.Errorf("%s: status %d, want 400", name, res.StatusCode)
		}
		if f.countTodos() != before {
			t.Errorf("%s: a todo was added", name)
		}
	}
}
