package agent

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/switchboardhq/switchboard/store"
)

// sessions binds every MCP session id to the endpoint whose credential opened it.
// mcp-go accepts any request that carries a known session id; the HTTP wrapper
// checks the binding first, so one agent cannot speak, listen or hang up in
// another's session. It is also mcp-go's SessionIdManager, so an id exists here
// from the moment it is minted until the session is deleted, swept, revoked or
// evicted.
//
// An endpoint holds at most limit live sessions: opening one more ends the one it
// used least recently, so that a credential cannot fill memory by initializing
// over and over, while an agent that leaked sessions keeps working.
type sessions struct {
	mu    sync.Mutex
	byID  map[string]*session
	limit int
	// evict ends, everywhere else (its streams, mcp-go), a session add took from
	// an endpoint to keep it within limit.
	evict func(ep store.Endpoint, x *session)
	uses  atomic.Uint64 // requests seen; a session's used is this count at its last one
	now   func() time.Time

	// Why recently ended sessions ended, for the 404 their next request gets: an
	// agent told only "unknown session" cannot tell an eviction from a restart.
	ended      map[string]string
	endedOrder []string // oldest first, at most maxRememberedEnds
	idleNote   string   // why the idle sweep ends a session
	prefix     string   // what every minted id starts with (SessionIDPrefix)
}

// maxRememberedEnds bounds the memory of why sessions ended.
const maxRememberedEnds = 4096

// noteEnded remembers why session id ended.
func (s *sessions) noteEnded(id, why string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended == nil {
		s.ended = map[string]string{}
	}
	if _, seen := s.ended[id]; !seen {
		if len(s.endedOrder) >= maxRememberedEnds {
			delete(s.ended, s.endedOrder[0])
			s.endedOrder = s.endedOrder[1:]
		}
		s.endedOrder = append(s.endedOrder, id)
	}
	s.ended[id] = why
}

// whyEnded says why session id ended, if it is remembered.
func (s *sessions) whyEnded(id string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ended[id]
}

// session is what the agent knows about one MCP session.
type session struct {
	id         string
	endpointID int64
	grantID    int64 // the OAuth grant whose token opened it; 0: the endpoint's bearer

	mu      sync.Mutex
	ep      store.Endpoint          // newest snapshot, refreshed by each request
	tools   server.SessionWithTools // mcp-go's session, set at initialize
	defs    map[string]mcp.Tool     // its verbs, defined for its endpoint (verbDefs)
	builtOn string                  // toolInputs of the endpoint its tools came from
	streams []stream                // open GET streams, oldest first, cancelled when it ends
	leases  map[int64]int64         // todo id → lease_seq claimed in this session

	used atomic.Uint64 // sessions.uses at this session's last request

	lastUsed atomic.Int64 // when its last request came (unix ns), for the idle sweep

	// For fastCall: notices counts the notifications sent to the session that
	// wait in mcp-go's queue until a POST mcp-go answers takes them (the GET
	// stream takes the others), drained how many of those such a POST has taken.
	notices, drained atomic.Int64
}

// noticesWaiting reports whether a notification may still wait for a POST that
// mcp-go answers (see fastCall).
func (x *session) noticesWaiting() bool { return x.notices.Load() != x.drained.Load() }

// noteDrained records that a POST mcp-go answered has taken the notifications
// counted in notices when it began.
func (x *session) noteDrained(notices int64) {
	for {
		d := x.drained.Load()
		if d >= notices || x.drained.CompareAndSwap(d, notices) {
			return
		}
	}
}

func newSessions(limit int, now func() time.Time, evict func(store.Endpoint, *session)) *sessions {
	return &sessions{byID: map[string]*session{}, limit: limit, now: now, evict: evict, prefix: SessionIDPrefix("")}
}

// SessionIDPrefix is what the ids of the sessions a process with session route
// route mints start with: "sb-" alone without one, "sb-ROUTE." with one. The '.'
// ends the route, as the random part never holds one.
func SessionIDPrefix(route string) string {
	if route == "" {
		return "sb-"
	}
	return "sb-" + route + "."
}

// sessionRouteOf is the session route an id minted with one names ("a" of
// "sb-a.…"), and false for an id without one.
func sessionRouteOf(id string) (string, bool) {
	rest, ok := strings.CutPrefix(id, "sb-")
	route, _, dotted := strings.Cut(rest, ".")
	return route, ok && dotted && CheckSessionRoute(route) == nil
}

// CheckSessionRoute refuses a session route a load balancer's pattern could not
// match plainly.
func CheckSessionRoute(route string) error {
	if len(route) > 32 || strings.Trim(route, "abcdefghijklmnopqrstuvwxyz0123456789-") != "" {
		return fmt.Errorf("session route %.40q: use at most 32 lower-case letters, digits and '-'", route)
	}
	return nil
}

// maxRememberedLeases bounds the per-session fencing memory: a session that claims
// and abandons todos forever must not grow without bound. A claim forgotten here
// is acted on only with its lease_seq, as one from another session.
const maxRememberedLeases = 1024

func (s *sessions) get(id string) *session {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.byID[id]
}

// all returns every live session.
func (s *sessions) all() []*session {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*session, 0, len(s.byID))
	for _, x := range s.byID {
		out = append(out, x)
	}
	return out
}

// ofEndpoint returns the live sessions opened by endpoint id.
func (s *sessions) ofEndpoint(id int64) []*session {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*session
	for _, x := range s.byID {
		if x.endpointID == id {
			out = append(out, x)
		}
	}
	return out
}

// remove forgets a session and closes its open streams.
func (s *sessions) remove(id string) {
	s.mu.Lock()
	x := s.byID[id]
	delete(s.byID, id)
	s.mu.Unlock()
	if x != nil {
		x.closeStreams()
	}
}

// add mints a session for ep. When ep already holds limit sessions, add forgets
// the one it used least recently and returns it, for the caller to end.
func (s *sessions) add(ep store.Endpoint) (id string, evicted *session) {
	b := make([]byte, 16)
	rand.Read(b) // never fails: crypto/rand panics rather than return short
	id = s.prefix + base64.RawURLEncoding.EncodeToString(b)
	x := &session{id: id, endpointID: ep.ID, grantID: ep.OAuthGrantID, ep: ep}
	s.touch(x)
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, y := range s.byID {
		if y.endpointID == ep.ID {
			n++
			if evicted == nil || y.staler(evicted) {
				evicted = y
			}
		}
	}
	// Taken out here, under the lock, so that concurrent initializes each end a
	// different session and the endpoint never holds more than limit.
	if n >= s.limit {
		delete(s.byID, evicted.id)
	} else {
		evicted = nil
	}
	s.byID[id] = x
	return id, evicted
}

// touch records a request in x. It runs on every request, so it takes no lock.
func (s *sessions) touch(x *session) {
	x.used.Store(s.uses.Add(1))
	x.lastUsed.Store(s.now().UnixNano())
}

// staler reports whether x was used less recently than y. A session with an open
// GET stream is in use now: a worker idling on its doorbell is not a leaked session.
func (x *session) staler(y *session) bool {
	if xl, yl := x.listening(), y.listening(); xl != yl {
		return yl
	}
	return x.used.Load() < y.used.Load()
}

func (x *session) endpoint() store.Endpoint {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.ep
}

func (x *session) setEndpoint(ep store.Endpoint) {
	x.mu.Lock()
	x.ep = ep
	x.mu.Unlock()
}

// stream is one open GET stream of a session.
type stream struct {
	key    *int
	cancel context.CancelFunc
}

// maxStreams bounds a session's open GET streams. A client needs one; a second
// comes while it reconnects over a connection not yet seen to have died. Past the
// bound the oldest is ended, so that a client reconnecting is always served and
// a credential cannot hold connections and goroutines without end.
const maxStreams = 4

// attach records an open GET stream, ending the oldest past maxStreams; the
// returned function detaches it.
func (x *session) attach(cancel context.CancelFunc) (detach func()) {
	key := new(int)
	x.mu.Lock()
	x.streams = append(x.streams, stream{key, cancel})
	var ended []stream
	if over := len(x.streams) - maxStreams; over > 0 {
		ended = slices.Clone(x.streams[:over])
		x.streams = slices.Delete(x.streams, 0, over)
	}
	x.mu.Unlock()
	for _, s := range ended {
		s.cancel()
	}
	return func() {
		x.mu.Lock()
		x.streams = slices.DeleteFunc(x.streams, func(s stream) bool { return s.key == key })
		x.mu.Unlock()
		cancel()
	}
}

func (x *session) listening() bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	return len(x.streams) > 0
}

func (x *session) closeStreams() {
	x.mu.Lock()
	open := slices.Clone(x.streams)
	x.mu.Unlock()
	for _, s := range open {
		s.cancel()
	}
}

// twiceClaimed marks a todo this session claimed more than once: its workers can
// no longer be told apart, so an ack from it without lease_seq is refused.
const twiceClaimed = -1

// rememberLease records the lease a claim in this session obtained: an ack from
// this session without lease_seq acts under it, and one from any other is refused.
// A second claim of the same todo in the session (a lease lapsed, and a worker of
// the same connection claimed it again) leaves no lease to act under: the stale
// worker and the new one would both send the same ack.
func (x *session) rememberLease(todo, seq int64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.leases == nil {
		x.leases = map[int64]int64{}
	}
	if len(x.leases) >= maxRememberedLeases {
		// Forget the lowest todo id: the oldest claim, most likely long lapsed.
		var oldest int64 = -1
		for id := range x.leases {
			if oldest < 0 || id < oldest {
				oldest = id
			}
		}
		delete(x.leases, oldest)
	}
	if prev, ok := x.leases[todo]; ok && prev != seq {
		seq = twiceClaimed
	}
	x.leases[todo] = seq
}

func (x *session) leaseOf(todo int64) int64 {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.leases[todo]
}

func (x *session) forgetLease(todo int64) {
	x.mu.Lock()
	delete(x.leases, todo)
	x.mu.Unlock()
}

// ResolveSessionIdManager implements server.SessionIdManagerResolver: the manager
// it returns mints ids bound to the endpoint the request authenticated as.
func (s *sessions) ResolveSessionIdManager(r *http.Request) server.SessionIdManager {
	m := idManager{s: s}
	if r != nil {
		if ep, ok := EndpointFromContext(r.Context()); ok {
			m.ep = &ep
		}
		m.minted, _ = r.Context().Value(mintedKey{}).(*string)
	}
	return m
}

type idManager struct {
	s      *sessions
	ep     *store.Endpoint
	minted *string // where Generate tells the HTTP wrapper the id it minted
}

// mintedKey carries, in an initialize request's context, where the id minted for
// it is written.
type mintedKey struct{}

var errUnknownSession = errors.New("unknown or ended session")

// Generate mints an id for an initialize request. Without an authenticated
// endpoint (which the wrapper never lets through) it mints an id bound to no one.
func (m idManager) Generate() string {
	ep := store.Endpoint{ID: -1}
	if m.ep != nil {
		ep = *m.ep
	}
	id, evicted := m.s.add(ep)
	if evicted != nil {
		m.s.evict(ep, evicted)
	}
	if m.minted != nil {
		*m.minted = id
	}
	return id
}

func (m idManager) Validate(id string) (bool, error) {
	x := m.s.get(id)
	if x == nil || (m.ep != nil && !x.heldBy(*m.ep)) {
		return false, errUnknownSession
	}
	return false, nil
}

func (m idManager) Terminate(id string) (bool, error) {
	m.s.remove(id)
	return false, nil
}
