package agent

import (
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/switchboardhq/switchboard/store"
)

// A listen stream opened with an OAuth grant's access token ends when the
// grant is revoked (at the next revalidation); a stream of the same endpoint
// opened with its bearer goes on ringing.
func TestListenStreamEndsWithItsGrant(t *testing.T) {
	e := newEnv(t, func(c *envConfig) {
		c.agent.ResourceMetadata = "https://sb.example.net/.well-known/oauth-protected-resource"
	})
	ep, cred := e.endpoint("hosted", []string{"inbox"}, nil)
	gid, code, err := e.st.CreateOAuthGrant(t.Context(), store.NewOAuthGrant{EndpointID: ep.ID, ClientID: "c", ClientName: "C",
		RedirectURI: "https://c.example/cb", CodeChallenge: "x", CodeTTL: time.Minute}, "human:test")
	if err != nil {
		t.Fatal(err)
	}
	toks, err := e.st.RedeemOAuthCode(t.Context(), code, func(store.OAuthGrant, string) error { return nil },
		store.OAuthTTLs{Access: time.Hour, Refresh: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	granted := e.listenStateless(toks.Access, `{"claude/channel":{}}`)
	bearer := e.listenStateless(cred, `{"claude/channel":{}}`)
	for _, s := range []*sseStream{granted, bearer} {
		if m, _ := s.next(t); m != mcp.MethodNotificationSubscriptionsAcknowledged {
			t.Fatalf("first message %q, want the acknowledgement", m)
		}
	}
	if err := e.st.RevokeOAuthGrant(t.Context(), gid, "human:test"); err != nil {
		t.Fatal(err)
	}
	e.ag.Revalidate(t.Context())
	e.addTodo("inbox", `{}`)
	for {
		m, _ := granted.next(t)
		if m == "error" {
			break // ended, saying why below
		}
		if m == ChannelMethod || m == "" {
			t.Fatalf("the revoked grant's listen stream: %q, want no ring and its end", m)
		}
	}
	if m, _ := bearer.next(t); m != ChannelMethod {
		t.Fatalf("the bearer's listen stream: %q, want the ring", m)
	}
}
