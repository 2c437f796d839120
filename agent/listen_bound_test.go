package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

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
	if m, _ := streams[1].next(t); m != "" {
		t.Fatalf("the oldest stream of the credential got %q, want it ended", m)
	}
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
