package cli

import (
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/store"
)

// TestEndpointGrants: `endpoint grants` lists an endpoint's OAuth grants and
// `endpoint revoke-grant` ends one.
func TestEndpointGrants(t *testing.T) {
	db := filepath.Join(t.TempDir(), "sb.db")
	ctx := context.Background()
	st := openRW(t, db)
	ep, _, err := st.CreateEndpoint(ctx, "claude-web", store.EndpointSpec{Queues: &[]string{"inbox"}}, "human:1")
	if err != nil {
		t.Fatal(err)
	}
	gid, _, err := st.CreateOAuthGrant(ctx, store.NewOAuthGrant{EndpointID: ep.ID, ClientID: "sbc_x", ClientName: "Claude",
		RedirectURI: "https://claude.ai/api/mcp/auth_callback", CodeChallenge: "c", CodeTTL: time.Minute}, "human:1")
	if err != nil {
		t.Fatal(err)
	}
	id, g := strconv.FormatInt(ep.ID, 10), strconv.FormatInt(gid, 10)
	code, out, errs := cli(t, "", "endpoint", "grants", id, "--db", db)
	if code != 0 || !strings.Contains(out, "Claude") || !strings.Contains(out, "claude.ai") || !strings.Contains(out, "never") {
		t.Fatalf("grants: exit %d, %q %q", code, out, errs)
	}
	if code, out, _ = cli(t, "", "endpoint", "grants", "--json", "--db", db); code != 0 || !strings.Contains(out, `"client_name": "Claude"`) {
		t.Fatalf("grants --json: exit %d, %q", code, out)
	}
	if code, out, errs = cli(t, "", "endpoint", "revoke-grant", g, "--db", db); code != 0 || !strings.Contains(out, "revoked") {
		t.Fatalf("revoke-grant: exit %d, %q %q", code, out, errs)
	}
	if code, _, _ = cli(t, "", "endpoint", "revoke-grant", g, "--db", db); code == 0 {
		t.Fatal("revoking a revoked grant succeeded")
	}
	if code, out, _ = cli(t, "", "endpoint", "grants", "--db", db); code != 0 || !strings.Contains(out, "no live OAuth grants") {
		t.Fatalf("grants after the revocation: exit %d, %q", code, out)
	}
	if code, out, _ = cli(t, "", "endpoint", "grants", id, "--db", db); code != 0 || !strings.Contains(out, "no live OAuth grants") {
		t.Fatalf("grants of an endpoint with none left: exit %d, %q", code, out)
	}
	// An endpoint there is not has no grants to list: it is not found.
	if code, out, errs = cli(t, "", "endpoint", "grants", "999", "--db", db); code != 1 || out != "" ||
		errs != "switchboard endpoint: endpoint 999: not found\n" {
		t.Fatalf("grants of no endpoint: exit %d, %q %q", code, out, errs)
	}
}
