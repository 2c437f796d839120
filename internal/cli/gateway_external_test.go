package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/internal/server"
	"github.com/switchboardhq/switchboard/internal/testkit"
	"github.com/switchboardhq/switchboard/modules"
)

// everythingPackage is pinned so the test sees the tool set it was written for.
const everythingPackage = "@modelcontextprotocol/server-everything@2026.8.31"

// TestGatewayEverything puts the MCP reference server, a module Switchboard did not
// write, behind the gateway through npx and a wrapper script, as an operator would.
func TestGatewayEverything(t *testing.T) {
	for _, tool := range []string{"node", "npx"} {
		if _, err := exec.LookPath(tool); err != nil {
			testkit.SkipOrFail(t, "%s not installed; skipping the third-party module test", tool)
		}
	}
	dir := t.TempDir()
	wrapper := filepath.Join(dir, "switchboard-module-everything")
	if err := os.WriteFile(wrapper, []byte("#!/bin/sh\nexec npx --yes "+everythingPackage+" stdio\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chmod(wrapper, 0o755)
	manifests := filepath.Join(dir, "manifests")
	os.Mkdir(manifests, 0o755)
	writeManifest(t, manifests, "everything", wrapper, func(m map[string]any) {
		m["environment"] = []string{"PATH", "HOME", "EVERYTHING_ALLOWED"}
	})
	t.Setenv("EVERYTHING_ALLOWED", "allowed-value")
	t.Setenv("SWITCHBOARD_TEST_CANARY", "must-not-reach-the-module")
	ms := startModuleServer(t, server.Config{ModulesDir: manifests}, func(o *modules.Options) {
		o.StartTimeout = 3 * time.Minute // the first run may download the package
	})
	c := ms.dial(ms.endpoint("everyone", "--capabilities", "everything"))

	tools := c.moduleTools()
	for _, want := range []string{"everything_echo", "everything_get-env"} {
		if !strings.Contains(strings.Join(tools, " "), want) {
			t.Fatalf("%s not listed; tools: %v", want, tools)
		}
	}
	for _, tool := range tools {
		if !strings.HasPrefix(tool, "everything_") {
			t.Errorf("tool %s lacks the capability prefix", tool)
		}
	}
	body := c.raw(`{"jsonrpc":"2.0","id":5,"method":"tools/list","params":{}}`)
	if !strings.Contains(body, `"$schema":"http://json-schema.org/draft-07/schema#"`) {
		t.Errorf("the module's $schema did not reach the agent: %.400s", body)
	}

	res := c.raw(`{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"everything_echo","arguments":{"message":"through the gateway"}}}`)
	if !strings.Contains(res, "through the gateway") || strings.Contains(res, `"isError":true`) {
		t.Fatalf("echo through the gateway: %s", res)
	}
	env := c.raw(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"everything_get-env","arguments":{}}}`)
	// npx adds npm_* variables of its own; what matters is that nothing of
	// Switchboard's environment beyond the allowlist arrives.
	if !strings.Contains(env, "allowed-value") || !strings.Contains(env, "SWITCHBOARD_MODULE_NAME") {
		t.Fatalf("allowlisted variables missing from %s", env)
	}
	if strings.Contains(env, "SWITCHBOARD_TEST_CANARY") {
		t.Fatal("a variable outside the allowlist reached the module")
	}
}
