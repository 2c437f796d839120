package modules

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/internal/testkit"
)

// everythingPackage is pinned so the test sees the tool set it was written for.
const everythingPackage = "@modelcontextprotocol/server-everything@2026.8.31"

// requireExternal skips a test needing tool unless the environment demands
// external dependencies.
func requireExternal(t *testing.T, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			testkit.SkipOrFail(t, "%s not installed; skipping the third-party module test", tool)
		}
	}
}

// TestThirdPartyModuleEverything supervises the MCP reference server
// through npx and a wrapper script, the way an operator would install a
// module Switchboard did not write.
func TestThirdPartyModuleEverything(t *testing.T) {
	requireExternal(t, "node", "npx")
	t.Setenv("SWITCHBOARD_TEST_CANARY", "must-not-reach-the-module")
	wrapper := filepath.Join(t.TempDir(), "switchboard-module-everything")
	script := "#!/bin/sh\nexec npx --yes " + everythingPackage + " stdio\n"
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(wrapper, 0o755); err != nil {
		t.Fatal(err)
	}
	m := Manifest{
		File: "everything.json", Version: 1, Type: "module", Name: "everything",
		Title: "Everything", Description: "MCP reference server.", Risk: "read",
		Command: wrapper, Environment: []string{"PATH", "HOME", "EVERYTHING_ALLOWED"},
		EnforceEgressPolicy: true,
	}
	h := newHarness(t, []Manifest{m}, func(o *Options) {
		o.StartTimeout = 3 * time.Minute // the first run downloads the package
		o.StopGrace = 2 * time.Second
		o.LookupEnv = func(name string) (string, bool) {
			if name == "EVERYTHING_ALLOWED" {
				return "allowed-value", true
			}
			return os.LookupEnv(name)
		}
	})
	h.start()

	echo, ok := h.tool("everything_echo")
	if !ok || !echo.Available {
		t.Fatalf("everything_echo missing; tools: %+v", h.sup.Tools())
	}
	var def map[string]json.RawMessage
	if err := json.Unmarshal(echo.Definition, &def); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(def["inputSchema"]), `"$schema":"http://json-schema.org/draft-07/schema#"`) ||
		!strings.Contains(string(def["annotations"]), `"readOnlyHint":true`) || string(def["name"]) != `"everything_echo"` {
		t.Fatalf("everything_echo definition lost keys: %s", echo.Definition)
	}
	if _, ok := h.tool("everything_get-env"); !ok {
		t.Fatal("everything_get-env missing")
	}
	text := callText(t, h, "everything_echo", `{"message":"through the gateway"}`)
	if !strings.Contains(text, "through the gateway") {
		t.Fatalf("echo = %q", text)
	}
	env := callText(t, h, "everything_get-env", `{}`)
	// npx adds npm_* variables of its own; what matters is that nothing of
	// Switchboard's environment beyond the allowlist arrives.
	if !strings.Contains(env, "allowed-value") || !strings.Contains(env, "SWITCHBOARD_MODULE_NAME") {
		t.Fatalf("allowlisted variables missing from %s", env)
	}
	if strings.Contains(env, "SWITCHBOARD_TEST_CANARY") {
		t.Fatal("a variable outside the allowlist reached the module")
	}

	// kill -9: calls fail fast, readiness drops, the module returns.
	pid := h.status("everything").PID
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	w := h.nextWait()
	if h.sup.Ready() {
		t.Fatal("ready while the module is down")
	}
	if _, err := h.sup.Call(context.Background(), "everything_echo", json.RawMessage(`{"message":"x"}`)); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("call while down: %v", err)
	}
	w.fire <- time.Now()
	h.until("everything up again", h.sup.Ready)
	if text := callText(t, h, "everything_echo", `{"message":"back"}`); !strings.Contains(text, "back") {
		t.Fatalf("echo after restart = %q", text)
	}

	// Shutdown leaves no member of the module's process group (sh → npx →
	// node) behind.
	pid = h.status("everything").PID
	group := groupMembers(t, pid)
	if len(group) == 0 {
		t.Fatal("found no process in the module's group")
	}
	var gone []<-chan struct{}
	for _, p := range group {
		gone = append(gone, testkit.WatchExit(t, p, waitLimit))
	}
	if err := h.sup.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	for i, ch := range gone {
		select {
		case <-ch:
		case <-time.After(waitLimit):
			t.Fatalf("process %d of the module survived Close", group[i])
		}
	}
}

func callText(t *testing.T, h *harness, tool, args string) string {
	t.Helper()
	raw, err := h.sup.Call(context.Background(), tool, json.RawMessage(args))
	if err != nil {
		t.Fatalf("call %s: %v", tool, err)
	}
	var res struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		t.Fatalf("call %s: %s: %v", tool, raw, err)
	}
	var parts []string
	for _, c := range res.Content {
		parts = append(parts, c.Text)
	}
	return strings.Join(parts, "\n")
}

// groupMembers lists the pids whose process group is pgid, from /proc.
func groupMembers(t *testing.T, pgid int) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		// After the name: state ppid pgrp ...
		f := strings.Fields(s[i+1:])
		if len(f) > 2 && f[2] == strconv.Itoa(pgid) && f[0] != "Z" {
			out = append(out, pid)
		}
	}
	return out
}
