package store

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/internal/testkit"
)

// TestOAuthRedeemRacesOnPostgres: two processes redeeming one code, or one
// refresh token, at the same moment. At READ COMMITTED both may read the row
// unused; only one may issue tokens, and the other is told of a replay (which
// revokes the grant, as a reused code or refresh token does).
func TestOAuthRedeemRacesOnPostgres(t *testing.T) {
	ctx := context.Background()
	clk := testkit.NewClock(time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC))
	ps := pgProcesses(t, clk, clk)
	ep, _, err := ps[0].CreateEndpoint(ctx, "web", EndpointSpec{Queues: &[]string{"q"}}, "human:1")
	if err != nil {
		t.Fatal(err)
	}
	ttl := OAuthTTLs{Access: time.Hour, Refresh: 24 * time.Hour}
	ok := func(OAuthGrant, string) error { return nil }
	grant := func() (int64, string, error) {
		return ps[0].CreateOAuthGrant(ctx, NewOAuthGrant{EndpointID: ep.ID, ClientID: "c", ClientName: "C",
			RedirectURI: "https://c.example/cb", CodeChallenge: "x", CodeTTL: time.Minute}, "human:1")
	}
	for round := range 10 {
		_, code, err := grant()
		if err != nil {
			t.Fatal(err)
		}
		var errs [2]error
		var toks [2]OAuthTokens
		race(func() { toks[0], errs[0] = ps[0].RedeemOAuthCode(ctx, code, ok, ttl) },
			func() { toks[1], errs[1] = ps[1].RedeemOAuthCode(ctx, code, ok, ttl) })
		onceThenReplay(t, "code", round, errs)
		// A fresh grant's refresh token, raced the same way.
		_, code, err = grant()
		if err != nil {
			t.Fatal(err)
		}
		first, err := ps[0].RedeemOAuthCode(ctx, code, ok, ttl)
		if err != nil {
			t.Fatal(err)
		}
		okG := func(OAuthGrant) error { return nil }
		race(func() { toks[0], errs[0] = ps[0].RefreshOAuth(ctx, first.Refresh, okG, ttl) },
			func() { toks[1], errs[1] = ps[1].RefreshOAuth(ctx, first.Refresh, okG, ttl) })
		onceThenReplay(t, "refresh token", round, errs)
		// The replay revoked the grant: what the winner got no longer works.
		for i := range toks {
			if toks[i].Access != "" {
				if _, err := ps[1-i].EndpointByOAuthToken(ctx, toks[i].Access); !errors.Is(err, ErrNotFound) {
					t.Fatalf("round %d: the winner's access token after the replay: %v", round, err)
				}
			}
		}
	}
}

// onceThenReplay checks that of two racing redemptions one succeeded and the
// other was refused as a replay.
func onceThenReplay(t *testing.T, what string, round int, errs [2]error) {
	t.Helper()
	won, replayed := 0, 0
	for _, err := range errs {
		switch {
		case err == nil:
			won++
		case errors.Is(err, ErrOAuthReplay):
			replayed++
		default:
			t.Fatalf("round %d: a %s redeemed twice at once: %v", round, what, err)
		}
	}
	if won != 1 || replayed != 1 {
		t.Fatalf("round %d: a %s redeemed twice at once: %d issued tokens, %d told of a replay (%v)", round, what, won, replayed, errs)
	}
}
