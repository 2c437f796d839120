package web

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/switchboardhq/switchboard/store"
)

// Live updates. The store's todo hook publishes every change to an in-memory
// broadcaster; each open board holds one server-sent-events stream and, on an event,
// refetches the parts of the page that show todos. The hook runs on the store's
// writer goroutine, so publishing is one non-blocking send, whatever the number of
// open boards; the broadcaster's own goroutine copies each change to every stream. A
// stream whose buffer is full misses that event, which costs nothing because the page
// refetches the whole fragment on whichever event it does get.

// maxStreams bounds open event streams so a runaway tab cannot exhaust the server.
const maxStreams = 256

// keepAlive is how often an idle stream sends a comment, so proxies and browsers do
// not time it out.
const keepAlive = 25 * time.Second

// sessionCheck is how often an open stream checks that its session still exists, so
// that one which expired, or was deleted by another process, stops streaming. A
// logout here ends its streams at once (sessionStreams).
const sessionCheck = 30 * time.Second

// sessionStreams ends the open streams of a session when it logs out: the session
// is checked when a stream connects, and a stream lives for as long as the tab.
type sessionStreams struct {
	mu sync.Mutex
	m  map[streamOwner]map[chan struct{}]struct{}
}

// streamOwner is the session (by its CSRF token) and operator a stream belongs to.
type streamOwner struct {
	operator int64
	session  string
}

// open registers a stream of the operator's session; ended is closed when the session
// logs out, or the operator logs out everywhere.
func (s *sessionStreams) open(operator int64, session string) (ended chan struct{}, closeFn func()) {
	ch := make(chan struct{})
	key := streamOwner{operator, session}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[streamOwner]map[chan struct{}]struct{}{}
	}
	if s.m[key] == nil {
		s.m[key] = map[chan struct{}]struct{}{}
	}
	s.m[key][ch] = struct{}{}
	return ch, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if _, ok := s.m[key][ch]; ok {
			delete(s.m[key], ch)
			if len(s.m[key]) == 0 {
				delete(s.m, key)
			}
		}
	}
}

// end ends every open stream of the session, or with session "", of every
// session of the operator.
func (s *sessionStreams) end(operator int64, session string) {
	s.endWhere(operator, func(other string) bool { return session == "" || other == session })
}

// endExcept ends every open stream of the operator's sessions but keep.
func (s *sessionStreams) endExcept(operator int64, keep string) {
	s.endWhere(operator, func(other string) bool { return other != keep })
}

// endWhere ends every open stream of the operator's sessions that match.
func (s *sessionStreams) endWhere(operator int64, match func(session string) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for key, chans := range s.m {
		if key.operator != operator || !match(key.session) {
			continue
		}
		for ch := range chans {
			close(ch)
		}
		delete(s.m, key)
	}
}

type broadcaster struct {
	in     chan store.TodoChange // from the store's writer, to run
	mu     sync.Mutex
	subs   map[chan store.TodoChange]struct{}
	done   chan struct{}
	closed bool
}

// newBroadcaster starts the broadcaster's goroutine; close stops it.
func newBroadcaster() *broadcaster {
	b := &broadcaster{
		in:   make(chan store.TodoChange, 1024),
		subs: map[chan store.TodoChange]struct{}{},
		done: make(chan struct{}),
	}
	go b.run()
	return b
}

// publish is the store hook: one non-blocking send. If the broadcaster has fallen a
// whole buffer behind, the change is dropped; the boards catch up on the next one.
func (b *broadcaster) publish(c store.TodoChange) {
	select {
	case b.in <- c:
	default:
	}
}

// run copies each published change to every stream, never waiting for one.
func (b *broadcaster) run() {
	for {
		select {
		case <-b.done:
			return
		case c := <-b.in:
			b.mu.Lock()
			for ch := range b.subs {
				select {
				case ch <- c:
				default:
				}
			}
			b.mu.Unlock()
		}
	}
}

// subscribe returns a channel of changes and a function that ends the subscription;
// ok is false when the broadcaster is closed or full.
func (b *broadcaster) subscribe() (ch chan store.TodoChange, cancel func(), ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed || len(b.subs) >= maxStreams {
		return nil, nil, false
	}
	ch = make(chan store.TodoChange, 16)
	b.subs[ch] = struct{}{}
	return ch, func() {
		b.mu.Lock()
		delete(b.subs, ch)
		b.mu.Unlock()
	}, true
}

func (b *broadcaster) close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.closed {
		b.closed = true
		close(b.done)
	}
}

// liveEvent is the data of a "todo" event. It names the todo and nothing of its
// content: the page fetches what it shows through the normal, authenticated routes.
// Queue, State and From (the state it left) let a page refetch only the parts the
// change can move: a table of failed todos on one queue has nothing to redraw when
// another queue's todos are claimed.
type liveEvent struct {
	ID    int64  `json:"id"`
	Queue string `json:"queue"`
	State string `json:"state"`
	// From is the state the todo left: "" for a new todo, the same as State when
	// the change moved no state (a backoff ended), absent when not known (the page
	// then treats the change as able to move anything).
	From *string `json:"from,omitempty"`
}

// causeFrom is the state each kind of change (store.TodoChange.Cause) leaves.
var causeFrom = map[string]string{
	"add":           "",
	"claim":         store.StatePending,
	"complete":      store.StateClaimed,
	"release":       store.StateClaimed,
	"retry":         store.StateFailed,
	"retry_backoff": store.StateClaimed,
	"dead_letter":   store.StateClaimed,
	"lease_expired": store.StateClaimed,
	"backoff_over":  store.StatePending,
}

func newLiveEvent(c store.TodoChange) liveEvent {
	ev := liveEvent{ID: c.ID, Queue: c.Queue, State: c.State}
	if from, ok := causeFrom[c.Cause]; ok {
		ev.From = &from
	}
	return ev
}

// stream serves GET /live, the event stream of todo changes, for as long as the
// session lasts.
func (u *UI) stream(w http.ResponseWriter, r *http.Request, rc *reqCtx) {
	ch, cancel, ok := u.live.subscribe()
	if !ok {
		w.Header().Set("Retry-After", "10")
		http.Error(w, "too many live streams", http.StatusServiceUnavailable)
		return
	}
	defer cancel()
	loggedOut, closeSession := u.streams.open(rc.Operator.ID, rc.CSRF)
	defer closeSession()
	rw := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no") // nginx: do not hold the stream back
	w.WriteHeader(http.StatusOK)
	// retry: how soon the browser reconnects after a drop; "ready" lets the page
	// know it is live (and refresh what it may have missed while it was not).
	fmt.Fprint(w, "retry: 3000\nevent: ready\ndata: {}\n\n")
	if err := rw.Flush(); err != nil {
		return
	}
	tick := time.NewTicker(keepAlive)
	defer tick.Stop()
	check := time.NewTicker(u.sessionCheck)
	defer check.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-u.live.done:
			return
		case <-loggedOut:
			return
		case <-check.C:
			_, err := u.store.WebSessionByToken(r.Context(), rc.token)
			if errors.Is(err, store.ErrNotFound) {
				return // expired, or deleted elsewhere
			}
			if err != nil {
				u.log.Warn("web: check a live stream's session", "err", err)
			}
			continue
		case <-tick.C:
			if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil {
				return
			}
		case c := <-ch:
			// A logout and a change may both be waiting; select picks either, and
			// nothing may reach a browser after its logout was answered.
			select {
			case <-loggedOut:
				return
			default:
			}
			data := []byte("{}") // another process changed todos: which, the page does not know
			if c.ID != 0 {
				data, _ = json.Marshal(newLiveEvent(c))
			}
			if _, err := fmt.Fprintf(w, "event: todo\ndata: %s\n\n", data); err != nil {
				return
			}
		}
		if err := rw.Flush(); err != nil {
			return
		}
	}
}
