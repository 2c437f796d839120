package web

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/switchboardhq/switchboard/agent"
	"github.com/switchboardhq/switchboard/store"
)

// maxLeaseSeconds mirrors the lease clamp agents get (24 h).
const maxLeaseSeconds = 86400

type endpointListPage struct {
	Endpoints []endpointRow
	All       bool
	AllVerbs  int
	// OtherProcesses counts the other live serve processes of a fleet: they
	// hold MCP sessions of their own, which Activity does not show.
	OtherProcesses int
}

// AgentActivity reports what each endpoint's agent is doing (agent.Agent does),
// so that an operator sees an agent stop.
type AgentActivity interface {
	Activity(endpointID int64) agent.Activity
}

// endpointRow is an endpoint with what its agent is doing: its sessions and latest
// request, and the todos it holds.
type endpointRow struct {
	store.Endpoint
	Activity agent.Activity
	Tracked  bool // Activity is known (the board was given Agents)
	Holds    int
	Grants   []store.OAuthGrant // OAuth clients that act as this endpoint
}

// DefaultVerbs is how many of the verbs granted by default the endpoint has;
// the opt-in ones (add_todo) are shown apart.
func (e endpointRow) DefaultVerbs() int {
	n := 0
	for _, v := range store.AllVerbs() {
		if slices.Contains(e.Verbs, v) {
			n++
		}
	}
	return n
}

// endpointList serves GET /endpoints.
func (u *UI) endpointList(w http.ResponseWriter, r *http.Request, rc *reqCtx) {
	all := r.URL.Query().Get("all") == "1"
	eps, err := u.store.ListEndpoints(r.Context(), all)
	if err != nil {
		u.storeError(w, r, rc, "Listing endpoints", err)
		return
	}
	held, err := u.store.ClaimsByOwner(r.Context())
	if err != nil {
		u.storeError(w, r, rc, "Counting the agents' claims", err)
		return
	}
	grants, err := u.grantsByEndpoint(r)
	if err != nil {
		u.storeError(w, r, rc, "Listing OAuth grants", err)
		return
	}
	p := endpointListPage{All: all, AllVerbs: len(store.AllVerbs())}
	if u.opts.Agents != nil {
		p.OtherProcesses = u.otherLiveProcesses(r)
	}
	for _, ep := range eps {
		row := endpointRow{Endpoint: ep, Holds: held["agent:"+ep.AgentID], Tracked: u.opts.Agents != nil,
			Grants: grants[ep.ID]}
		if u.opts.Agents != nil {
			row.Activity = u.opts.Agents.Activity(ep.ID)
		}
		p.Endpoints = append(p.Endpoints, row)
	}
	u.render(w, r, rc, http.StatusOK, "endpoints", view{Title: "Endpoints", Nav: "endpoints", Page: p})
}

// maxRate bounds the rate and burst an operator may set on the board.
const maxRate = 1_000_000

// endpointForm is the create/edit form, as submitted or prefilled.
type endpointForm struct {
	New            bool
	ID             int64
	AgentID        string
	Name           string
	Queues         string
	Verbs          []string
	DefaultLease   string
	MaxWebhooks    string
	Rate, Burst    string // empty: the server's default
	WebhookSources []string
	WebhookQueues  string
	Capabilities   string
	ToolAllow      string // comma-separated; empty: every tool of the granted modules
	ToolDeny       string
	allowGiven     bool // the submitted form had the field
	denyGiven      bool
	AddQueues      string // comma-separated: the queues add_todo may put todos on
	addGiven       bool
	Revoked        bool
	Endpoint       *store.Endpoint // the saved endpoint, when editing
	Once           string          // the New endpoint form's one-time token
	Next           string          // an OAuth consent page to go back to once created

	TodoVerbs, WebhookVerbs, Sources []string
	OptInVerbs                       []string // never granted by default (add_todo)
	Modules                          []string // the capability modules this server runs, to grant
	Tools                            []string // their tools, by the names agents see
}

func (u *UI) newForm() endpointForm {
	f := endpointForm{TodoVerbs: store.TodoVerbs(), WebhookVerbs: store.WebhookVerbs(), OptInVerbs: store.OptInVerbs(),
		Sources: store.SourceTypes()}
	if u.opts.Modules != nil {
		for _, m := range u.opts.Modules.Status() {
			f.Modules = append(f.Modules, m.Name)
			for _, t := range m.Tools {
				f.Tools = append(f.Tools, t.Name)
			}
		}
	}
	return f
}

// endpointPage serves GET /endpoints/:id, the edit form, and GET /endpoints/new.
func (u *UI) endpointPage(w http.ResponseWriter, r *http.Request, rc *reqCtx) {
	if rc.Params.ByName("id") == "new" {
		f := u.newForm()
		f.New, f.Verbs, f.MaxWebhooks, f.Once = true, store.AllVerbs(), "0", randomToken()
		f.Next = consentReturn(r.URL.Query().Get("next"))
		u.showEndpointForm(w, r, rc, http.StatusOK, f, "")
		return
	}
	id, ok := pathID(rc, "id")
	if !ok {
		u.fail(w, r, rc, http.StatusNotFound, "There is no such endpoint.")
		return
	}
	ep, err := u.store.Endpoint(r.Context(), id)
	if err != nil {
		u.storeError(w, r, rc, fmt.Sprintf("Endpoint %d", id), err)
		return
	}
	f := u.newForm()
	f.ID, f.AgentID, f.Name, f.Endpoint, f.Revoked = ep.ID, ep.AgentID, ep.AgentName, &ep, ep.RevokedAt != nil
	f.Queues, f.Verbs = strings.Join(ep.Queues, ", "), ep.Verbs
	if ep.DefaultLeaseTTL > 0 {
		f.DefaultLease = strconv.Itoa(ep.DefaultLeaseTTL)
	}
	f.MaxWebhooks = strconv.Itoa(ep.Ceiling.MaxWebhooks)
	if ep.RatePerSecond > 0 {
		f.Rate = strconv.FormatFloat(ep.RatePerSecond, 'f', -1, 64)
	}
	if ep.RateBurst > 0 {
		f.Burst = strconv.Itoa(ep.RateBurst)
	}
	f.WebhookSources, f.WebhookQueues = ep.Ceiling.Sources, strings.Join(ep.Ceiling.Queues, ", ")
	f.Capabilities = strings.Join(ep.Capabilities, ", ")
	f.ToolAllow, f.ToolDeny = strings.Join(ep.ToolAllow, ", "), strings.Join(ep.ToolDeny, ", ")
	f.AddQueues = strings.Join(ep.AddQueues, ", ")
	u.showEndpointForm(w, r, rc, http.StatusOK, f, "")
}

func (u *UI) showEndpointForm(w http.ResponseWriter, r *http.Request, rc *reqCtx, status int, f endpointForm, msg string) {
	title := "New endpoint"
	if !f.New {
		title = "Endpoint " + f.AgentID
	}
	u.render(w, r, rc, status, "endpoint", view{Title: title, Nav: "endpoints", Error: msg, Page: f})
}

// readEndpointForm reads and checks the submitted form; msg says what is wrong.
func (u *UI) readEndpointForm(r *http.Request, creating bool) (endpointForm, store.EndpointSpec, string) {
	pf := r.PostForm
	f := u.newForm()
	f.New, f.Once, f.Next = creating, pf.Get("once"), consentReturn(pf.Get("next"))
	f.AgentID, f.Name = strings.TrimSpace(pf.Get("agent_id")), strings.TrimSpace(pf.Get("name"))
	f.Queues, f.Verbs = pf.Get("queues"), pf["verbs"]
	f.DefaultLease, f.MaxWebhooks = strings.TrimSpace(pf.Get("default_lease")), strings.TrimSpace(pf.Get("max_webhooks"))
	f.Rate, f.Burst = strings.TrimSpace(pf.Get("rate")), strings.TrimSpace(pf.Get("burst"))
	f.WebhookSources, f.WebhookQueues, f.Capabilities = pf["webhook_sources"], pf.Get("webhook_queues"), pf.Get("capabilities")
	// Read before anything can be refused, so that the form shown again with the
	// refusal carries them, and its next submission does not clear them.
	_, f.allowGiven = pf["tool_allow"]
	_, f.denyGiven = pf["tool_deny"]
	f.ToolAllow, f.ToolDeny = pf.Get("tool_allow"), pf.Get("tool_deny")
	_, f.addGiven = pf["add_queues"]
	f.AddQueues = pf.Get("add_queues")

	queues, wqueues, caps := splitList(f.Queues), splitList(f.WebhookQueues), splitList(f.Capabilities)
	addQueues := splitList(f.AddQueues)
	if creating && !store.ValidAgentID(f.AgentID) {
		return f, store.EndpointSpec{}, "The agent id must be 1-64 of a-z 0-9 _ . - and start with a letter or digit."
	}
	if len(queues) == 0 && len(caps) == 0 {
		return f, store.EndpointSpec{}, "Give at least one queue the agent may work, or grant it capability modules alone."
	}
	for _, q := range slices.Concat(queues, wqueues, addQueues) {
		if !store.ValidQueueName(q) {
			return f, store.EndpointSpec{}, fmt.Sprintf("%q is not a valid queue name (letters, digits and . _ - : /).", q)
		}
	}
	if err := store.CheckVerbs(f.Verbs); err != nil {
		return f, store.EndpointSpec{}, refusedWord(err)
	}
	verbs := append([]string{}, f.Verbs...)
	if len(queues) == 0 {
		// An agent of capability modules alone: on a new endpoint the verbs,
		// ticked by default, have no queue to work on and are not granted (the
		// form shown again keeps them ticked as sent); an edit that empties the
		// queues of an agent with verbs is refused, as the CLI refuses it, rather
		// than turn a queue worker into a modules-only agent by a slip.
		if !creating && len(verbs) > 0 {
			return f, store.EndpointSpec{}, "With no queues the agent works capability modules alone: untick its verbs too, or give it queues."
		}
		verbs = []string{}
	}
	if err := store.CheckSourceTypes(f.WebhookSources...); err != nil {
		return f, store.EndpointSpec{}, refusedWord(err)
	}
	sources := append([]string{}, f.WebhookSources...)
	lease, err := optionalInt(f.DefaultLease)
	if err != nil || lease < 0 || lease > maxLeaseSeconds {
		return f, store.EndpointSpec{}, fmt.Sprintf("The default lease must be a whole number of seconds from 0 to %d (empty or 0: not set).", maxLeaseSeconds)
	}
	maxHooks, err := optionalInt(f.MaxWebhooks)
	if err != nil || maxHooks < 0 || maxHooks > 10000 {
		return f, store.EndpointSpec{}, "The webhook ceiling must be a whole number from 0 to 10000."
	}
	if len(wqueues) == 0 && maxHooks > 0 {
		wqueues = queues
	}
	rate, burst, msg := readRate(f)
	if msg != "" {
		return f, store.EndpointSpec{}, msg
	}
	spec := store.EndpointSpec{AgentName: f.Name, Verbs: &verbs, Queues: &queues, DefaultLeaseTTL: &lease,
		MaxWebhooks: &maxHooks, WebhookSources: &sources, WebhookQueues: &wqueues, Capabilities: &caps,
		RatePerSecond: &rate, RateBurst: &burst}
	if f.addGiven {
		spec.AddQueues = &addQueues // add_todo itself is granted by its box alone
	}
	if msg := readToolLists(f, &spec); msg != "" {
		return f, store.EndpointSpec{}, msg
	}
	return f, spec, ""
}

// readRate reads the form's rate limit; msg says what is wrong.
func readRate(f endpointForm) (rate float64, burst int, msg string) {
	if f.Rate != "" {
		var err error
		rate, err = strconv.ParseFloat(f.Rate, 64)
		if err != nil || !(rate >= 0 && rate <= maxRate) {
			return 0, 0, fmt.Sprintf("The rate must be a number of calls a second from 0 to %d (empty or 0: the server's default).", maxRate)
		}
	}
	burst, err := optionalInt(f.Burst)
	if err != nil || burst < 0 || burst > maxRate {
		return 0, 0, fmt.Sprintf("The burst must be a whole number of calls from 0 to %d (empty or 0: the server's default).", maxRate)
	}
	return rate, burst, ""
}

// readToolLists sets spec's tool allow and deny lists from the form; msg says
// what is wrong. A form without a tool field (a page from before they were on
// it) keeps that list as it is.
func readToolLists(f endpointForm, spec *store.EndpointSpec) (msg string) {
	for _, l := range []struct {
		given bool
		text  string
		set   **[]string
	}{{f.allowGiven, f.ToolAllow, &spec.ToolAllow}, {f.denyGiven, f.ToolDeny, &spec.ToolDeny}} {
		if !l.given {
			continue
		}
		tools := splitList(l.text)
		for _, t := range tools {
			if !toolNamePattern.MatchString(t) {
				return fmt.Sprintf("%q is not a tool name (1-128 of A-Z a-z 0-9 _ . -, as agents see it: module_tool).", t)
			}
		}
		*l.set = &tools
	}
	return ""
}

// refusedWord says the store's refusal of a verb or source type as the board
// does. The form asks the store before anything else of it is refused.
func refusedWord(err error) string {
	var w *store.UnknownWordError
	switch {
	case errors.As(err, &w) && w.What == store.WordSourceType:
		return fmt.Sprintf("%q is not a webhook source type.", w.Value)
	case errors.As(err, &w):
		return fmt.Sprintf("%q is not a %s.", w.Value, w.What)
	}
	return plainError(err) + "."
}

// toolNamePattern is MCP's rule for a tool's name.
var toolNamePattern = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`)

// createEndpoint serves POST /endpoints and shows the credential, once.
func (u *UI) createEndpoint(w http.ResponseWriter, r *http.Request, rc *reqCtx) {
	f, spec, msg := u.readEndpointForm(r, true)
	if msg != "" {
		u.showEndpointForm(w, r, rc, http.StatusBadRequest, f, msg)
		return
	}
	spec.OwnerOperatorID = rc.Operator.ID
	// Sent again (a reload of the page it answered), the form shows the
	// endpoint it made rather than make a second one.
	u.runOnce(w, r, rc, func() onceShow {
		ep, cred, err := u.store.CreateEndpoint(r.Context(), f.AgentID, spec, rc.actor())
		if err != nil {
			if errorsIs(err, store.ErrInvalid) || errorsIs(err, store.ErrAlreadyExists) {
				u.showEndpointForm(w, r, rc, http.StatusBadRequest, f, plainError(err)+".")
				return nil
			}
			u.storeError(w, r, rc, "Creating the endpoint", err)
			return nil
		}
		mcpURL := u.baseURL(r) + "/mcp"
		page := endpointCreatedPage{Endpoint: ep, Credential: cred, MCPURL: mcpURL, CredentialEnv: agent.CredentialEnv,
			Export: agent.ExportLine(cred), Config: agent.ClientConfig(mcpURL, agent.FromEnv),
			ConfigInline: agent.ClientConfig(mcpURL, cred), ClaudeCommand: agent.ClaudeAddCommand(mcpURL, agent.FromEnv),
			UnknownCapabilities: u.unknownCapabilities(ep.Capabilities),
			UnknownTools:        u.unknownTools(ep), Next: f.Next}
		return func(w http.ResponseWriter, r *http.Request, rc *reqCtx) {
			u.render(w, r, rc, http.StatusOK, "endpoint_created", view{Title: "Endpoint created", Nav: "endpoints", Page: page})
		}
	})
}

type endpointCreatedPage struct {
	Endpoint      store.Endpoint
	Credential    string
	MCPURL        string
	CredentialEnv string
	// Export sets CredentialEnv to the credential, which Config and
	// ClaudeCommand read from there; ConfigInline holds the credential itself.
	Export        string
	Config        string
	ConfigInline  string
	ClaudeCommand string
	// UnknownCapabilities are those granted that no module here provides: a
	// misspelling, or a module not set up yet.
	UnknownCapabilities []string
	// UnknownTools are those the tool lists name that no module here offers.
	UnknownTools []string
	// Next is the OAuth consent page the endpoint was made for.
	Next string
}

// unknownTools returns the names in ep's tool lists that no module this server
// runs offers: a misspelling, or a module's own name for a tool rather than the
// prefixed one agents see, which a deny list would then not deny.
func (u *UI) unknownTools(ep store.Endpoint) []string {
	offered := map[string]bool{}
	if u.opts.Modules != nil {
		for _, m := range u.opts.Modules.Status() {
			for _, t := range m.Tools {
				offered[t.Name] = true
			}
		}
	}
	var unknown []string
	for _, t := range append(slices.Clone(ep.ToolAllow), ep.ToolDeny...) {
		if !offered[t] && !slices.Contains(unknown, t) {
			unknown = append(unknown, t)
		}
	}
	return unknown
}

// unknownCapabilities returns those of caps that name no module this server
// runs (every one, when it runs none). They are granted all the same, as the CLI
// grants them, since a module may be set up after its grant; the page says so.
func (u *UI) unknownCapabilities(caps []string) []string {
	known := map[string]bool{}
	if u.opts.Modules != nil {
		for _, m := range u.opts.Modules.Status() {
			known[m.Name] = true
		}
	}
	var unknown []string
	for _, c := range caps {
		if !known[c] {
			unknown = append(unknown, c)
		}
	}
	return unknown
}

// baseURL is the configured public URL, or the one the browser used to reach us.
func (u *UI) baseURL(r *http.Request) string {
	if u.opts.BaseURL != "" {
		return strings.TrimRight(u.opts.BaseURL, "/")
	}
	scheme := "http"
	if u.secure(r) {
		scheme = "https"
	}
	return (&url.URL{Scheme: scheme, Host: r.Host}).String()
}

// updateEndpoint serves POST /endpoints/:id: change scope, lease and ceiling.
func (u *UI) updateEndpoint(w http.ResponseWriter, r *http.Request, rc *reqCtx) {
	id, ok := pathID(rc, "id")
	if !ok {
		u.fail(w, r, rc, http.StatusNotFound, "There is no such endpoint.")
		return
	}
	f, spec, msg := u.readEndpointForm(r, false)
	f.ID = id
	if msg != "" {
		if ep, err := u.store.Endpoint(r.Context(), id); err == nil {
			f.AgentID, f.Endpoint = ep.AgentID, &ep
			// Shown again with a field the form lacked, as stored, so that the
			// next submission keeps it.
			if !f.allowGiven {
				f.ToolAllow = strings.Join(ep.ToolAllow, ", ")
			}
			if !f.denyGiven {
				f.ToolDeny = strings.Join(ep.ToolDeny, ", ")
			}
			if !f.addGiven {
				f.AddQueues = strings.Join(ep.AddQueues, ", ")
			}
		}
		u.showEndpointForm(w, r, rc, http.StatusBadRequest, f, msg)
		return
	}
	ep, err := u.store.UpdateEndpoint(r.Context(), id, spec, rc.actor())
	if err != nil {
		u.storeError(w, r, rc, fmt.Sprintf("Updating endpoint %d", id), err)
		return
	}
	flash := "updated"
	if len(u.unknownCapabilities(ep.Capabilities)) > 0 {
		flash = "updated-unknown-capabilities"
	} else if len(u.unknownTools(ep)) > 0 {
		flash = "updated-unknown-tools"
	}
	u.redirectFlash(w, r, rc, fmt.Sprintf("/endpoints/%d", id), flash)
}

// revokeEndpoint serves POST /endpoints/:id/revoke.
func (u *UI) revokeEndpoint(w http.ResponseWriter, r *http.Request, rc *reqCtx) {
	id, ok := pathID(rc, "id")
	if !ok {
		u.fail(w, r, rc, http.StatusNotFound, "There is no such endpoint.")
		return
	}
	rev, err := u.store.RevokeEndpointReleasing(r.Context(), id, rc.actor())
	if err != nil {
		u.storeError(w, r, rc, fmt.Sprintf("Revoking endpoint %d", id), err)
		return
	}
	flash := "revoked"
	switch {
	case rev.Kept && rev.Holds > 0:
		flash = "revoked-kept"
	case rev.Released > 0:
		flash = fmt.Sprintf("revoked-released:%d", rev.Released)
	}
	u.redirectFlash(w, r, rc, "/endpoints", flash)
}

// splitList splits a comma- or space-separated list, dropping empties and repeats.
func splitList(s string) []string {
	out := []string{}
	for _, p := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\n' || r == '\t' || r == '\r' }) {
		if !contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

func optionalInt(s string) (int, error) {
	if s == "" {
		return 0, nil
	}
	return strconv.Atoi(s)
}
