package web

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/switchboardhq/switchboard/ingest"
	"github.com/switchboardhq/switchboard/internal/pretty"
	"github.com/switchboardhq/switchboard/store"
)

// DeliveryFailures reports the deliveries refused for each webhook (missing, wrong
// or stale signatures) since start-up. Nothing about a refused delivery is stored,
// so only the receiver knows; when it is not wired the board says so.
type DeliveryFailures interface {
	Failures(webhookID int64) (count int64, last time.Time, reason string)
}

type webhookRow struct {
	store.Webhook
	URL      string
	Stats    store.DeliveryStats
	Failures int64
	LastFail time.Time
	FailedBy string // why the last one was refused
}

type webhooksPage struct {
	Sources       []string // for the New webhook form
	Once          string   // its one-time token
	Form          webhookForm
	Webhooks      []webhookRow
	All           bool
	TrackFailures bool
	// OtherProcesses counts the other live serve processes of a fleet, which
	// count the deliveries they refuse on their own.
	OtherProcesses int
}

// webhookList serves GET /webhooks: every webhook with its ingest URL and traffic.
func (u *UI) webhookList(w http.ResponseWriter, r *http.Request, rc *reqCtx) {
	u.showWebhooks(w, r, rc, http.StatusOK, webhookForm{}, "")
}

// webhookForm is what an operator typed into a webhook form that was refused,
// shown again with the reason; never the secret.
type webhookForm struct {
	Open                              bool
	Source, Queue, Description, Grace string
	Rules                             *rulesForm // the rules form as sent; nil: as stored
}

func (u *UI) showWebhooks(w http.ResponseWriter, r *http.Request, rc *reqCtx, status int, f webhookForm, msg string) {
	all := r.URL.Query().Get("all") == "1"
	hooks, err := u.store.ListWebhooks(r.Context(), store.WebhookFilter{IncludeDeleted: all})
	if err != nil {
		u.storeError(w, r, rc, "Listing webhooks", err)
		return
	}
	stats, err := u.store.WebhookDeliveryStats(r.Context())
	if err != nil {
		u.storeError(w, r, rc, "Counting deliveries", err)
		return
	}
	p := webhooksPage{Sources: store.SourceTypes(), Once: randomToken(), Form: f, All: all, TrackFailures: u.opts.Failures != nil}
	if p.TrackFailures {
		p.OtherProcesses = u.otherLiveProcesses(r)
	}
	for _, h := range hooks {
		row := u.webhookRow(r, h)
		row.Stats = stats[h.ID]
		p.Webhooks = append(p.Webhooks, row)
	}
	u.render(w, r, rc, status, "webhooks", view{Title: "Webhooks", Nav: "webhooks", Error: msg, Page: p})
}

func (u *UI) webhookRow(r *http.Request, h store.Webhook) webhookRow {
	row := webhookRow{Webhook: h, URL: ingest.URL(u.baseURL(r), h.Token)}
	if u.opts.Failures != nil {
		row.Failures, row.LastFail, row.FailedBy = u.opts.Failures.Failures(h.ID)
	}
	return row
}

type webhookPage struct {
	Hook           webhookRow
	Graces         []struct{ Value, Label string } // for the Rotate form
	Once           string                          // its one-time token
	Form           webhookForm
	Rules          rulesForm // as stored
	RulesForm      rulesForm // as the form shows them: stored, or as sent and refused
	Events         []store.WebhookEvent
	Before, Older  int64
	TrackFailures  bool
	OtherProcesses int         // as on webhooksPage
	Charts         *chartPanel // deliveries and refusals over time
}

// webhookPage serves GET /webhook/:id: one webhook and its event history, newest
// first.
func (u *UI) webhookPage(w http.ResponseWriter, r *http.Request, rc *reqCtx) {
	id, ok := pathID(rc, "id")
	if !ok {
		u.fail(w, r, rc, http.StatusNotFound, "There is no such webhook.")
		return
	}
	u.showWebhook(w, r, rc, id, http.StatusOK, webhookForm{}, "")
}

func (u *UI) showWebhook(w http.ResponseWriter, r *http.Request, rc *reqCtx, id int64, status int, f webhookForm, msg string) {
	h, err := u.store.Webhook(r.Context(), id)
	if err != nil {
		u.storeError(w, r, rc, fmt.Sprintf("Webhook %d", id), err)
		return
	}
	p := webhookPage{Hook: u.webhookRow(r, h), Graces: graces, Once: randomToken(), Form: f, TrackFailures: u.opts.Failures != nil}
	if p.TrackFailures {
		p.OtherProcesses = u.otherLiveProcesses(r)
	}
	p.Rules = rulesFormOf(h.RulesJSON())
	if p.RulesForm = p.Rules; f.Rules != nil {
		p.RulesForm = *f.Rules
	}
	var ok bool
	if p.Charts, ok = u.webhookCharts(w, r, rc, id); !ok {
		return
	}
	if r.URL.Query().Get("fragment") == "charts" {
		u.renderFragment(w, rc, "webhook", "charts-fragment", view{Page: p})
		return
	}
	p.Before, _ = strconv.ParseInt(r.URL.Query().Get("before"), 10, 64)
	p.Events, err = u.store.ListWebhookEvents(r.Context(), store.EventFilter{WebhookID: id, Before: p.Before, Limit: u.opts.PageSize + 1})
	if err != nil {
		u.storeError(w, r, rc, fmt.Sprintf("Events of webhook %d", id), err)
		return
	}
	p.Events, p.Older = store.PageOf(p.Events, u.opts.PageSize)
	if stats, err := u.store.WebhookDeliveryStats(r.Context()); err == nil {
		p.Hook.Stats = stats[id]
	}
	u.render(w, r, rc, status, "webhook", view{Title: fmt.Sprintf("Webhook %d", id), Nav: "webhooks", Error: msg, Page: p})
}

// deleteWebhook serves POST /webhook/:id/delete.
func (u *UI) deleteWebhook(w http.ResponseWriter, r *http.Request, rc *reqCtx) {
	id, ok := pathID(rc, "id")
	if !ok {
		u.fail(w, r, rc, http.StatusNotFound, "There is no such webhook.")
		return
	}
	if err := u.store.DeleteWebhook(r.Context(), id, 0, rc.actor()); err != nil {
		u.storeError(w, r, rc, fmt.Sprintf("Deleting webhook %d", id), err)
		return
	}
	u.redirectFlash(w, r, rc, "/webhooks", "deleted")
}

type header struct{ Name, Value string }

type eventPage struct {
	Event   store.WebhookEvent
	Hook    store.Webhook
	Headers []header
	Body    pretty.Text  // the body as text, indented when JSON, cut when long
	Binary  bool         // Body is base64: the body is not UTF-8 text
	Replays []store.Todo // the todos replaying it made, newest first
}

// maxReplaysShown bounds the replays an event's page lists.
const maxReplaysShown = 20

// eventPage serves GET /events/:id: one delivery's headers and body, as received.
func (u *UI) eventPage(w http.ResponseWriter, r *http.Request, rc *reqCtx) {
	id, ok := pathID(rc, "id")
	if !ok {
		u.fail(w, r, rc, http.StatusNotFound, "There is no such event.")
		return
	}
	e, err := u.store.WebhookEvent(r.Context(), id)
	if err != nil {
		u.storeError(w, r, rc, fmt.Sprintf("Event %d", id), err)
		return
	}
	h, err := u.store.Webhook(r.Context(), e.WebhookID)
	if err != nil {
		u.storeError(w, r, rc, fmt.Sprintf("Webhook %d", e.WebhookID), err)
		return
	}
	p := eventPage{Event: e, Hook: h}
	if p.Replays, err = u.store.ReplaysOf(r.Context(), id, maxReplaysShown); err != nil {
		u.storeError(w, r, rc, fmt.Sprintf("Replays of event %d", id), err)
		return
	}
	for k, v := range e.Headers {
		p.Headers = append(p.Headers, header{k, v})
	}
	sort.Slice(p.Headers, func(i, j int) bool { return p.Headers[i].Name < p.Headers[j].Name })
	if utf8.Valid(e.Body) {
		p.Body = pretty.Format(string(e.Body))
	} else {
		// Base64 is a third longer than what it encodes: encode what fits.
		shown := e.Body[:min(len(e.Body), pretty.MaxOutput/4*3)]
		p.Body = pretty.Text{Body: base64.StdEncoding.EncodeToString(shown), Cut: len(shown) < len(e.Body), Size: len(e.Body)}
		p.Binary = true
	}
	u.render(w, r, rc, http.StatusOK, "event", view{Title: fmt.Sprintf("Event %d", id), Nav: "webhooks", Page: p})
}

// replayEvent serves POST /events/:id/replay: a new todo from the stored delivery.
func (u *UI) replayEvent(w http.ResponseWriter, r *http.Request, rc *reqCtx) {
	id, ok := pathID(rc, "id")
	if !ok {
		u.fail(w, r, rc, http.StatusNotFound, "There is no such event.")
		return
	}
	t, err := u.store.ReplayWebhookEvent(r.Context(), id, 0, rc.actor(), ingest.ReplayOptions)
	if err != nil {
		u.storeError(w, r, rc, fmt.Sprintf("Replaying event %d", id), err)
		return
	}
	u.redirectFlash(w, r, rc, fmt.Sprintf("/todos/%d", t.ID), "replayed")
}
