package cfaccess_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/switchboardhq/switchboard/internal/cfaccess"
	"github.com/switchboardhq/switchboard/internal/cfaccess/cfaccesstest"
	"github.com/switchboardhq/switchboard/internal/testkit"
)

var start = time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)

// Each assertion Access would not have made, or not for this application, is
// refused; a good one, a service token's and one within the clock skew pass.
func TestVerify(t *testing.T) {
	team, key := cfaccesstest.NewTeam(t)
	clock := testkit.NewClock(start)
	v := team.Verifier(t, clock.Now)
	other := cfaccesstest.NewKey(t)

	with := func(change func(map[string]any)) map[string]any {
		c := cfaccesstest.Claims("Ana@example.com", start)
		change(c)
		return c
	}
	good := cfaccesstest.Claims("Ana@example.com", start)
	for _, tc := range []struct {
		name, assertion string
		want            cfaccess.Identity // zero: refused, saying why
		why             string
	}{
		{"valid", key.Sign(t, good), cfaccess.Identity{Value: "Ana@example.com"}, ""},
		{"service token", key.Sign(t, with(func(c map[string]any) { delete(c, "email"); c["common_name"] = "88bf3b6d.access" })),
			cfaccess.Identity{Value: "88bf3b6d.access", ServiceToken: true}, ""},
		{"expired within the skew", key.Sign(t, with(func(c map[string]any) { c["exp"] = start.Add(-50 * time.Second).Unix() })),
			cfaccess.Identity{Value: "Ana@example.com"}, ""},
		{"expired", key.Sign(t, with(func(c map[string]any) { c["exp"] = start.Add(-61 * time.Second).Unix() })), cfaccess.Identity{}, "expired (exp)"},
		{"no expiry", key.Sign(t, with(func(c map[string]any) { delete(c, "exp") })), cfaccess.Identity{}, "no expiry"},
		{"not valid yet", key.Sign(t, with(func(c map[string]any) { c["nbf"] = start.Add(2 * time.Minute).Unix() })), cfaccess.Identity{}, "(nbf)"},
		{"issued in the future", key.Sign(t, with(func(c map[string]any) { c["iat"] = start.Add(2 * time.Minute).Unix() })), cfaccess.Identity{}, "(iat)"},
		{"wrong audience", key.Sign(t, with(func(c map[string]any) { c["aud"] = []string{"another-app"} })), cfaccess.Identity{}, "(aud)"},
		{"wrong issuer", key.Sign(t, with(func(c map[string]any) { c["iss"] = "https://other.cloudflareaccess.com" })), cfaccess.Identity{}, "(iss)"},
		{"no identity", key.Sign(t, with(func(c map[string]any) { delete(c, "email") })), cfaccess.Identity{}, "names no email"},
		{"wrongly signed", cfaccesstest.SignWith(t, jose.RS256, other.Priv, key.ID, good), cfaccess.Identity{}, "bad signature"},
		{"no key id", cfaccesstest.SignWith(t, jose.RS256, key.Priv, "", good), cfaccess.Identity{}, "no key (kid)"},
		{"HS256 keyed with the public key", key.ForgeHS256(t, good), cfaccess.Identity{}, "RS256"},
		{"alg none", cfaccesstest.Unsigned(t, key.ID, good), cfaccess.Identity{}, "RS256"},
		{"not a JWT", "not.a.jwt", cfaccess.Identity{}, "RS256"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := v.Verify(context.Background(), tc.assertion)
			if tc.want == (cfaccess.Identity{}) {
				if !errors.Is(err, cfaccess.ErrRefused) || !strings.Contains(err.Error(), tc.why) {
					t.Fatalf("verified as %+v (%v), want refused: %s", got, err, tc.why)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
	if n := team.Fetches(); n != 1 {
		t.Errorf("the key set was fetched %d times, want once", n)
	}
}

// A rotation: the team withdraws its key and signs with a new one. An assertion
// under the new key id fetches the set again (no sooner than the refetch
// interval), and then verifies; one under the withdrawn key no longer does.
// Made-up key ids do not fetch more often than that; a set older than its
// maximum age is fetched again.
func TestKeyRotation(t *testing.T) {
	team, old := cfaccesstest.NewTeam(t)
	clock := testkit.NewClock(start)
	v := team.Verifier(t, clock.Now)
	ctx := context.Background()
	verify := func(k *cfaccesstest.Key) error {
		_, err := v.Verify(ctx, k.Sign(t, cfaccesstest.Claims("ana@example.com", clock.Now())))
		return err
	}
	if err := verify(old); err != nil {
		t.Fatalf("before the rotation: %v", err)
	}
	fresh := cfaccesstest.NewKey(t)
	team.Serve(fresh)
	if err := verify(fresh); !errors.Is(err, cfaccess.ErrRefused) {
		t.Fatalf("a new key id right after a fetch: %v, want refused until the refetch interval passes", err)
	}
	clock.Add(11 * time.Second)
	if err := verify(fresh); err != nil {
		t.Fatalf("the new key after the refetch: %v", err)
	}
	if err := verify(old); !errors.Is(err, cfaccess.ErrRefused) {
		t.Fatalf("the withdrawn key: %v, want refused", err)
	}
	if n := team.Fetches(); n != 2 {
		t.Fatalf("%d fetches so far, want 2", n)
	}
	clock.Add(11 * time.Second)
	for i := range 50 {
		bogus := &cfaccesstest.Key{ID: fmt.Sprintf("bogus-%d", i), Priv: fresh.Priv}
		if err := verify(bogus); !errors.Is(err, cfaccess.ErrRefused) {
			t.Fatalf("made-up key id: %v, want refused", err)
		}
	}
	if n := team.Fetches(); n != 3 { // one refetch for the first made-up id, then none within the interval
		t.Fatalf("%d fetches after 50 made-up key ids, want 3", n)
	}
	clock.Add(2 * time.Hour)
	if err := verify(fresh); err != nil || team.Fetches() != 4 {
		t.Fatalf("after the set's maximum age: %v, %d fetches; want verified after a 4th fetch", err, team.Fetches())
	}
}

// An assertion that verified is remembered (Access sends the same one all
// session), but no longer than a fresh check would pass it: not past its exp,
// and not once the team has withdrawn its key.
func TestRememberedAssertionFollowsExpiryAndKeys(t *testing.T) {
	team, key := cfaccesstest.NewTeam(t)
	clock := testkit.NewClock(start)
	v := team.Verifier(t, clock.Now)
	ctx := context.Background()
	a := key.Sign(t, cfaccesstest.Claims("ana@example.com", start)) // exp: an hour on
	for i := range 2 {
		if _, err := v.Verify(ctx, a); err != nil {
			t.Fatalf("verification %d: %v", i+1, err)
		}
	}
	clock.Add(time.Hour + cfaccess.Leeway + time.Second)
	if _, err := v.Verify(ctx, a); !errors.Is(err, cfaccess.ErrRefused) || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("a remembered assertion past its exp: %v, want refused as expired", err)
	}

	b := key.Sign(t, cfaccesstest.Claims("ana@example.com", clock.Now()))
	if _, err := v.Verify(ctx, b); err != nil {
		t.Fatal(err)
	}
	fresh := cfaccesstest.NewKey(t)
	team.Serve(fresh)
	clock.Add(11 * time.Second)
	if _, err := v.Verify(ctx, fresh.Sign(t, cfaccesstest.Claims("ana@example.com", clock.Now()))); err != nil {
		t.Fatalf("the new key: %v", err) // and the set without the old key is fetched
	}
	if _, err := v.Verify(ctx, b); !errors.Is(err, cfaccess.ErrRefused) {
		t.Fatalf("a remembered assertion under a withdrawn key: %v, want refused", err)
	}
}

// Without a client of its own, a Verifier fetches keys only from public
// addresses: a certs URL on loopback is refused and verifies nothing.
func TestDefaultClientRefusesLoopback(t *testing.T) {
	team, key := cfaccesstest.NewTeam(t)
	v, err := cfaccess.New(cfaccesstest.Domain, cfaccesstest.AUD, cfaccess.Options{CertsURL: team.URL()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Verify(context.Background(), key.Sign(t, cfaccesstest.Claims("ana@example.com", time.Now()))); !errors.Is(err, cfaccess.ErrRefused) ||
		!strings.Contains(err.Error(), "could not be fetched") {
		t.Fatalf("with keys on loopback: %v, want refused", err)
	}
	if n := team.Fetches(); n != 0 {
		t.Fatalf("the loopback key set was fetched %d times, want never", n)
	}
}

func TestTeamHost(t *testing.T) {
	for in, want := range map[string]string{
		"myteam.cloudflareaccess.com": "myteam.cloudflareaccess.com", "https://MyTeam.cloudflareaccess.com/": "myteam.cloudflareaccess.com",
		"http://myteam.cloudflareaccess.com": "", "myteam": "", "myteam.cloudflareaccess.com/cdn-cgi": "", "": "",
	} {
		got, err := cfaccess.TeamHost(in)
		if got != want || (err == nil) != (want != "") {
			t.Errorf("TeamHost(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := cfaccess.New("myteam.cloudflareaccess.com", " ", cfaccess.Options{}); err == nil {
		t.Error("an empty audience was accepted")
	}
}

// BenchmarkVerify is the cost Access adds to each /mcp request, key cached
// (RS256, 2048 bits): "remembered" is an assertion seen before (Access sends
// one per session), "first" one never seen (the memory holds 1024, and the
// benchmark cycles through 2048), which is checked in full.
func BenchmarkVerify(b *testing.B) {
	team, key := cfaccesstest.NewTeam(b)
	v := team.Verifier(b, func() time.Time { return start })
	ctx := context.Background()
	pool := make([]string, 2048)
	for i := range pool {
		pool[i] = key.Sign(b, cfaccesstest.Claims(fmt.Sprintf("agent%d@example.com", i), start))
	}
	for _, c := range []struct {
		name string
		next func(i int) string
	}{{"remembered", func(int) string { return pool[0] }}, {"first", func(i int) string { return pool[i%len(pool)] }}} {
		b.Run(c.name, func(b *testing.B) {
			i := 0
			for b.Loop() {
				if _, err := v.Verify(ctx, c.next(i)); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}
