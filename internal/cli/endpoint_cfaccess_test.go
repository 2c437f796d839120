package cli

import (
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchboardhq/switchboard/internal/cfaccess"
	"github.com/switchboardhq/switchboard/internal/server"
	"github.com/switchboardhq/switchboard/store"
)

// An endpoint's --cf-access-identity is set at creation, shown by endpoint list
// and show (and their JSON), refused when another live endpoint has it (nothing written),
// and cleared by "".
func TestEndpointCFAccessIdentity(t *testing.T) {
	db := filepath.Join(t.TempDir(), "sb.db")
	code, out, errs := cli(t, "", "endpoint", "create", "--db", db, "--agent", "ana", "--queues", "inbox",
		"--cf-access-identity", "Ana@Example.com", "--json")
	var created struct {
		ID       int64  `json:"endpoint_id"`
		Identity string `json:"cf_access_identity"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &created) != nil || created.Identity != "ana@example.com" {
		t.Fatalf("create: exit %d, %q %q", code, out, errs)
	}
	if code, out, _ := cli(t, "", "endpoint", "list", "--db", db); code != 0 || !strings.Contains(out, "CLOUDFLARE ACCESS") ||
		!strings.Contains(out, "ana@example.com") {
		t.Fatalf("list: exit %d, %q", code, out)
	}
	if code, out, _ := cli(t, "", "endpoint", "show", itoa(created.ID), "--db", db); code != 0 ||
		!strings.Contains(out, "cloudflare access: ana@example.com") {
		t.Fatalf("show: exit %d, %q", code, out)
	}
	code, _, errs = cli(t, "", "endpoint", "create", "--db", db, "--agent", "bob", "--queues", "inbox", "--cf-access-identity", "ana@example.com")
	if code == 0 || !strings.Contains(errs, "another live endpoint") {
		t.Fatalf("second endpoint with the same identity: exit %d, %q", code, errs)
	}
	if _, out, _ := cli(t, "", "endpoint", "list", "--db", db, "--all"); strings.Contains(out, "bob") {
		t.Fatalf("a refused creation left an endpoint: %q", out)
	}
	if code, _, errs := cli(t, "", "endpoint", "update", itoa(created.ID), "--db", db, "--cf-access-identity", "ana smith"); code == 0 ||
		!strings.Contains(errs, "space") {
		t.Fatalf("identity with a space: exit %d, %q", code, errs)
	}
	code, out, errs = cli(t, "", "endpoint", "update", itoa(created.ID), "--db", db, "--cf-access-identity", "", "--json")
	if code != 0 || strings.Contains(out, "cf_access_identity") {
		t.Fatalf("clearing: exit %d, %q %q", code, out, errs)
	}
}

// serve takes the team domain and the audience together or not at all; with
// them, a request to /mcp with an assertion and no bearer is checked as one
// (a bad one is refused as such), and a bearer works as before.
func TestServeCloudflareAccessSettings(t *testing.T) {
	db := filepath.Join(t.TempDir(), "sb.db")
	for _, c := range []struct {
		env  map[string]string
		args []string
	}{
		{nil, []string{"--cf-access-team-domain", "myteam.cloudflareaccess.com"}},
		{nil, []string{"--cf-access-aud", "4714c135"}},
		{map[string]string{"SWITCHBOARD_CF_ACCESS_AUD": "4714c135"}, nil},
		{nil, []string{"--cf-access-team-domain", "http://myteam.cloudflareaccess.com", "--cf-access-aud", "4714c135"}},
	} {
		code, _, errs := runCLI(t, c.env, append([]string{"serve", "--db", db, "--listen", "127.0.0.1:0"}, c.args...)...)
		if code != 2 || !strings.Contains(errs, "cf-access") {
			t.Errorf("serve %v (env %v): exit %d, %q; want a usage error", c.args, c.env, code, errs)
		}
	}

	base, srv, stop := startServerLogging(t, server.Config{CFAccessTeamDomain: "myteam.cloudflareaccess.com", CFAccessAUD: "4714c135"}, nil)
	defer stop()
	q := []string{"inbox"}
	_, cred, err := srv.Store().CreateEndpoint(t.Context(), "ana", store.EndpointSpec{Queues: &q}, "human:test")
	if err != nil {
		t.Fatal(err)
	}
	post := func(header, value string) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, base+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize",`+
			`"params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set(header, value)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := post(cfaccess.Header, "not-a-jwt"); code != http.StatusUnauthorized || !strings.Contains(body, "Cloudflare Access") {
		t.Fatalf("a bad assertion: %d %q, want 401 saying the assertion was refused", code, body)
	}
	if code, body := post("Authorization", "Bearer "+cred); code != http.StatusOK {
		t.Fatalf("a bearer: %d %q", code, body)
	}
}
