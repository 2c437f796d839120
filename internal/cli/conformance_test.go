package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/internal/server"
	"github.com/switchboardhq/switchboard/internal/testkit"
)

// The official MCP conformance suite (@modelcontextprotocol/conformance, the
// version in testdata/conformance) runs its server scenarios against serve on
// 127.0.0.1, named as http://localhost:PORT/mcp. The scenarios are written for
// servers without authentication, so testdata/conformance's hooks.mjs adds the
// endpoint's credential to the suite's requests and leaves Host and Origin as the
// suite sends them. Skips without Node.js or the npm registry, unless
// SWITCHBOARD_REQUIRE_EXTERNAL=1.

// conformanceCheck is one check of the suite's checks.json.
type conformanceCheck struct {
	Scenario     string `json:"-"`
	ID           string `json:"id"`
	Status       string `json:"status"`
	ErrorMessage string `json:"errorMessage"`
	Details      struct {
		Untestable bool `json:"untestable"`
	} `json:"details"`
}

// conformance is a serve the suite can run against.
type conformance struct {
	dir, node, port, cred string
}

func newConformance(t *testing.T) *conformance {
	t.Helper()
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
	return &conformance{dir: dir, node: node, port: port, cred: cred}
}

// run runs the suite's server command with args and returns every check of every
// scenario it ran, and the suite's error (it exits 1 when a check failed).
func (c *conformance) run(t *testing.T, args ...string) ([]conformanceCheck, error) {
	t.Helper()
	results := t.TempDir()
	// A deadline, not a timed assertion: a hung suite must not hang go test.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.node, append([]string{"--import", "./hooks.mjs",
		filepath.Join("node_modules", "@modelcontextprotocol", "conformance", "dist", "index.js"),
		"server", "--url", "http://localhost:" + c.port + "/mcp", "-o", results}, args...)...)
	cmd.Dir = c.dir
	cmd.Env = append(os.Environ(), "SWITCHBOARD_CONFORMANCE_AUTH=Bearer "+c.cred, "NO_COLOR=1")
	out, runErr := cmd.CombinedOutput()
	found, _ := filepath.Glob(filepath.Join(results, "*", "checks.json"))
	if len(found) == 0 {
		t.Fatalf("the suite wrote no checks.json (%v):\n%s", runErr, out)
	}
	var all []conformanceCheck
	for _, f := range found {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var checks []conformanceCheck
		if err := json.Unmarshal(b, &checks); err != nil {
			t.Fatalf("%s: %v\n%s", f, err, b)
		}
		scenario := scenarioOf(filepath.Base(filepath.Dir(f)))
		for _, ch := range checks {
			ch.Scenario = scenario
			all = append(all, ch)
		}
	}
	return all, runErr
}

// resultStamp is the end of a result folder's name: the suite's ISO time with
// ':' and '.' made '-' (2026-12-06T03-53-44-203Z).
var resultStamp = regexp.MustCompile(`-\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-\d{3}Z$`)

// scenarioOf names the scenario of a result folder, server-SCENARIO-TIMESTAMP.
// Cutting at the last "-20" instead cut inside the time whenever its minute,
// second or millisecond began with 20, and the scenario then "did not run".
func scenarioOf(folder string) string {
	return resultStamp.ReplaceAllString(strings.TrimPrefix(folder, "server-"), "")
}

// score counts the checks that passed, of those that ran.
func score(checks []conformanceCheck) string {
	passed, ran := 0, 0
	for _, c := range checks {
		if c.Status == "SKIPPED" || c.Status == "INFO" {
			continue
		}
		ran++
		if c.Status == "SUCCESS" {
			passed++
		}
	}
	return fmt.Sprintf("%d of %d checks passed", passed, ran)
}

// mustPass fails t for every check of the named scenarios that did not pass,
// except those the suite itself calls untestable here (they need a fixture tool
// of the suite's own test server, such as test_logging_tool) and warnings (its
// SHOULDs).
func mustPass(t *testing.T, label string, checks []conformanceCheck, scenarios ...string) {
	t.Helper()
	ran := map[string]bool{}
	for _, c := range checks {
		ran[c.Scenario] = true
		if !strings.Contains(","+strings.Join(scenarios, ",")+",", ","+c.Scenario+",") {
			continue
		}
		if c.Status == "FAILURE" && !c.Details.Untestable {
			t.Errorf("%s: %s: check %s failed: %s", label, c.Scenario, c.ID, c.ErrorMessage)
		}
	}
	for _, s := range scenarios {
		if !ran[s] {
			t.Errorf("%s: scenario %s did not run", label, s)
		}
	}
}

// The suite's server scenarios for each revision /mcp serves from 2025-11-25 on.
// Switchboard is not the suite's test server: scenarios of prompts, resources,
// completions and the suite's fixture tools (test_simple_text and the like) fail
// for want of them, and are counted in the score logged, not held to passing.
// The scenarios of the protocol itself must pass: the lifecycle, tools/list,
// streams and DNS-rebinding protection, and for 2026-07-28 the stateless
// requests (_meta, server/discover, version errors, removed methods, listen
// streams) and the Mcp-Method/Mcp-Name header rules.
func TestConformanceServerScenarios(t *testing.T) {
	c := newConformance(t)
	for _, rev := range []struct {
		version   string
		scenarios []string
		must      []string
	}{
		{"2025-11-25", nil, []string{"server-initialize", "server-session-lifecycle", "ping", "tools-list",
			"server-sse-multiple-streams", "dns-rebinding-protection"}},
		{"2026-07-28", []string{"server-stateless", "http-header-validation", "caching"},
			[]string{"tools-list", "server-sse-multiple-streams", "dns-rebinding-protection", "server-stateless",
				"http-header-validation"}},
	} {
		checks, _ := c.run(t, "--spec-version", rev.version)
		for _, s := range rev.scenarios {
			more, _ := c.run(t, "--spec-version", rev.version, "--scenario", s)
			checks = append(checks, more...)
		}
		t.Logf("MCP %s: %s", rev.version, score(checks))
		mustPass(t, rev.version, checks, rev.must...)
	}
}

// dns-rebinding-protection alone: a foreign Host and Origin are refused, the
// listener's own loopback names accepted.
func TestConformanceDNSRebindingProtection(t *testing.T) {
	c := newConformance(t)
	checks, runErr := c.run(t, "--scenario", "dns-rebinding-protection")
	passed := map[string]bool{}
	for _, ch := range checks {
		if ch.Status != "SUCCESS" {
			t.Errorf("check %s: %s %s", ch.ID, ch.Status, ch.ErrorMessage)
		}
		passed[ch.ID] = ch.Status == "SUCCESS"
	}
	if !passed["localhost-host-rebinding-rejected"] || !passed["localhost-host-valid-accepted"] || runErr != nil {
		t.Fatalf("the scenario did not pass (%v): %+v", runErr, checks)
	}
}

// A result folder names its scenario whatever its time: a minute, second or
// millisecond that begins with 20 is part of the time, not of the name.
func TestConformanceScenarioOfFolder(t *testing.T) {
	for folder, want := range map[string]string{
		"server-initialize-2026-12-06T03-53-44-203Z":        "initialize",
		"server-server-initialize-2026-12-06T03-20-44-123Z": "server-initialize",
		"server-ping-2026-12-06T03-53-20-999Z":              "ping",
		"server-tools-list-2026-12-06T20-01-02-003Z":        "tools-list",
	} {
		if got := scenarioOf(folder); got != want {
			t.Errorf("scenarioOf(%q) = %q, want %q", folder, got, want)
		}
	}
}
