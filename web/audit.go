package web

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/switchboardhq/switchboard/store"
)

type auditPage struct {
	Actor, Action string
	Before        int64
	Entries       []store.AuditEntry
	Older         int64
	Actions       []string // suggestions for the action filter
}

// auditActions are offered as suggestions in the action filter; any other action
// (or a prefix ending in ".") can be typed.
var auditActions = []string{"todo.", "todo.add", "todo.claim", "todo.claim_next", "todo.complete", "todo.fail",
	"todo.release", "todo.retry", "todo.requeue", "todo.dead_letter", "endpoint.", "endpoint.create",
	"endpoint.update", "endpoint.revoke", "human.", "human.login", "human.logout", "human.logout_all", "human.logout_others", "human.password",
	"human.create",
	"webhook.", "webhook.create", "webhook.rotate", "webhook.delete", "webhook_event.replay", "module."}

// auditPage serves GET /audit, filterable by actor and action, newest first.
func (u *UI) auditPage(w http.ResponseWriter, r *http.Request, rc *reqCtx) {
	q := r.URL.Query()
	p := auditPage{Actor: strings.TrimSpace(q.Get("actor")), Action: strings.TrimSpace(q.Get("action")), Actions: auditActions}
	p.Before, _ = strconv.ParseInt(q.Get("before"), 10, 64)
	entries, err := u.store.ListAudit(r.Context(), store.AuditFilter{Actor: u.operatorActor(r.Context(), p.Actor), Action: p.Action,
		Before: p.Before, Limit: u.opts.PageSize + 1})
	if err != nil {
		u.storeError(w, r, rc, "Reading the audit log", err)
		return
	}
	p.Entries, p.Older = store.PageOf(entries, u.opts.PageSize)
	u.render(w, r, rc, http.StatusOK, "audit", view{Title: "Audit log", Nav: "audit", Page: p})
}
