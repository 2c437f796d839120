package cli

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/internal/server"
	"github.com/switchboardhq/switchboard/internal/testkit"
)

// The official MCP conformance suite's dns-rebinding-protection scenario against
// serve on 127.0.0.1, named as http://localhost:PORT/mcp: a foreign Host and
// Origin are refused, the listener's own loopback names accepted. The scenario
// is written for servers without authentication, so testdata/conformance's
// hooks.mjs adds the endpoint's credential to its requests and leaves Host and
// Origin as the suite sends them. Skips without Node.js or the npm registry,
// unless SWITCHBOARD_REQUIRE_EXTERNAL=1.
func TestConformanceDNSRebindingProtection(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: an npm install and the Node.js conformance suite")
	}
	dir, node := testkit.NPMInstall(t, filepath.Join("testdata", "conformance"), "package.json", "package-lock.json", "hooks.mjs")
	db := filepath.Join(t.TempDir(), "sb.db")
	cred := createEndpoint(t, db, "--agent", "conformance", "--queues", "inbox")
	base, _ := startServer(t, server.Config{DB: db})
	_, port, err := net.SplitHostPort(strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	results := t.TempDir()
	// A deadline, not a timed assertion: a hung suite must not hang go test.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "--import", "./hooks.mjs",
		filepath.Join("node_modules", "@modelcontextprotocol", "conformance", "dist", "index.js"),
		"server", "--url", "http://localhost:"+port+"/mcp", "--scenario", "dns-rebinding-protection", "-o", results)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "SWITCHBOARD_CONFORMANCE_AUTH=Bearer "+cred, "NO_COLOR=1")
	out, runErr := cmd.CombinedOutput()
	found, _ := filepath.Glob(filepath.Join(results, "*", "checks.json"))
	if len(found) != 1 {
		t.Fatalf("the suite wrote no checks.json (%v):\n%s", runErr, out)
	}
	b, err := os.ReadFile(found[0])
	if err != nil {
		t.Fatal(err)
	}
	var checks []struct {
		ID           string `json:"id"`
		Status       string `json:"status"`
		ErrorMessage string `json:"errorMessage"`
	}
	if err := json.Unmarshal(b, &checks); err != nil {
		t.Fatalf("checks.json: %v\n%s", err, b)
	}
	passed := map[string]bool{}
	for _, c := range checks {
		if c.Status != "SUCCESS" {
			t.Errorf("check %s: %s %s", c.ID, c.Status, c.ErrorMessage)
		}
		passed[c.ID] = c.Status == "SUCCESS"
	}
	if !passed["localhost-host-rebinding-rejected"] || !passed["localhost-host-valid-accepted"] || runErr != nil {
		t.Fatalf("the scenario did not pass (%v): %+v\n%s", runErr, checks, out)
	}
}
