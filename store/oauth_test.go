package store

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/internal/testkit"
)

// TestOAuthRedeemAndPrune: a code is redeemed once, the tokens resolve to the
// endpoint, and once long expired the codes and tokens are pruned.
func TestOAuthRedeemAndPrune(t *testing.T) {
	ctx := context.Background()
	clk := testkit.NewClock(time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC))
	s := openTest(t, Options{Now: clk.Now})
	ep, _, err := s.CreateEndpoint(ctx, "web", EndpointSpec{Queues: &[]string{"q"}}, "human:1")
	if err != nil {
		t.Fatal(err)
	}
	code := grantCode(t, s, ep.ID)
	ttl := OAuthTTLs{Access: time.Hour, Refresh: 24 * time.Hour}
	ok := func(OAuthGrant, string) error { return nil }
	toks, err := s.RedeemOAuthCode(ctx, code, ok, ttl)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.EndpointByOAuthToken(ctx, toks.Access); err != nil || got.ID != ep.ID {
		t.Fatalf("the access token resolves to %+v, %v", got, err)
	}
	if _, err := s.EndpointByOAuthToken(ctx, toks.Refresh); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a refresh token used as an access token: %v", err)
	}
	if _, err := s.RedeemOAuthCode(ctx, code, ok, ttl); !errors.Is(err, ErrOAuthReplay) {
		t.Fatalf("the code again: %v", err)
	}
	if n, err := s.PruneOAuth(ctx, clk.Now().Add(-time.Hour)); err != nil || n != 0 {
		t.Fatalf("pruned %d live rows (%v)", n, err)
	}
	clk.Add(48 * time.Hour)
	if n, err := s.PruneOAuth(ctx, clk.Now().Add(-time.Hour)); err != nil || n != 3 {
		t.Fatalf("pruned %d expired rows (%v), want the code and two tokens", n, err)
	}
}

// BenchmarkAuthLookup compares what /mcp pays per request to resolve an
// endpoint's bearer (epoch read, then the cache) and a grant's access token
// (the token and grant row, then the endpoint row), interleaved in one run:
// go test ./store -run - -bench AuthLookup -count 5
func BenchmarkAuthLookup(b *testing.B) {
	ctx := context.Background()
	s := openTest(b, Options{})
	ep, cred, err := s.CreateEndpoint(ctx, "web", EndpointSpec{Queues: &[]string{"q"}}, "human:1")
	if err != nil {
		b.Fatal(err)
	}
	code := grantCode(b, s, ep.ID)
	toks, err := s.RedeemOAuthCode(ctx, code, func(OAuthGrant, string) error { return nil },
		OAuthTTLs{Access: time.Hour, Refresh: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	lookups := map[string]func() error{
		"bearer": func() error { _, err := s.EndpointByCredential(ctx, cred); return err },
		"oauth":  func() error { _, err := s.EndpointByOAuthToken(ctx, toks.Access); return err },
	}
	for _, name := range []string{"bearer", "oauth"} {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				if err := lookups[name](); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestOAuthTokenFollowsEndpoint: a grant's access token acts with its
// endpoint's scope as it is now, not as it was at consent: a narrowed endpoint
// narrows the token at once, and a revoked one stops it and its refresh token.
func TestOAuthTokenFollowsEndpoint(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, Options{})
	ep, _, err := s.CreateEndpoint(ctx, "web", EndpointSpec{Queues: &[]string{"a", "b"}}, "human:1")
	if err != nil {
		t.Fatal(err)
	}
	code := grantCode(t, s, ep.ID)
	ttl := OAuthTTLs{Access: time.Hour, Refresh: 24 * time.Hour}
	toks, err := s.RedeemOAuthCode(ctx, code, func(OAuthGrant, string) error { return nil }, ttl)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpdateEndpoint(ctx, ep.ID, EndpointSpec{Queues: &[]string{"b"}}, "human:1"); err != nil {
		t.Fatal(err)
	}
	got, err := s.EndpointByOAuthToken(ctx, toks.Access)
	if err != nil || len(got.Queues) != 1 || got.Queues[0] != "b" || got.OAuthGrantID != toks.GrantID {
		t.Fatalf("after narrowing the endpoint the token acts as %+v (%v), want queues [b] through grant %d", got, err, toks.GrantID)
	}
	if err := s.RevokeEndpoint(ctx, ep.ID, "human:1"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.EndpointByOAuthToken(ctx, toks.Access); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the access token after its endpoint's revocation: %v", err)
	}
	if _, err := s.RefreshOAuth(ctx, toks.Refresh, func(OAuthGrant) error { return nil }, ttl); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the refresh token after its endpoint's revocation: %v", err)
	}
}

// grantCode records a grant of endpoint epID to client "c" and returns its code.
func grantCode(tb testing.TB, s *Store, epID int64) string {
	tb.Helper()
	_, code, err := s.CreateOAuthGrant(context.Background(), NewOAuthGrant{EndpointID: epID, ClientID: "c", ClientName: "C",
		RedirectURI: "https://c.example/cb", CodeChallenge: "x", CodeTTL: time.Minute}, "human:1")
	if err != nil {
		tb.Fatal(err)
	}
	return code
}
