package web

import (
	"context"
	"fmt"
	"net/http"

	"github.com/switchboardhq/switchboard/store"
)

// A person's control of the queue: cancel a todo, pause and resume a queue,
// answer a worker's request for approval. Each is a POST with the CSRF token
// (u.action), audited by the store under the operator's name.

// approvalsShown is how many todos awaiting approval the board lists.
const approvalsShown = 20

// cancelTodo serves POST /todos/:id/cancel: a pending or claimed todo ends.
func (u *UI) cancelTodo(w http.ResponseWriter, r *http.Request, rc *reqCtx) {
	u.todoAction(w, r, rc, "Cancelling todo", "cancelled", func(id int64) error {
		_, err := u.store.CancelTodo(r.Context(), id, rc.actor())
		return err
	})
}

// decideTodo serves POST /todos/:id/decide: decision=approve or deny, with an
// optional comment, on a todo awaiting approval.
func (u *UI) decideTodo(w http.ResponseWriter, r *http.Request, rc *reqCtx) {
	decision := r.PostForm.Get("decision")
	if decision != "approve" && decision != "deny" {
		u.fail(w, r, rc, http.StatusBadRequest, "Choose Approve or Deny.")
		return
	}
	comment := r.PostForm.Get("comment")
	if len(comment) > store.MaxApprovalText {
		u.fail(w, r, rc, http.StatusBadRequest, fmt.Sprintf("The comment is longer than %d bytes.", store.MaxApprovalText))
		return
	}
	u.todoAction(w, r, rc, "Deciding on todo", "decided-"+decision, func(id int64) error {
		_, err := u.store.Decide(r.Context(), id, decision == "approve", comment, rc.actor())
		return err
	})
}

// pauseQueue serves POST /queue/pause (queue in the form: a queue's name may
// hold a slash).
func (u *UI) pauseQueue(w http.ResponseWriter, r *http.Request, rc *reqCtx) {
	u.queueAction(w, r, rc, "Pausing", "paused", u.store.PauseQueue)
}

// resumeQueue serves POST /queue/resume.
func (u *UI) resumeQueue(w http.ResponseWriter, r *http.Request, rc *reqCtx) {
	u.queueAction(w, r, rc, "Resuming", "resumed", u.store.ResumeQueue)
}

func (u *UI) queueAction(w http.ResponseWriter, r *http.Request, rc *reqCtx, what, flash string,
	act func(ctx context.Context, q, actor string) error) {
	q := r.PostForm.Get("queue")
	if !store.ValidQueueName(q) {
		u.fail(w, r, rc, http.StatusBadRequest, fmt.Sprintf("%q is not a valid queue name.", q))
		return
	}
	if err := act(r.Context(), q, rc.actor()); err != nil {
		u.storeError(w, r, rc, fmt.Sprintf("%s queue %s", what, q), err)
		return
	}
	u.redirectFlash(w, r, rc, link("/", "queue", q), flash)
}

// queueControl fills in which queues are paused, how many todos await approval
// on each, and the oldest of those, for the board's counts.
func (u *UI) queueControl(w http.ResponseWriter, r *http.Request, rc *reqCtx, p *boardPage) bool {
	paused, err := u.store.PausedQueues(r.Context())
	if err != nil {
		u.storeError(w, r, rc, "Reading the paused queues", err)
		return false
	}
	waits, err := u.store.QueueWaits(r.Context())
	if err != nil {
		u.storeError(w, r, rc, "Counting todos awaiting approval", err)
		return false
	}
	for i := range p.Queues {
		q := &p.Queues[i]
		q.Awaiting = waits[q.Queue]
		for _, pq := range paused {
			if pq.Queue == q.Queue {
				q.PausedBy = pq.PausedBy
			}
		}
		if q.Queue == p.Queue {
			p.Selected = *q
		}
	}
	if len(waits) > 0 {
		if p.Awaiting, err = u.store.AwaitingApproval(r.Context(), approvalsShown); err != nil {
			u.storeError(w, r, rc, "Listing todos awaiting approval", err)
			return false
		}
	}
	return true
}
