package agent

import (
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/internal/mcpclient"
)

// Closing a dialled client ends its session on the server: mcp-go's DELETE
// carries the credential too, so the session does not linger until the idle
// sweep, counted against its endpoint's sessions.
func TestDialledClientEndsItsSessionOnClose(t *testing.T) {
	e := newEnv(t)
	_, cred := e.endpoint("w", []string{"inbox"}, nil)
	for _, listen := range []bool{false, true} {
		c := e.dial(cred, listen)
		id := c.GetSessionId()
		if e.ag.sessions.get(id) == nil {
			t.Fatal("the dialled session is not live")
		}
		c.Close()
		deadline := time.Now().Add(5 * time.Second)
		for e.ag.sessions.get(id) != nil {
			if time.Now().After(deadline) {
				t.Fatalf("listen=%v: the session outlived its client's Close", listen)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// Dial asks for the newest revision /mcp serves that keeps sessions; were the two
// to drift, every dialled client would negotiate down or be refused.
func TestDialAsksForTheNewestServedRevision(t *testing.T) {
	if mcpclient.ProtocolVersion != SessionProtocolVersion || SupportedProtocolVersions[1] != SessionProtocolVersion {
		t.Fatalf("mcpclient.ProtocolVersion = %s, want %s", mcpclient.ProtocolVersion, SessionProtocolVersion)
	}
}
