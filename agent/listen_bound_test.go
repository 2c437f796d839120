package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/switchboardhq/switchboard/store"
)

// A credential that opens listen streams in a loop holds at most
// MaxSessionsPerEndpoint of them, as it holds at most that many sessions: the
// oldest ends when one more opens, and the newest still hears the doorbell.
func TestStatelessListenersBoundedPerCredential(t *testing.T) {
	e := newEnv(t, func(c *envConfig) { c.agent.MaxSessionsPerEndpoint = 2 })
	_, cred := e.endpoint("looper", []string{"inbox"}, nil)
	_, other := e.endpoint("other", []string{"inbox"}, nil)
	var streams []*sseStream
	for _, c := range []string{other, cred, cred, cred} {
		s := e.listenStateless(c, `{"claude/channel":{}}`)
		if s.resp.StatusCode != http.StatusOK {
			t.Fatalf("listen: HTTP %d", s.resp.StatusCode)
		}
		if m, _ := s.next(t); m != mcp.MethodNotificationSubscriptionsAcknowledged {
			t.Fatalf("first message %q, want the acknowledgement", m)
		}
		streams = append(streams, s)
	}
	streams[1].wantEnded(t, "more than 2 listen streams, and this was its oldest")
	if n := e.ag.Stats().Listeners; n != 3 {
		t.Fatalf("Stats().Listeners = %d, want 3 (two of the looping credential, one of the other)", n)
	}
	e.addTodo("inbox", `{}`)
	for _, i := range []int{0, 2, 3} {
		if m, _ := streams[i].next(t); m != ChannelMethod {
			t.Fatalf("stream %d got %q, want the doorbell", i, m)
		}
	}
}

// A listener that asked for every queue of its credential hears a queue the
// credential gains while it listens, as a session's GET stream does, and stops
// hearing one the credential loses.
func TestStatelessListenEveryQueueFollowsTheCredential(t *testing.T) {
	e := newEnv(t)
	ep, cred := e.endpoint("widened", []string{"inbox"}, nil)
	s := e.listenStateless(cred, `{"claude/channel":{}}`)
	if m, _ := s.next(t); m != mcp.MethodNotificationSubscriptionsAcknowledged {
		t.Fatalf("first message %q, want the acknowledgement", m)
	}
	queues := []string{"later"}
	if _, err := e.st.UpdateEndpoint(t.Context(), ep.ID, store.EndpointSpec{Queues: &queues}, "human:test"); err != nil {
		t.Fatal(err)
	}
	e.ag.Revalidate(t.Context())
	e.addTodo("inbox", `{}`) // no longer the credential's: no ring
	todo := e.addTodo("later", `{}`)
	for {
		m, params := s.next(t)
		if m == string(mcp.MethodNotificationToolsListChanged) {
			continue
		}
		meta, _ := params["meta"].(map[string]any)
		if m != ChannelMethod || meta["todo_id"] != fmt.Sprint(todo.ID) {
			t.Fatalf("after the credential gained queue later: %q %v, want the ring of todo %d", m, params, todo.ID)
		}
		break
	}
}

// Once a listener is ended (its credential revoked), nothing more is written on
// its stream, even a ring queued for it just before: a ring and the end arriving
// together must not go the ring's way half of the time.
func TestStatelessEndedListenerWritesNothingMore(t *testing.T) {
	e := newEnv(t)
	for range 64 {
		l := &listener{id: json.RawMessage("7"), out: make(chan []byte, 1)}
		ctx, cancel := context.WithCancel(t.Context())
		l.out <- []byte(`{"ring":true}`)
		cancel()
		w := httptest.NewRecorder()
		e.ag.holdStream(ctx, w, l)
		if w.Body.Len() != 0 {
			t.Fatalf("an ended listener's stream got %q", w.Body.String())
		}
	}
}

// stalledWriter is a listen stream whose client stopped reading: a write blocks
// until the write deadline set on it passes, and forever when none is set.
type stalledWriter struct {
	once, entered sync.Once
	writing       chan struct{} // closed when a write begins
	expired       chan struct{}
}

func (w *stalledWriter) Header() http.Header { return http.Header{} }
func (w *stalledWriter) WriteHeader(int)     {}
func (w *stalledWriter) Write([]byte) (int, error) {
	w.entered.Do(func() { close(w.writing) })
	<-w.expired
	return 0, os.ErrDeadlineExceeded
}
func (w *stalledWriter) SetWriteDeadline(t time.Time) error {
	time.AfterFunc(time.Until(t), func() { w.once.Do(func() { close(w.expired) }) })
	return nil
}

// A listener whose client stopped reading ends when its credential is revoked,
// and when a write cannot go out within a ping interval: it does not hold its
// goroutine and connection for as long as the client keeps the socket open.
func TestStatelessStalledListenerEnds(t *testing.T) {
	for _, c := range []struct {
		name   string
		ping   time.Duration
		revoke bool
	}{{"revoked", time.Hour, true}, {"stalled past a ping interval", 50 * time.Millisecond, false}} {
		e := newEnv(t, func(cfg *envConfig) { cfg.agent.StreamPing = c.ping })
		l := &listener{id: json.RawMessage("7"), out: make(chan []byte, 1)}
		ctx, cancel := context.WithCancel(t.Context())
		l.out <- []byte(`{"ring":true}`)
		done := make(chan struct{})
		w := &stalledWriter{writing: make(chan struct{}), expired: make(chan struct{})}
		go func() {
			defer close(done)
			e.ag.holdStream(ctx, w, l)
		}()
		<-w.writing
		if c.revoke {
			cancel()
		}
		select {
		case <-done:
		case <-time.After(10 * time.Second): // a bound on a hang, not a timed assertion
			t.Fatalf("%s: the stalled stream is still held", c.name)
		}
		cancel()
	}
}

// A listen for the doorbell of no queue at all asks for nothing: it is
// acknowledged as such and answered at once, not held open (and counted against
// the credential's streams) for a ring that can never come.
func TestStatelessListenForNoQueueEndsAtOnce(t *testing.T) {
	e := newEnv(t)
	_, cred := e.endpoint("none", []string{"inbox"}, nil)
	s := e.listenStateless(cred, `{"claude/channel":{"queues":[]}}`)
	m, params := s.next(t)
	if got, _ := params["notifications"].(map[string]any); m != mcp.MethodNotificationSubscriptionsAcknowledged || len(got) != 0 {
		t.Fatalf("first message %q %v, want the acknowledgement of nothing", m, params)
	}
	if m, _ := s.next(t); m != "result" {
		t.Fatalf("then %q, want the listen's result", m)
	}
	if m, _ := s.next(t); m != "" {
		t.Fatalf("then %q, want the stream ended", m)
	}
	if n := e.ag.Stats().Listeners; n != 0 {
		t.Fatalf("Stats().Listeners = %d, want 0", n)
	}
	// With list changes asked for too, the stream is held for those alone.
	s = e.listenStateless(cred, `{"toolsListChanged":true,"claude/channel":{"queues":[]}}`)
	if m, params := s.next(t); m != mcp.MethodNotificationSubscriptionsAcknowledged || fmt.Sprint(params["notifications"]) != "map[toolsListChanged:true]" {
		t.Fatalf("first message %q %v, want the acknowledgement of list changes alone", m, params)
	}
}
