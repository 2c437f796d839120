package agent

import (
	"context"
	"errors"
	"strconv"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/switchboardhq/switchboard/store"
)

// Keeping live sessions and listeners current (see the package comment).

// refresh rebuilds the tools of every live session of ep (whose definitions quote
// its settings) and tells each client with tools/list_changed, listeners of ep's
// too.
func (a *Agent) refresh(ctx context.Context, ep store.Endpoint) {
	a.forgetTools(ep.ID)
	for _, l := range a.listening.list() {
		if l.endpoint().ID == ep.ID {
			l.mu.Lock()
			l.ep, l.builtOn = ep, toolInputs(ep)
			l.mu.Unlock()
			a.listChanged(l)
		}
	}
	tools, defs := a.sessionTools(ctx, ep), a.verbDefs(ep)
	for _, x := range a.sessions.ofEndpoint(ep.ID) {
		x.setEndpoint(ep)
		x.mu.Lock()
		t := x.tools
		x.builtOn = toolInputs(ep)
		if t != nil {
			x.defs = defs
		}
		x.mu.Unlock()
		if t == nil {
			continue
		}
		t.SetSessionTools(tools)
		err := a.mcp.SendNotificationToSpecificClient(x.id, string(mcp.MethodNotificationToolsListChanged), nil)
		// Counted after the send: the session's POSTs go through mcp-go, which
		// streams it ahead of an answer, until one that began after this has.
		x.notices.Add(1)
		if err != nil && !errors.Is(err, server.ErrSessionNotFound) {
			a.log.Debug("tools/list_changed not sent", "session", x.id, "err", err)
		}
	}
}

// RefreshSessions rebuilds the tools of the live sessions of one endpoint (or of
// all, for id 0), for example after a module's tools changed.
func (a *Agent) RefreshSessions(ctx context.Context, endpointID int64) {
	a.forgetTools(endpointID)
	seen := map[int64]bool{}
	ids := []int64{}
	for _, x := range a.sessions.all() {
		ids = append(ids, x.endpointID)
	}
	for _, l := range a.listening.list() {
		ids = append(ids, l.endpoint().ID)
	}
	for _, id := range ids {
		if (endpointID != 0 && id != endpointID) || seen[id] {
			continue
		}
		seen[id] = true
		ep, err := a.st.Endpoint(ctx, id)
		if err != nil {
			a.log.Warn("refresh sessions: load endpoint", "endpoint", id, "err", err)
			continue
		}
		a.refresh(ctx, ep)
	}
}

// toolInputs is everything about an endpoint that its sessions' tool list is
// built from: when it changes, the tools are rebuilt.
func toolInputs(ep store.Endpoint) string { return string(appendToolInputs(nil, ep)) }

// appendToolInputs appends toolInputs(ep) to b. Every stateless request compares
// it (endpointTools), so it is written out, where fmt.Sprint spent microseconds
// reflecting on each request, and can be built in a buffer of the caller's.
func appendToolInputs(b []byte, ep store.Endpoint) []byte {
	b = appendList(b, ep.Verbs)
	b = appendList(b, ep.Queues)
	b = strconv.AppendInt(b, int64(ep.DefaultLeaseTTL), 10)
	b = append(b, ';')
	b = strconv.AppendInt(b, int64(ep.Ceiling.MaxWebhooks), 10)
	b = append(b, ';')
	b = appendList(b, ep.Ceiling.Sources)
	b = appendList(b, ep.Ceiling.Queues)
	b = appendList(b, ep.Capabilities)
	b = appendList(b, ep.ToolAllow)
	return appendList(b, ep.ToolDeny)
}

// appendList appends a list so that no two lists read alike: its length, then
// each item quoted.
func appendList(b []byte, xs []string) []byte {
	b = strconv.AppendInt(b, int64(len(xs)), 10)
	for _, x := range xs {
		b = strconv.AppendQuote(b, x)
	}
	return append(b, ';')
}

// Revalidate re-reads the endpoint of every live session and listener. Sessions
// and listen streams of revoked or deleted endpoints, or of revoked OAuth grants,
// end at once (their streams close and session ids stop working); the others get the fresh scope the
// doorbell filters on, and, when a human edited the endpoint (say from the CLI),
// tools rebuilt from it with tools/list_changed. It reports whether every
// endpoint could be read.
func (a *Agent) Revalidate(ctx context.Context) (ok bool) {
	ok = true
	eps := map[int64]*store.Endpoint{}
	load := func(id int64) (*store.Endpoint, bool) {
		if ep, seen := eps[id]; seen {
			return ep, true
		}
		got, err := a.st.Endpoint(ctx, id)
		switch {
		case err == nil && got.RevokedAt == nil:
			eps[id] = &got
		case err == nil || errors.Is(err, store.ErrNotFound):
			eps[id] = nil
		default:
			a.log.Warn("revalidate sessions: load endpoint", "endpoint", id, "err", err)
			ok = false
			return nil, false
		}
		return eps[id], true
	}
	stale := map[int64]store.Endpoint{}
	for _, x := range a.sessions.all() {
		ep, read := load(x.endpointID)
		switch {
		case !read:
			continue
		case ep == nil:
			a.endSession(x.id)
			continue
		}
		x.setEndpoint(*ep)
		x.mu.Lock()
		if x.tools != nil && x.builtOn != toolInputs(*ep) {
			stale[ep.ID] = *ep
		}
		x.mu.Unlock()
	}
	for _, ep := range stale {
		a.refresh(ctx, ep)
	}
	for _, l := range a.listening.list() {
		load(l.endpoint().ID)
	}
	a.revalidateListeners(eps)
	return a.endRevokedGrants(ctx) && ok
}
