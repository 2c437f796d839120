package cli

import (
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/internal/mcpclient"
	"github.com/switchboardhq/switchboard/internal/server"
	"github.com/switchboardhq/switchboard/store"
)

// An OAuth grant revoked from another process (endpoint revoke-grant, or the
// board of another process in a fleet) ends the doorbell stream its token
// opened within moments, as an endpoint's revocation does, not at the agent's
// periodic 30 s re-check.
func TestServeEndsRevokedGrantStreamsPromptly(t *testing.T) {
	db := filepath.Join(t.TempDir(), "sb.db")
	base, _ := startServer(t, server.Config{DB: db, MetricsAllow: "127.0.0.1", OAuth: true, BaseURL: "https://sb.example.net"})
	other, err := store.Open(t.Context(), db, store.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	queues, verbs := []string{"inbox"}, store.AllVerbs()
	ep, _, err := other.CreateEndpoint(t.Context(), "hosted", store.EndpointSpec{Queues: &queues, Verbs: &verbs}, "human:cli")
	if err != nil {
		t.Fatal(err)
	}
	grant, code, err := other.CreateOAuthGrant(t.Context(), store.NewOAuthGrant{EndpointID: ep.ID, ClientID: "sbc_test",
		ClientName: "Hosted Agent", RedirectURI: "https://c.example/cb", CodeChallenge: "x", CodeTTL: time.Minute}, "human:ana")
	if err != nil {
		t.Fatal(err)
	}
	toks, err := other.RedeemOAuthCode(t.Context(), code, func(store.OAuthGrant, string) error { return nil },
		store.OAuthTTLs{Access: time.Hour, Refresh: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	// The watch (every 500 ms) takes in the endpoint's creation first, so that
	// only what the revocation does can end the stream.
	revokedStreamEnds(t, base, other, toks.Access, 2*time.Second, func() error {
		return other.RevokeOAuthGrant(t.Context(), grant, "human:cli")
	})
}

// revokedStreamEnds opens a session and its doorbell stream on base's /mcp with
// cred, waits settle, revokes with revoke (through other, another process), and
// fails the test unless both end within moments.
func revokedStreamEnds(t *testing.T, base string, other *store.Store, cred string, settle time.Duration, revoke func() error) {
	t.Helper()
	c, _, err := mcpclient.Dial(t.Context(), base+"/mcp", cred, mcpclient.DialOptions{Listen: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	until := func(what string, cond func() bool, nudge func()) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatal(what)
			}
			nudge()
			time.Sleep(50 * time.Millisecond)
		}
	}
	until("the doorbell stream never opened", func() bool { return metric(t, base, "switchboard_mcp_streams") == 1 }, func() {})
	time.Sleep(settle)
	if err := revoke(); err != nil {
		t.Fatal(err)
	}
	// Foreign commits elsewhere, in case the watch took its baseline after the revocation.
	until("the revoked stream outlived the foreign-commit watch",
		func() bool {
			return metric(t, base, "switchboard_mcp_streams") == 0 && metric(t, base, "switchboard_mcp_sessions") == 0
		},
		func() {
			other.AddTodo(t.Context(), store.NewTodo{Queue: "elsewhere", Payload: "nudge", CreatedBy: "human:cli"})
		})
}
