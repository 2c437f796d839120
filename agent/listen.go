package agent

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/switchboardhq/switchboard/store"
)

// subscriptions/listen is where a client of the stateless revision hears from the
// server: the answer to it is a stream that stays open until the client goes. The
// agent serves it itself rather than through mcp-go, whose listen stream carries
// only the list changes of the spec (it keeps an extension's notifications off by
// design) and closes at once when none was asked for: the doorbell is an
// extension's notification, and a worker may listen for nothing else.
//
// A client asks for the doorbell with a "claude/channel" member in params.
// notifications ({} for every queue of its credential, or {"queues": [...]} for
// some of them), or by declaring the experimental "claude/channel" capability in
// its _meta (every queue), which is how a client that cannot add members to the
// request (the official Go SDK) opts in. toolsListChanged works as in the spec.

// listener is one open subscriptions/listen stream.
type listener struct {
	id     json.RawMessage // the listen request's id, which tags every message on the stream
	queues []string        // the doorbell's queues (nil: no doorbell, unless every)
	every  bool            // the doorbell of every queue the credential covers, as it changes
	lists  bool            // tools/list_changed asked for
	out    chan []byte     // messages to write; a full one drops a ring
	cancel context.CancelCauseFunc
	seq    uint64 // order of opening, for ending a credential's oldest
	grant  int64  // the OAuth grant whose token opened it; 0: the endpoint's bearer

	mu      sync.Mutex
	ep      store.Endpoint
	builtOn string // toolInputs of the endpoint its client last listed tools of
}

func (l *listener) endpoint() store.Endpoint {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ep
}

// listeners are the open listen streams.
type listeners struct {
	mu   sync.Mutex
	all  map[*listener]struct{}
	next uint64
}

// add registers l and ends the oldest streams of its endpoint beyond max: a
// credential that listens in a loop holds at most max streams, as it holds at
// most max sessions.
func (s *listeners) add(l *listener, max int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.all == nil {
		s.all = map[*listener]struct{}{}
	}
	s.next++
	l.seq = s.next
	s.all[l] = struct{}{}
	var same []*listener
	for o := range s.all {
		if o.endpoint().ID == l.endpoint().ID {
			same = append(same, o)
		}
	}
	if len(same) <= max {
		return
	}
	slices.SortFunc(same, func(x, y *listener) int { return cmp.Compare(x.seq, y.seq) })
	for _, o := range same[:len(same)-max] {
		delete(s.all, o)
		o.end(fmt.Sprintf("this credential opened more than %d listen streams, and this was its oldest", max))
	}
}

// listenEnd is why the server ended a listen stream, which its last message
// (an error answering the listen) tells the client: a stream that just stops
// reads as a server that broke.
type listenEnd string

func (e listenEnd) Error() string { return string(e) }

// end ends l's stream, telling its client why.
func (l *listener) end(why string) { l.cancel(listenEnd(why)) }

func (s *listeners) remove(l *listener) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.all, l)
}

func (s *listeners) list() []*listener {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*listener, 0, len(s.all))
	for l := range s.all {
		out = append(out, l)
	}
	return out
}

// listenParams is what subscriptions/listen asks for.
type listenParams struct {
	Meta          *mcp.Meta `json:"_meta"`
	Notifications struct {
		ToolsListChanged bool `json:"toolsListChanged"`
		Channel          *struct {
			Queues []string `json:"queues"`
		} `json:"claude/channel"`
	} `json:"notifications"`
}

// serveListen serves a subscriptions/listen of ep's: refused before anything is
// sent if it names a queue out of ep's scope; else acknowledged with what it
// will get, then held open, carrying doorbells and list changes, until the
// client goes, the credential is revoked, or the server shuts down.
func (a *Agent) serveListen(ctx context.Context, w http.ResponseWriter, ep store.Endpoint, id json.RawMessage, body []byte) {
	// As mcp-go reads the request first (what it refuses, it refuses as
	// unparsable), then the extension it does not know.
	var req mcp.SubscriptionsListenRequest
	if err := json.Unmarshal(body, &req); err != nil {
		writeRPCError(w, id, mcp.INVALID_REQUEST, fmt.Sprintf("unparsable %s request: %v", mcp.MethodSubscriptionsListen, err),
			http.StatusBadRequest)
		return
	}
	var msg struct {
		Params listenParams `json:"params"`
	}
	if err := json.Unmarshal(body, &msg); err != nil {
		writeRPCError(w, id, mcp.INVALID_PARAMS, "subscriptions/listen: params: "+argumentProblem(err), http.StatusBadRequest)
		return
	}
	p := msg.Params
	l := &listener{id: id, lists: p.Notifications.ToolsListChanged, out: make(chan []byte, 64), grant: ep.OAuthGrantID,
		ep: ep, builtOn: toolInputs(ep)}
	switch {
	case p.Notifications.Channel != nil && p.Notifications.Channel.Queues != nil:
		for _, q := range p.Notifications.Channel.Queues {
			if !slices.Contains(ep.Queues, q) {
				writeRPCError(w, id, mcp.INVALID_PARAMS, fmt.Sprintf("subscriptions/listen: queue %.100q is not in this credential's scope (%v)",
					q, ep.Queues), http.StatusBadRequest)
				return
			}
		}
		if len(p.Notifications.Channel.Queues) > 0 {
			l.queues = slices.Clone(p.Notifications.Channel.Queues)
		} // else no queue: no doorbell, nor a stream held open for it
	case p.Notifications.Channel != nil || declaresChannel(p.Meta):
		l.queues, l.every = slices.Clone(ep.Queues), true
	}
	if l.queues == nil && !l.every && !l.lists {
		// Nothing to deliver: acknowledged and ended at once, as the spec says.
		a.writeStream(w, l, false)
		return
	}
	ctx, l.cancel = context.WithCancelCause(ctx)
	defer l.cancel(nil)
	a.listening.add(l, a.opts.MaxSessionsPerEndpoint)
	defer a.listening.remove(l)
	a.writeStream(w, l, true)
	a.holdStream(ctx, w, l)
}

// declaresChannel says whether a request's _meta declares the experimental
// claude/channel client capability.
func declaresChannel(m *mcp.Meta) bool {
	if m == nil {
		return false
	}
	var caps struct {
		Experimental map[string]any `json:"experimental"`
	}
	b, err := json.Marshal(m.AdditionalFields[mcp.MetaKeyClientCapabilities])
	if err != nil || json.Unmarshal(b, &caps) != nil {
		return false
	}
	_, ok := caps.Experimental["claude/channel"]
	return ok
}

// writeStream starts the listen stream with its acknowledgement, and, when
// nothing was subscribed (open false), ends it with the result.
func (a *Agent) writeStream(w http.ResponseWriter, l *listener, open bool) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	got := map[string]any{}
	if l.lists {
		got["toolsListChanged"] = true
	}
	if l.queues != nil || l.every {
		got["claude/channel"] = map[string]any{"queues": l.queues}
	}
	writeEvent(w, l.notification(mcp.MethodNotificationSubscriptionsAcknowledged, map[string]any{"notifications": got}))
	if !open {
		writeEvent(w, l.result())
	}
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}

// holdStream writes l's messages until ctx ends, pinging an idle stream so that
// proxies keep it open. A client that stops reading blocks a write: each must go
// out within a ping interval, and the end of ctx (a revocation) ends one in
// progress at once, so a stalled stream holds neither its goroutine nor its
// connection.
func (a *Agent) holdStream(ctx context.Context, w http.ResponseWriter, l *listener) {
	rc := http.NewResponseController(w)
	defer rc.SetWriteDeadline(time.Time{}) // the connection may serve other requests
	cut := make(chan struct{})
	stop := context.AfterFunc(ctx, func() { rc.SetWriteDeadline(time.Now()); close(cut) })
	// ended writes why the server ended the stream, if it did, once a write in
	// progress has been cut short: as the last message, within a ping interval.
	ended := func() {
		why, ok := context.Cause(ctx).(listenEnd)
		if !ok {
			return // the client went
		}
		if !stop() {
			<-cut
		}
		rc.SetWriteDeadline(time.Now().Add(a.opts.StreamPing))
		if writeEvent(w, l.ended(string(why))) == nil {
			rc.Flush()
		}
	}
	defer stop()
	ping := time.NewTicker(a.opts.StreamPing)
	defer ping.Stop()
	for {
		var msg []byte
		select {
		case <-ctx.Done():
			ended()
			return
		case msg = <-l.out:
		case <-ping.C:
		}
		rc.SetWriteDeadline(time.Now().Add(a.opts.StreamPing))
		if ctx.Err() != nil {
			// Ended (revoked) as the message came: select picks either at
			// random, and an ended stream carries nothing more but why.
			ended()
			return
		}
		var err error
		if msg != nil {
			err = writeEvent(w, msg)
		} else {
			_, err = w.Write([]byte(": ping\n\n"))
		}
		if err == nil {
			if ferr := rc.Flush(); ferr != nil && !errors.Is(ferr, http.ErrNotSupported) {
				err = ferr
			}
		}
		if err != nil {
			return
		}
	}
}

func writeEvent(w http.ResponseWriter, msg []byte) error {
	_, err := fmt.Fprintf(w, "event: message\ndata: %s\n\n", msg)
	return err
}

// notification encodes a notification on l's stream, tagged with its id.
func (l *listener) notification(method string, params map[string]any) []byte {
	p := make(map[string]any, len(params)+1)
	for k, v := range params {
		p[k] = v
	}
	p["_meta"] = map[string]any{mcp.MetaKeySubscriptionID: l.id}
	b, _ := json.Marshal(map[string]any{"jsonrpc": mcp.JSONRPC_VERSION, "method": method, "params": p})
	return b
}

// result is the listen request's answer, which ends the stream.
func (l *listener) result() []byte {
	b, _ := json.Marshal(map[string]any{"jsonrpc": mcp.JSONRPC_VERSION, "id": l.id, "result": map[string]any{
		"resultType": mcp.ResultTypeComplete,
		"_meta":      map[string]any{mcp.MetaKeySubscriptionID: l.id},
	}})
	return b
}

// listenEndedCode is the JSON-RPC error of a listen the server ended: one of
// the codes JSON-RPC leaves to implementations.
const listenEndedCode = -32000

// ended is the listen request's answer when the server ends the stream: an
// error saying why, which a client may act on (listen again, or not).
func (l *listener) ended(why string) []byte {
	return bytes.TrimSpace(appendError(nil, l.id, listenEndedCode, "subscriptions/listen ended: "+why))
}

// send hands l a message without blocking, and reports whether it could; a
// full stream misses it.
func send(l *listener, msg []byte) bool {
	select {
	case l.out <- msg:
		return true
	default:
		return false
	}
}

// ringListeners rings every listener whose doorbell covers c's queue, while its
// credential still does (one that asked for every queue follows the credential's).
func (a *Agent) ringListeners(c store.TodoChange, params map[string]any) {
	for _, l := range a.listening.list() {
		if (l.every || slices.Contains(l.queues, c.Queue)) && slices.Contains(l.endpoint().Queues, c.Queue) {
			if send(l, l.notification(ChannelMethod, params)) {
				a.bell.sent.Add(1)
			} else {
				a.bell.blocked.Add(1)
			}
		}
	}
}

// revalidateListeners gives each listener its endpoint as eps holds it (read by
// Revalidate): a revoked one (nil) ends the stream, and one whose tools changed
// tells a client that asked for list changes.
func (a *Agent) revalidateListeners(eps map[int64]*store.Endpoint) {
	for _, l := range a.listening.list() {
		ep, seen := eps[l.endpoint().ID]
		switch {
		case !seen:
			continue
		case ep == nil:
			l.end("the credential was revoked")
		default:
			a.listenerEndpoint(l, *ep)
		}
	}
}

// listenerEndpoint updates l to ep, telling its client when ep's tools changed.
func (a *Agent) listenerEndpoint(l *listener, ep store.Endpoint) {
	l.mu.Lock()
	changed := l.builtOn != toolInputs(ep)
	l.ep, l.builtOn = ep, toolInputs(ep)
	l.mu.Unlock()
	if changed {
		a.listChanged(l)
	}
}

// listChanged tells l's client that its tools changed, if it asked to hear so.
func (a *Agent) listChanged(l *listener) {
	if l.lists {
		send(l, l.notification(string(mcp.MethodNotificationToolsListChanged), nil))
	}
}
