package web

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/switchboardhq/switchboard/internal/pretty"
	"github.com/switchboardhq/switchboard/store"
)

// maxPayload bounds a todo added from the board, like the CLI's bound.
const maxPayload = 1 << 20

type todoPage struct {
	Todo    store.Todo
	Payload pretty.Text // the payload as shown: indented when JSON, cut when long
	Audit   []store.AuditEntry
}

// todoPage serves GET /todos/:id: everything known about one todo and its history.
func (u *UI) todoPage(w http.ResponseWriter, r *http.Request, rc *reqCtx) {
	id, ok := pathID(rc, "id")
	if !ok {
		u.fail(w, r, rc, http.StatusNotFound, "There is no such todo.")
		return
	}
	t, err := u.store.Todo(r.Context(), id)
	if err != nil {
		u.storeError(w, r, rc, fmt.Sprintf("Todo %d", id), err)
		return
	}
	trail, err := u.store.ListAudit(r.Context(), store.AuditFilter{Target: fmt.Sprintf("todo:%d", id), Limit: 200})
	if err != nil {
		u.storeError(w, r, rc, fmt.Sprintf("Audit trail of todo %d", id), err)
		return
	}
	v := view{Title: fmt.Sprintf("Todo %d", id), Nav: "board",
		Page:    todoPage{Todo: t, Payload: pretty.Format(t.Payload), Audit: trail},
		LiveURL: fmt.Sprintf("/todos/%d?fragment=1", id)}
	if r.URL.Query().Get("fragment") == "1" {
		u.renderFragment(w, rc, "todo", "live", v)
		return
	}
	u.render(w, r, rc, http.StatusOK, "todo", v)
}

// addTodo serves POST /todos: an operator puts a todo on a queue.
func (u *UI) addTodo(w http.ResponseWriter, r *http.Request, rc *reqCtx) {
	queue := strings.TrimSpace(r.PostForm.Get("queue"))
	payload := r.PostForm.Get("payload")
	switch {
	case !store.ValidQueueName(queue):
		u.fail(w, r, rc, http.StatusBadRequest,
			fmt.Sprintf("%q is not a valid queue name: use 1-128 letters, digits and . _ - : / (starting with a letter or digit).", queue))
		return
	case len(payload) > maxPayload:
		u.fail(w, r, rc, http.StatusBadRequest, "The payload is larger than 1 MiB.")
		return
	case !utf8.ValidString(payload):
		u.fail(w, r, rc, http.StatusBadRequest, "The payload is not valid UTF-8 text.")
		return
	}
	t, err := u.store.AddTodo(r.Context(), store.NewTodo{Queue: queue, Payload: payload, CreatedBy: rc.actor()})
	if err != nil {
		u.storeError(w, r, rc, "Adding the todo", err)
		return
	}
	u.redirectFlash(w, r, rc, fmt.Sprintf("/todos/%d", t.ID), "added")
}

// releaseTodo serves POST /todos/:id/release: hand a claimed todo back to its queue
// whoever holds it (SPEC-0013's human release). The claim does not count as an attempt.
func (u *UI) releaseTodo(w http.ResponseWriter, r *http.Request, rc *reqCtx) {
	u.todoAction(w, r, rc, "Releasing todo", "released", func(id int64) error {
		_, err := u.store.ReleaseByHuman(r.Context(), id, rc.actor())
		return err
	})
}

// retryTodo serves POST /todos/:id/retry: put a dead-lettered todo back on its queue.
func (u *UI) retryTodo(w http.ResponseWriter, r *http.Request, rc *reqCtx) {
	u.todoAction(w, r, rc, "Retrying todo", "retried", func(id int64) error {
		_, err := u.store.Retry(r.Context(), id, rc.actor())
		return err
	})
}

// retryDeadLetters serves POST /dead-letters/retry: every failed todo (on the queue
// given, or on every queue; with the error given, only those whose last error it
// is) goes back on its queue with its attempts reset.
func (u *UI) retryDeadLetters(w http.ResponseWriter, r *http.Request, rc *reqCtx) {
	queue := r.PostForm.Get("queue")
	if queue != "" && !store.ValidQueueName(queue) {
		u.fail(w, r, rc, http.StatusBadRequest, fmt.Sprintf("%q is not a valid queue name.", queue))
		return
	}
	f := store.Failed{Queue: queue}
	if v, ok := r.PostForm["error"]; ok && len(v) == 1 {
		// Only those that failed with this error, which the form sends quoted: a
		// browser sends every line break of a field as CRLF, and html/template
		// writes a NUL as U+FFFD, so a multi-line error sent as it is matched none.
		e, err := strconv.Unquote(v[0])
		if err != nil {
			u.fail(w, r, rc, http.StatusBadRequest, "The error to retry by is not a quoted string.")
			return
		}
		f.Error = &e
	}
	n, err := u.store.RetryFailed(r.Context(), f, rc.actor())
	if err != nil {
		u.storeError(w, r, rc, fmt.Sprintf("Retrying failed todos (%d were retried)", n), err)
		return
	}
	back := link("/", "queue", queue, "state", store.StateFailed)
	if ret := r.PostForm.Get("return"); ret != "" {
		back = safeNext(ret)
	}
	u.redirectFlash(w, r, rc, back, fmt.Sprintf("retried-all:%d", n))
}

func (u *UI) todoAction(w http.ResponseWriter, r *http.Request, rc *reqCtx, what, flash string, act func(int64) error) {
	id, ok := pathID(rc, "id")
	if !ok {
		u.fail(w, r, rc, http.StatusNotFound, "There is no such todo.")
		return
	}
	if err := act(id); err != nil {
		u.storeError(w, r, rc, fmt.Sprintf("%s %d", what, id), err)
		return
	}
	// Go back where the button was (the board or the todo page), with the filters.
	back := fmt.Sprintf("/todos/%d", id)
	if ret := r.PostForm.Get("return"); ret != "" {
		back = safeNext(ret)
	}
	u.redirectFlash(w, r, rc, back, flash)
}

func pathID(rc *reqCtx, name string) (int64, bool) {
	id, err := strconv.ParseInt(rc.Params.ByName(name), 10, 64)
	return id, err == nil && id > 0
}
