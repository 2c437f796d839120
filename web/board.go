package web

import (
	"net/http"
	"strconv"

	"github.com/switchboardhq/switchboard/store"
)

type boardPage struct {
	Queue, State string
	Before       int64
	Queues       []queueSummary
	Totals       queueSummary
	Selected     queueSummary // counts of the selected queue (or all), for the state tabs
	Todos        []store.Todo
	Older        int64 // cursor of the next page; 0 when this is the last
}

// board serves GET /: every queue with its counts, and the todo table filtered by
// queue and state, newest first, one page at a time.
func (u *UI) board(w http.ResponseWriter, r *http.Request, rc *reqCtx) {
	q := r.URL.Query()
	p := boardPage{Queue: q.Get("queue"), State: q.Get("state")}
	if !validState(p.State) {
		p.State = ""
	}
	if p.Queue != "" && !store.ValidQueueName(p.Queue) {
		p.Queue = ""
	}
	p.Before, _ = strconv.ParseInt(q.Get("before"), 10, 64)

	counts, err := u.store.QueueCounts(r.Context())
	if err != nil {
		u.storeError(w, r, rc, "Counting todos", err)
		return
	}
	p.Queues = summarise(counts)
	p.Totals = totals(p.Queues)
	p.Selected = p.Totals
	for _, qs := range p.Queues {
		if qs.Queue == p.Queue {
			p.Selected = qs
		}
	}
	f := store.TodoFilter{State: p.State, Before: p.Before, Limit: u.opts.PageSize + 1}
	if p.Queue != "" {
		f.Queues = []string{p.Queue}
	}
	p.Todos, err = u.store.ListTodos(r.Context(), f)
	if err != nil {
		u.storeError(w, r, rc, "Listing todos", err)
		return
	}
	p.Todos, p.Older = store.PageOf(p.Todos, u.opts.PageSize)
	v := view{Title: "Board", Nav: "board", Glance: p.Queues, Page: p,
		LiveURL: link("/", "queue", p.Queue, "state", p.State, "before", p.Before, "fragment", "1")}
	if q.Get("fragment") == "1" {
		u.renderFragment(w, rc, "board", v)
		return
	}
	u.render(w, r, rc, http.StatusOK, "board", v)
}

// glance serves GET /glance: the header's queue summary, refreshed live on every page.
func (u *UI) glance(w http.ResponseWriter, r *http.Request, rc *reqCtx) {
	counts, err := u.store.QueueCounts(r.Context())
	if err != nil {
		u.log.Warn("web: count todos for the header", "err", err)
		http.Error(w, "counting todos failed", http.StatusInternalServerError)
		return
	}
	u.execute(w, http.StatusOK, "board", "glance", view{Human: &rc.Human, Glance: summarise(counts)})
}

func validState(s string) bool {
	switch s {
	case store.StatePending, store.StateClaimed, store.StateDone, store.StateFailed:
		return true
	}
	return false
}
