package web

import (
	"cmp"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/switchboardhq/switchboard/store"
)

type boardPage struct {
	Queue, State string
	Before       int64
	Queues       []queueSummary
	Totals       queueSummary
	Selected     queueSummary // counts of the selected queue (or all)
	Tabs         queueSummary // what the state tabs count: Selected, or one key's todos (?key=)
	Todos        []store.Todo
	Older        int64 // cursor of the next page; 0 when this is the last
	// The Failed tab lists todos by when they failed, newest first: its cursor
	// is the id with that time (Unix ms), At for this page, OlderAt for the next.
	ByFailure   bool
	At, OlderAt int64
	// Errors groups the dead letters by their last error, on the Failed tab's
	// first page: what to mend, and then retry.
	Errors []store.ErrorGroup
	// ByError is set when the Failed tab shows only the todos whose last error is
	// Error (one of those groups).
	ByError bool
	Error   string
	// Query is the search box's text as typed, Search what it asks for.
	Query  string
	Search store.TodoSearch
	// Key lists only the todos of this key (the todos' own, exactly), as a
	// todo's Key cell links to it.
	Key string
	// The page's two live parts: the counts (queue cards and state tabs), which any
	// change of state may move, and the rows, which only a change on this page's
	// queue and state can (see app.js).
	CountsURL, RowsURL string
	// Charts are the queue's history (all queues' without one), on the full page.
	Charts *chartPanel
	// Awaiting lists the oldest todos awaiting a human's approval (see control.go).
	Awaiting []store.Todo
}

// Link is the URL of the board's queue and state with kv, and its error filter
// when on, even for an error "" or "0", which link leaves out as unset.
func (p boardPage) Link(kv ...any) string {
	kv = append([]any{"queue", p.Queue, "state", p.State, "q", p.Query, "key", p.Key}, kv...)
	if p.ByError {
		return errorLink(p.Error, "/", kv...)
	}
	return link("/", kv...)
}

// board serves GET /: every queue with its counts, and the todo table filtered by
// queue and state, newest first, one page at a time. ?fragment=headline, counts
// and rows serve one live part of it.
func (u *UI) board(w http.ResponseWriter, r *http.Request, rc *reqCtx) {
	q := r.URL.Query()
	// The toolbar's "Go to #" box: a todo's number, as agents and the audit log
	// name it ("#42" or "42").
	var notATodo string
	if v := strings.TrimSpace(q.Get("todo")); v != "" {
		n := strings.TrimPrefix(v, "#")
		if id, err := strconv.ParseInt(n, 10, 64); err == nil && id > 0 {
			http.Redirect(w, r, "/todos/"+strconv.FormatInt(id, 10), http.StatusSeeOther)
			return
		}
		notATodo = fmt.Sprintf("%.40q is not a todo's number: type the digits after # (as in #42).", v)
	}
	p := boardPage{Queue: q.Get("queue"), State: q.Get("state")}
	if !validState(p.State) {
		p.State = ""
	}
	if p.Queue != "" && !store.ValidQueueName(p.Queue) {
		p.Queue = ""
	}
	p.Before, _ = strconv.ParseInt(q.Get("before"), 10, 64)
	p.At, _ = strconv.ParseInt(q.Get("at"), 10, 64)
	if v, ok := q["error"]; ok && len(v) == 1 && p.State == store.StateFailed {
		p.ByError, p.Error = true, v[0]
	}
	// A page of the Failed tab named by id alone (a link from before it was
	// listed by failure time) is listed by id.
	p.ByFailure = p.State == store.StateFailed && (p.Before == 0 || p.At > 0)
	if !p.ByFailure {
		p.At = 0
	}
	badSearch, jumped := searchBoard(w, r, &p)
	if jumped {
		return
	}
	badKey := boardKey(q.Get("key"), &p)
	fragment := q.Get("fragment")
	p.CountsURL = link("/", "queue", p.Queue, "state", p.State, "q", p.Query, "key", p.Key, "fragment", "counts")
	p.RowsURL = p.Link("before", p.Before, "at", p.At, "fragment", "rows")
	v := view{Title: "Board", Nav: "board", Error: cmp.Or(notATodo, badSearch, badKey)}
	if fragment == "charts" {
		if u.boardCharts(w, r, rc, &p) {
			u.renderFragment(w, rc, "board", "charts-fragment", view{Page: p})
		}
		return
	}
	if fragment != "rows" {
		if !u.boardCounts(w, r, rc, &p, fragment != "headline") {
			return
		}
		v.Glance = p.Queues
	}
	if fragment != "counts" && fragment != "headline" {
		if !u.boardRows(w, r, rc, &p) {
			return
		}
	}
	if fragment == "" && !u.boardCharts(w, r, rc, &p) {
		return
	}
	v.Page = p
	switch fragment {
	case "headline", "counts", "rows":
		u.renderFragment(w, rc, "board", fragment, v)
		return
	}
	u.render(w, r, rc, http.StatusOK, "board", v)
}

// boardCounts fills in every queue's counts and the selected queue's, and with
// heads, how long each queue's head has waited (the cards show it; the headline,
// refreshed as often, does not).
func (u *UI) boardCounts(w http.ResponseWriter, r *http.Request, rc *reqCtx, p *boardPage, heads bool) bool {
	counts, err := u.store.QueueCounts(r.Context())
	if err != nil {
		u.storeError(w, r, rc, "Counting todos", err)
		return false
	}
	p.Queues = summarise(counts)
	if heads && (!u.queueHeads(w, r, rc, p.Queues) || !u.queueControl(w, r, rc, p)) {
		return false
	}
	p.Totals = totals(p.Queues)
	p.Selected = p.Totals
	for _, qs := range p.Queues {
		if qs.Queue == p.Queue {
			p.Selected = qs
		}
	}
	p.Tabs = p.Selected
	if p.Key != "" {
		// The tabs count what they list: the todos of that key alone.
		counts, err := u.store.KeyCounts(r.Context(), p.Key)
		if err != nil {
			u.storeError(w, r, rc, "Counting the key's todos", err)
			return false
		}
		qs := summarise(counts)
		if p.Queue != "" {
			qs = slices.DeleteFunc(qs, func(q queueSummary) bool { return q.Queue != p.Queue })
		}
		p.Tabs = totals(qs)
	}
	return true
}

// queueHeads fills in when each queue's head became claimable.
func (u *UI) queueHeads(w http.ResponseWriter, r *http.Request, rc *reqCtx, qs []queueSummary) bool {
	heads, err := u.store.QueueHeads(r.Context())
	if err != nil {
		u.storeError(w, r, rc, "Reading the queues' heads", err)
		return false
	}
	at := make(map[string]int, len(qs))
	for i, q := range qs {
		at[q.Queue] = i
	}
	for _, h := range heads {
		if i, ok := at[h.Queue]; ok {
			qs[i].HeadSince = h.Since
		}
	}
	return true
}

// boardRows fills in one page of the todo table.
func (u *UI) boardRows(w http.ResponseWriter, r *http.Request, rc *reqCtx, p *boardPage) bool {
	f := store.TodoFilter{State: p.State, Before: p.Before, Limit: u.opts.PageSize + 1,
		ByFailure: p.ByFailure, FailedBefore: time.UnixMilli(p.At)}
	if p.Queue != "" {
		f.Queues = []string{p.Queue}
	}
	if p.ByError {
		f.LastError = &p.Error
	}
	f.Search = p.Search
	todos, err := u.store.ListTodos(r.Context(), f)
	if err != nil {
		u.storeError(w, r, rc, "Listing todos", err)
		return false
	}
	p.Todos, p.Older = store.PageOf(todos, u.opts.PageSize)
	if p.Older != 0 && p.ByFailure {
		if at := p.Todos[len(p.Todos)-1].FinishedAt; at != nil {
			p.OlderAt = at.UnixMilli()
		}
	}
	if p.State == store.StateFailed && p.Before == 0 && !p.ByError && p.Search.IsZero() && len(p.Todos) > 0 {
		if p.Errors, err = u.store.FailedErrors(r.Context(), p.Queue, errorGroups); err != nil {
			u.storeError(w, r, rc, "Grouping dead letters by error", err)
			return false
		}
	}
	return true
}

// errorGroups is how many of the most common errors the Failed tab lists.
const errorGroups = 5

// glance serves GET /glance: the header's queue summary, refreshed live on every page.
func (u *UI) glance(w http.ResponseWriter, r *http.Request, rc *reqCtx) {
	counts, err := u.store.QueueCounts(r.Context())
	if err != nil {
		u.log.Warn("web: count todos for the header", "err", err)
		http.Error(w, "counting todos failed", http.StatusInternalServerError)
		return
	}
	u.execute(w, http.StatusOK, "board", "glance", view{Operator: &rc.Operator, Glance: summarise(counts)})
}

// boardKey reads the board's key filter (?key=) into p; one no todo could
// have is said in words (bad), and the board lists as if none were given.
func boardKey(key string, p *boardPage) (bad string) {
	if key == "" {
		return ""
	}
	if err := (store.TodoOptions{Key: key}).Validate(); err != nil {
		return fmt.Sprintf("No todo has that key: %s.", plainError(err))
	}
	p.Key, p.Search.TodoKey = key, key
	return ""
}

func validState(s string) bool {
	switch s {
	case store.StatePending, store.StateClaimed, store.StateDone, store.StateFailed:
		return true
	}
	return false
}
