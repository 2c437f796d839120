package agent

import (
	"net/http"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
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
