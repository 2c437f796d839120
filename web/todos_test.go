package web

import (
	"fmt"
	"html"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/store"
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
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != fmt.Sprintf("/todos/%d", td.ID) {
		t.Fatalf("status %d Location %q", res.StatusCode, res.Header.Get("Location"))
	}
	if body := f.follow(res, cookie); !strings.Contains(body, `<div class="flash ok" role="status">Released:`) {
		t.Fatal("the todo page does not confirm the release")
	}
	got := f.todo(td.ID)
	if got.State != "pending" || got.Owner != "" || got.Attempts != 0 {
		t.Fatalf("after release: state %s owner %q attempts %d", got.State, got.Owner, got.Attempts)
	}
	rows := f.audited(fmt.Sprintf("todo:%d", td.ID))
	if rows[0].Action != "todo.release" || rows[0].Actor != store.OperatorActor(f.human.ID) {
		t.Fatalf("audit %+v, want todo.release by %s", rows[0], store.OperatorActor(f.human.ID))
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
	if loc := res.Header.Get("Location"); loc != "/?queue=inbox&state=claimed" {
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
	if rows := f.audited(fmt.Sprintf("todo:%d", td.ID)); rows[0].Action != "todo.retry" || rows[0].Actor != store.OperatorActor(f.human.ID) {
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
	if _, err := fmt.Sscanf(res.Header.Get("Location"), "/todos/%d", &id); err != nil {
		t.Fatalf("Location %q: %v", res.Header.Get("Location"), err)
	}
	got := f.todo(id)
	if got.Queue != "inbox" || got.Payload != `{"task":"hello"}` || got.CreatedBy != store.OperatorActor(f.human.ID) {
		t.Fatalf("added %+v", got)
	}
	if rows := f.audited(fmt.Sprintf("todo:%d", id)); rows[0].Action != "todo.add" || rows[0].Actor != store.OperatorActor(f.human.ID) {
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

// A todo's page says what its lapsed lease leads to, and shows a done todo's
// earlier error as history, not as a current failure.
func TestTodoPageWording(t *testing.T) {
	f := newFixture(t, Options{})
	cookie, _ := f.login()
	ctx := t.Context()
	claim := func(max int) store.Todo {
		td, err := f.st.AddTodo(ctx, store.NewTodo{Queue: "inbox", Payload: "{}", MaxAttempts: max, CreatedBy: "test"})
		if err != nil {
			t.Fatal(err)
		}
		if td, err = f.st.Claim(ctx, store.Ack{ID: td.ID, Owner: "agent:worker"}, time.Minute); err != nil {
			t.Fatal(err)
		}
		return td
	}
	last, more := claim(1), claim(5)
	f.clock.Add(2 * time.Minute) // both leases lapse; the reaper has not run
	for td, want := range map[int64]string{
		last.ID: "(lapsed on its last attempt, 1 of 1: the reaper will dead-letter it)",
		more.ID: "(lapsed: the reaper will put it back on its queue, for attempt 2 of 5)",
	} {
		if _, body := f.get(fmt.Sprintf("/todos/%d", td), cookie); !strings.Contains(body, want) {
			t.Errorf("todo %d: the page does not say %q", td, want)
		}
	}

	// Failed once, retried, then done.
	td := claim(5)
	if _, err := f.st.Fail(ctx, store.Ack{ID: td.ID, Owner: "agent:worker", LeaseSeq: td.LeaseSeq}, "upstream timed out", true); err != nil {
		t.Fatal(err)
	}
	f.clock.Add(time.Hour) // past the backoff
	again, err := f.st.Claim(ctx, store.Ack{ID: td.ID, Owner: "agent:worker"}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.st.Complete(ctx, store.Ack{ID: td.ID, Owner: "agent:worker", LeaseSeq: again.LeaseSeq}, "all good"); err != nil {
		t.Fatal(err)
	}
	_, body := f.get(fmt.Sprintf("/todos/%d", td.ID), cookie)
	result, earlier := strings.Index(body, "<h2>Result</h2>"), strings.Index(body, "<h2>Earlier error</h2>")
	if strings.Contains(body, "error-card") || strings.Contains(body, "Last error") || result < 0 || earlier < result ||
		!strings.Contains(body[earlier:], "upstream timed out") {
		t.Fatalf("a done todo's old error is not shown as history, after its result:\n%s", body)
	}
	// A dead letter's error is the current one.
	dead := f.failed("inbox")
	if _, body := f.get(fmt.Sprintf("/todos/%d", dead.ID), cookie); !strings.Contains(body, `<section class="card error-card"><h2>Last error</h2>`) {
		t.Fatal("a dead letter's error is not shown as its last error")
	}
}

// The Failed tab offers to retry every dead letter it counts; the retry puts back
// that queue's, not another's, and confirms how many.
func TestRetryAllDeadLetters(t *testing.T) {
	f := newFixture(t, Options{})
	cookie, csrf := f.login()
	a1, a2, b := f.failed("a"), f.failed("a"), f.failed("b")

	_, body := f.get("/?queue=a&state=failed", cookie)
	if !strings.Contains(body, `action="/dead-letters/retry"`) || !strings.Contains(body, "Retry all 2</button>") ||
		!strings.Contains(body, `data-confirm="Retry all 2 failed todos on a?`) {
		t.Fatalf("the Failed tab of queue a offers no retry of its 2 dead letters:\n%s", body)
	}
	if _, body := f.get("/?queue=a&state=pending", cookie); strings.Contains(body, "/dead-letters/retry") {
		t.Fatal("the Pending tab offers to retry dead letters")
	}

	res, _ := f.post("/dead-letters/retry", cookie, url.Values{csrfField: {csrf}, "queue": {"a"},
		"return": {"/?queue=a&state=failed"}})
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/?queue=a&state=failed" {
		t.Fatalf("status %d Location %q", res.StatusCode, res.Header.Get("Location"))
	}
	if body := f.follow(res, cookie); !strings.Contains(body, "Retried 2 todos that had failed") {
		t.Fatalf("the board does not confirm how many were retried:\n%s", body)
	}
	for _, td := range []store.Todo{a1, a2} {
		if got := f.todo(td.ID); got.State != store.StatePending || got.Attempts != 0 {
			t.Fatalf("todo %d after retrying a: %s, %d attempts", td.ID, got.State, got.Attempts)
		}
		if rows := f.audited(fmt.Sprintf("todo:%d", td.ID)); rows[0].Action != "todo.retry" || rows[0].Actor != store.OperatorActor(f.human.ID) {
			t.Fatalf("audit %+v", rows[0])
		}
	}
	if got := f.todo(b.ID); got.State != store.StateFailed {
		t.Fatalf("queue b's dead letter is %s after retrying queue a's", got.State)
	}

	// Without a queue, every queue's; a bad queue name changes nothing.
	if res, _ := f.post("/dead-letters/retry", cookie, url.Values{csrfField: {csrf}, "queue": {"no spaces"}}); res.StatusCode != http.StatusBadRequest {
		t.Fatalf("a bad queue name: %d, want 400", res.StatusCode)
	}
	if res, _ := f.post("/dead-letters/retry", cookie, url.Values{csrfField: {csrf}}); res.StatusCode != http.StatusSeeOther ||
		res.Header.Get("Location") != "/?state=failed" {
		t.Fatalf("retry every queue: %d, Location %q", res.StatusCode, res.Header.Get("Location"))
	}
	if got := f.todo(b.ID); got.State != store.StatePending {
		t.Fatalf("queue b's dead letter is %s after retrying every queue", got.State)
	}
	if res, _ := f.post("/dead-letters/retry", nil, url.Values{"queue": {"a"}}); res.StatusCode == http.StatusSeeOther &&
		!strings.HasPrefix(res.Header.Get("Location"), "/login") {
		t.Fatalf("a retry without a session: %d %q", res.StatusCode, res.Header.Get("Location"))
	}
}

// The Failed tab groups its dead letters by their last error, and retries one
// group at a time: the others stay failed.
func TestRetryDeadLettersByError(t *testing.T) {
	f := newFixture(t, Options{})
	cookie, csrf := f.login()
	f.failed("a")
	f.failed("a")
	timeout := f.claimed("a")
	if _, err := f.st.Fail(t.Context(), store.Ack{ID: timeout.ID, Owner: "agent:worker", LeaseSeq: timeout.LeaseSeq}, `timeout after 30s <"quoted">`, false); err != nil {
		t.Fatal(err)
	}

	_, body := f.get("/?queue=a&state=failed", cookie)
	errs, _, ok := strings.Cut(body, `<table class="table todos">`)
	if !ok || !strings.Contains(errs, `<table class="table errors">`) {
		t.Fatalf("the Failed tab lists no errors before its todos:\n%s", body)
	}
	boom := strings.Index(errs, `title="Show only these todos: boom">boom</a>`)
	quoted := strings.Index(errs, `title="Show only these todos: timeout after 30s &lt;&#34;quoted&#34;&gt;"`)
	if boom < 0 || quoted < boom || !strings.Contains(errs, `value="&#34;timeout after 30s &lt;\&#34;quoted\&#34;&gt;&#34;"`) {
		t.Fatalf("the errors, most common first, each with its retry:\n%s", errs)
	}
	if _, body := f.get("/?queue=a&state=pending", cookie); strings.Contains(body, `class="table errors"`) {
		t.Fatal("the Pending tab lists errors")
	}

	res, _ := f.post("/dead-letters/retry", cookie, url.Values{csrfField: {csrf}, "queue": {"a"},
		"error": {strconv.Quote(`timeout after 30s <"quoted">`)}})
	if body := f.follow(res, cookie); !strings.Contains(body, "Retried 1 todo that had failed") {
		t.Fatalf("retry by error: %d\n%s", res.StatusCode, body)
	}
	if got := f.todo(timeout.ID); got.State != store.StatePending {
		t.Fatalf("the timed-out todo is %s after retrying its error", got.State)
	}
	if groups, err := f.st.FailedErrors(t.Context(), "a", 5); err != nil || len(groups) != 1 || groups[0].Error != "boom" || groups[0].Count != 2 {
		t.Fatalf("left failed: %+v %v, want the 2 booms", groups, err)
	}
}

// A group of the Failed tab's errors links to its todos alone, newest first, with
// a retry of just them; the filter carries over to the next page and the live rows.
func TestFailedTodosOfOneError(t *testing.T) {
	f := newFixture(t, Options{PageSize: 2})
	cookie, _ := f.login()
	var booms []store.Todo
	for range 3 {
		booms = append(booms, f.failed("a"))
	}
	other := f.claimed("a")
	if _, err := f.st.Fail(t.Context(), store.Ack{ID: other.ID, Owner: "agent:worker", LeaseSeq: other.LeaseSeq}, "timeout", false); err != nil {
		t.Fatal(err)
	}
	_, body := f.get("/?queue=a&state=failed", cookie)
	if !strings.Contains(body, `href="/?error=boom&amp;queue=a&amp;state=failed"`) {
		t.Fatalf("the boom group does not link to its todos:\n%s", body)
	}
	_, body = f.get("/?error=boom&queue=a&state=failed", cookie)
	rows := func(body string) []string {
		var ids []string
		for _, part := range strings.Split(body, `<tr data-todo-id="`)[1:] {
			id, _, _ := strings.Cut(part, `"`)
			ids = append(ids, id)
		}
		return ids
	}
	id := func(td store.Todo) string { return fmt.Sprint(td.ID) }
	if got := rows(body); len(got) != 2 || got[0] != id(booms[2]) || got[1] != id(booms[1]) ||
		!strings.Contains(body, `whose last error is <span class="err-line">boom</span>`) ||
		!strings.Contains(body, `<input type="hidden" name="error" value="&#34;boom&#34;">`) ||
		strings.Contains(body, `class="table errors"`) {
		t.Fatalf("the first page of boom's todos: %v\n%s", got, body)
	}
	at := f.todo(booms[1].ID).FinishedAt.UnixMilli()
	if !strings.Contains(body, fmt.Sprintf(`href="/?at=%d&amp;before=%d&amp;error=boom&amp;queue=a&amp;state=failed"`, at, booms[1].ID)) ||
		!strings.Contains(body, `data-live-src="/?error=boom&amp;fragment=rows&amp;queue=a&amp;state=failed"`) {
		t.Fatalf("the pager or the live rows lose the filter:\n%s", body)
	}
	_, body = f.get(fmt.Sprintf("/?at=%d&before=%d&error=boom&queue=a&state=failed", at, booms[1].ID), cookie)
	if got := rows(body); len(got) != 1 || got[0] != id(booms[0]) {
		t.Fatalf("the second page of boom's todos: %v", got)
	}
	// Only the Failed tab filters by error.
	if _, body := f.get("/?error=boom&queue=a", cookie); !slices.Contains(rows(body), id(other)) || strings.Contains(body, "whose last error is") {
		t.Fatalf("the All tab filtered by error: %v", rows(body))
	}
}

// A group's 'Retry these' retries its todos when their error has line breaks (a
// stack trace, say) or a NUL: a browser sends a field's line breaks as CRLF, and
// html/template writes a NUL as U+FFFD, so the error cannot go in the form as it is.
func TestRetryDeadLettersByMultilineError(t *testing.T) {
	f := newFixture(t, Options{})
	cookie, csrf := f.login()
	msg := "HTTP 502 from api.example.com\nbad gateway\r\n\tat fetch\x00"
	td := f.claimed("a")
	if _, err := f.st.Fail(t.Context(), store.Ack{ID: td.ID, Owner: "agent:worker", LeaseSeq: td.LeaseSeq}, msg, false); err != nil {
		t.Fatal(err)
	}
	_, body := f.get("/?queue=a&state=failed", cookie)
	_, rest, ok := strings.Cut(body, `<input type="hidden" name="error" value="`)
	if !ok {
		t.Fatalf("no retry of the error's todos:\n%s", body)
	}
	value, _, _ := strings.Cut(rest, `"`)
	// What a browser posts: every line break of a field's value as CRLF.
	crlf := strings.NewReplacer("\r\n", "\r\n", "\r", "\r\n", "\n", "\r\n")
	res, _ := f.post("/dead-letters/retry", cookie, url.Values{csrfField: {csrf}, "queue": {"a"},
		"error": {crlf.Replace(html.UnescapeString(value))}})
	if body := f.follow(res, cookie); !strings.Contains(body, "Retried 1 todo that had failed") {
		t.Fatalf("retry by a multi-line error: %d\n%s", res.StatusCode, body)
	}
	if got := f.todo(td.ID); got.State != store.StatePending {
		t.Fatalf("the todo is %s after retrying its error", got.State)
	}
	if res, _ := f.post("/dead-letters/retry", cookie, url.Values{csrfField: {csrf}, "error": {"not quoted"}}); res.StatusCode != http.StatusBadRequest {
		t.Fatalf("an error not quoted: %d, want 400", res.StatusCode)
	}
}

// An error "0" (an exit status, say) or "" is a filter like any other: link leaves
// such values out, but the group's link, the pager and the live rows keep it.
func TestFailedTodosOfErrorZero(t *testing.T) {
	f := newFixture(t, Options{PageSize: 1})
	cookie, _ := f.login()
	fail := func(msg string) store.Todo {
		t.Helper()
		td := f.claimed("a")
		if _, err := f.st.Fail(t.Context(), store.Ack{ID: td.ID, Owner: "agent:worker", LeaseSeq: td.LeaseSeq}, msg, false); err != nil {
			t.Fatal(err)
		}
		return td
	}
	zero1, zero2, empty := fail("0"), fail("0"), fail("")
	at := func(td store.Todo) int64 { return f.todo(td.ID).FinishedAt.UnixMilli() }
	f.failed("a")
	_, body := f.get("/?queue=a&state=failed", cookie)
	for _, e := range []string{"0", ""} {
		if !strings.Contains(body, `href="/?error=`+e+`&amp;queue=a&amp;state=failed"`) {
			t.Fatalf("the group of error %q does not link to its todos:\n%s", e, body)
		}
	}
	_, body = f.get("/?error=0&queue=a&state=failed", cookie)
	if !strings.Contains(body, fmt.Sprintf(`<tr data-todo-id="%d"`, zero2.ID)) || strings.Count(body, `<tr data-todo-id="`) != 1 ||
		!strings.Contains(body, fmt.Sprintf(`href="/?at=%d&amp;before=%d&amp;error=0&amp;queue=a&amp;state=failed"`, at(zero2), zero2.ID)) ||
		!strings.Contains(body, `data-live-src="/?error=0&amp;fragment=rows&amp;queue=a&amp;state=failed"`) {
		t.Fatalf("the first page of error 0's todos, its pager and live rows:\n%s", body)
	}
	_, body = f.get(fmt.Sprintf("/?at=%d&before=%d&error=0&queue=a&state=failed", at(zero2), zero2.ID), cookie)
	if !strings.Contains(body, fmt.Sprintf(`<tr data-todo-id="%d"`, zero1.ID)) || strings.Count(body, `<tr data-todo-id="`) != 1 ||
		!strings.Contains(body, `href="/?error=0&amp;queue=a&amp;state=failed">← Newest`) {
		t.Fatalf("the second page of error 0's todos:\n%s", body)
	}
	_, body = f.get("/?error=&queue=a&state=failed", cookie)
	if !strings.Contains(body, fmt.Sprintf(`<tr data-todo-id="%d"`, empty.ID)) || strings.Count(body, `<tr data-todo-id="`) != 1 ||
		!strings.Contains(body, `data-live-src="/?error=&amp;fragment=rows&amp;queue=a&amp;state=failed"`) {
		t.Fatalf("the todos that failed with no error:\n%s", body)
	}
}

// The Failed tab lists dead letters by when they failed, newest first: a todo
// that failed again after a retry is at the top, whatever its id. Its pager and
// the rows' forms carry the cursor (id and failure time); a link with an id alone
// (from before) still pages, by id.
func TestFailedTabListsByFailureTime(t *testing.T) {
	f := newFixture(t, Options{PageSize: 2})
	cookie, csrf := f.login()
	var dead []store.Todo
	for range 3 {
		f.clock.Add(time.Minute)
		dead = append(dead, f.failed("a"))
	}
	// The oldest is retried and fails again, last.
	f.clock.Add(time.Minute)
	if _, err := f.st.Retry(t.Context(), dead[0].ID, "human:1"); err != nil {
		t.Fatal(err)
	}
	again, err := f.st.Claim(t.Context(), store.Ack{ID: dead[0].ID, Owner: "agent:worker"}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.st.Fail(t.Context(), store.Ack{ID: dead[0].ID, Owner: "agent:worker", LeaseSeq: again.LeaseSeq}, "boom", false); err != nil {
		t.Fatal(err)
	}
	rows := func(body string) []int64 {
		var ids []int64
		for _, part := range strings.Split(body, `<tr data-todo-id="`)[1:] {
			var id int64
			fmt.Sscanf(part, "%d", &id)
			ids = append(ids, id)
		}
		return ids
	}
	_, body := f.get("/?state=failed", cookie)
	if got := rows(body); !slices.Equal(got, []int64{dead[0].ID, dead[2].ID}) || !strings.Contains(body, "<th>Failed</th>") {
		t.Fatalf("the Failed tab's first page: %v\n%s", got, body)
	}
	at := f.todo(dead[2].ID).FinishedAt.UnixMilli()
	older := fmt.Sprintf("/?at=%d&before=%d&state=failed", at, dead[2].ID)
	if !strings.Contains(body, `href="`+html.EscapeString(older)+`"`) {
		t.Fatalf("the pager does not carry the failure time:\n%s", body)
	}
	_, body = f.get(older, cookie)
	if got := rows(body); !slices.Equal(got, []int64{dead[1].ID}) {
		t.Fatalf("the second page: %v", got)
	}
	// A retry from the second page returns to it.
	if !strings.Contains(body, `name="return" value="`+html.EscapeString(older)+`"`) {
		t.Fatalf("the rows' forms do not return to this page:\n%s", body)
	}
	res, _ := f.post(fmt.Sprintf("/todos/%d/retry", dead[1].ID), cookie, url.Values{csrfField: {csrf}, "return": {older}})
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != older {
		t.Fatalf("retry from the second page: %d %q", res.StatusCode, res.Header.Get("Location"))
	}
	// An id alone pages by id, as links did before.
	_, body = f.get(fmt.Sprintf("/?before=%d&state=failed", dead[2].ID), cookie)
	if got := rows(body); !slices.Equal(got, []int64{dead[0].ID}) || !strings.Contains(body, "<th>Created</th>") {
		t.Fatalf("a page named by id alone: %v", got)
	}
	// The All tab still lists by id.
	_, body = f.get("/", cookie)
	if got := rows(body); !slices.Equal(got, []int64{dead[2].ID, dead[1].ID}) {
		t.Fatalf("the All tab: %v", got)
	}
}

// A link's ?todo= (the toolbar's "Go to #" box before it searched) opens a todo by
// its number, with or without the #; anything else leaves the board with an error
// saying what it wants.
func TestGoToTodoByNumber(t *testing.T) {
	f := newFixture(t, Options{})
	cookie, _ := f.login()
	td := f.addTodo("inbox", "{}")
	for _, in := range []string{"#" + strconv.FormatInt(td.ID, 10), strconv.FormatInt(td.ID, 10), " " + strconv.FormatInt(td.ID, 10) + " "} {
		res, _ := f.get("/?todo="+url.QueryEscape(in), cookie)
		if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != fmt.Sprintf("/todos/%d", td.ID) {
			t.Fatalf("go to %q: %d %q", in, res.StatusCode, res.Header.Get("Location"))
		}
	}
	if res, body := f.get("/?todo=+", cookie); res.StatusCode != http.StatusOK || strings.Contains(body, "flash err") {
		t.Fatalf("go to nothing: %d\n%s", res.StatusCode, body)
	}
	for _, in := range []string{"abc", "0", "-3", "<b>7</b>"} {
		res, body := f.get("/?todo="+url.QueryEscape(in), cookie)
		if res.StatusCode != http.StatusOK || !strings.Contains(body, "is not a todo&#39;s number") || strings.Contains(body, "<b>7") {
			t.Fatalf("go to %q: %d\n%s", in, res.StatusCode, body)
		}
	}
}
