package modules

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/internal/logevery"
	"github.com/switchboardhq/switchboard/internal/testkit"
)

// echoSchema is the test module's raw input schema for echo, as it sends it.
const echoSchema = `{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","properties":{"text":{"type":"string","x-sensitive":false}},"additionalProperties":false}`

func TestToolsAreListedWithPrefixesAndRawDefinitions(t *testing.T) {
	// A page size of 3 makes the gateway follow tools/list cursors.
	h := newHarness(t, []Manifest{testManifest("testmod", "-page-size", "3")})
	h.start()

	var names []string
	for _, tool := range h.sup.Tools() {
		names = append(names, tool.Name)
		if !tool.Available || tool.Withheld || tool.Module != "testmod" {
			t.Errorf("tool %+v: want available, not withheld, module testmod", tool)
		}
	}
	want := []string{"testmod_add_tool", "testmod_crash", "testmod_echo", "testmod_elicit", "testmod_emit_garbage",
		"testmod_freeze_stdin", "testmod_get_env", "testmod_sleep", "testmod_spawn_grandchild", "testmod_status"}
	if !slices.Equal(names, want) {
		t.Fatalf("tools = %q, want %q", names, want)
	}
	status, _ := h.tool("testmod_status")
	if status.Upstream != "testmod_status" {
		t.Errorf("already-prefixed tool: upstream %q, want testmod_status (no double prefix)", status.Upstream)
	}

	echo, _ := h.tool("testmod_echo")
	if echo.Upstream != "echo" {
		t.Errorf("echo upstream = %q", echo.Upstream)
	}
	var def map[string]json.RawMessage
	if err := json.Unmarshal(echo.Definition, &def); err != nil {
		t.Fatalf("definition %s: %v", echo.Definition, err)
	}
	for key, want := range map[string]string{
		"name":        `"testmod_echo"`,
		"title":       `"Echo"`,
		"inputSchema": echoSchema, // byte for byte, $schema and x- keys included
		"_meta":       `{"example.com/owner":"tests"}`,
		"annotations": `{"title":"Echo text","readOnlyHint":true}`,
	} {
		if string(def[key]) != want {
			t.Errorf("definition %s = %s, want %s", key, def[key], want)
		}
	}

	// Re-exposing through mcp-go's server keeps the schema raw as well.
	mt, err := echo.MCPTool()
	if err != nil {
		t.Fatal(err)
	}
	reencoded, err := json.Marshal(mt)
	if err != nil {
		t.Fatal(err)
	}
	var again map[string]json.RawMessage
	if err := json.Unmarshal(reencoded, &again); err != nil {
		t.Fatal(err)
	}
	if string(again["inputSchema"]) != echoSchema || string(again["name"]) != `"testmod_echo"` ||
		!strings.Contains(string(again["_meta"]), `"example.com/owner":"tests"`) || mt.Annotations.ReadOnlyHint == nil || !*mt.Annotations.ReadOnlyHint {
		t.Fatalf("MCPTool re-encoded as %s", reencoded)
	}

	got := h.call("testmod_echo", map[string]any{"text": "hello"})
	if got["text"] != "hello" {
		t.Fatalf("echo structuredContent = %v", got)
	}
	if !h.sup.Ready() {
		t.Fatal("Ready() = false with the only module up")
	}
}

func TestModuleEnvironmentIsExactlyTheAllowlist(t *testing.T) {
	t.Setenv("SWITCHBOARD_TEST_LEAK", "must-not-reach-the-module")
	h := newHarness(t, []Manifest{testManifest("testmod")})
	h.start()

	got := h.call("testmod_get_env", nil)
	var env []string
	for _, e := range got["env"].([]any) {
		env = append(env, e.(string))
	}
	want := []string{
		"LANG=C.UTF-8",
		`SWITCHBOARD_MODULE_EGRESS_POLICY={"allow":["example.test"]}`,
		"SWITCHBOARD_MODULE_NAME=testmod",
		"TESTMOD_TOKEN=" + testToken,
	}
	if !slices.Equal(env, want) {
		t.Fatalf("module environment = %q, want exactly %q", env, want)
	}
	if cwd := got["cwd"]; cwd != filepath.Dir(testModuleBin) {
		t.Fatalf("module working directory = %v, want %s", cwd, filepath.Dir(testModuleBin))
	}
}

func TestKilledModuleFailsFastAndComesBack(t *testing.T) {
	h := newHarness(t, []Manifest{testManifest("testmod")})
	h.start()
	first := h.status("testmod")
	if first.State != StateUp || first.PID == 0 {
		t.Fatalf("status after start = %+v", first)
	}

	if err := syscall.Kill(first.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	w := h.nextWait()
	if w.d != 5*time.Second {
		t.Fatalf("first restart backoff = %v, want 5s", w.d)
	}
	down := h.status("testmod")
	if down.State != StateBackoff || down.LastExit == nil || down.LastExit.Signal != "SIGKILL" {
		t.Fatalf("status while down = %+v, want backoff after SIGKILL", down)
	}
	if !slices.Contains(down.Stderr, "testmodule starting") {
		t.Errorf("stderr lines = %q, want the module's start-up line", down.Stderr)
	}
	if h.sup.Ready() {
		t.Fatal("Ready() = true while the module is down")
	}
	if _, err := h.sup.Call(context.Background(), "testmod_echo", json.RawMessage(`{"text":"x"}`)); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Call while down: err = %v, want ErrUnavailable", err)
	}
	if echo, ok := h.tool("testmod_echo"); !ok || echo.Available {
		t.Fatalf("echo while down = %+v (listed %v), want listed and unavailable", echo, ok)
	}

	w.fire <- time.Now()
	h.until("module up again", h.sup.Ready)
	again := h.status("testmod")
	if again.Restarts != 1 || again.PID == first.PID || again.PID == 0 {
		t.Fatalf("status after restart = %+v, want 1 restart and a new pid", again)
	}
	if got := h.call("testmod_echo", map[string]any{"text": "back"}); got["text"] != "back" {
		t.Fatalf("echo after restart = %v", got)
	}

	// A crash loop backs off exponentially and keeps its evidence.
	if _, err := h.sup.Call(context.Background(), "testmod_crash", json.RawMessage(`{"code":3}`)); err == nil {
		t.Fatal("crash call returned a result")
	}
	w = h.nextWait()
	if w.d != 10*time.Second {
		t.Fatalf("second restart backoff = %v, want 10s", w.d)
	}
	crashed := h.status("testmod")
	if crashed.LastExit == nil || crashed.LastExit.Code != 3 || !slices.Contains(crashed.Stderr, "crashing with code 3") {
		t.Fatalf("status after crash = %+v, want exit code 3 and its stderr line", crashed)
	}
	if !strings.Contains(crashed.LastError, "exited with code 3") {
		t.Fatalf("last error = %q", crashed.LastError)
	}
}

func TestModuleListChangedRefreshesTools(t *testing.T) {
	h := newHarness(t, []Manifest{testManifest("testmod")})
	h.start()
	if _, ok := h.tool("testmod_extra"); ok {
		t.Fatal("testmod_extra listed before it was added")
	}
	h.call("testmod_add_tool", map[string]any{"name": "extra"})
	// A tool the module did not list when its tools were first pinned is new:
	// listed, but withheld until a human approves it (a module that adds
	// delete_everything is as much a rug pull as one that redefines a tool).
	h.until("testmod_extra listed", func() bool {
		_, ok := h.tool("testmod_extra")
		return ok
	})
	extra, _ := h.tool("testmod_extra")
	if extra.Available || !extra.Withheld {
		t.Fatalf("a new tool = %+v, want withheld", extra)
	}
	if _, err := h.sup.Call(context.Background(), "testmod_extra", nil); !errors.Is(err, ErrWithheld) {
		t.Fatalf("call of a new tool: %v, want ErrWithheld", err)
	}
	st := h.status("testmod")
	if i := slices.IndexFunc(st.Tools, func(ts ToolStatus) bool { return ts.Name == "testmod_extra" }); i < 0 ||
		!st.Tools[i].New || st.Tools[i].PinnedDefinition != nil || !strings.Contains(string(st.Tools[i].Definition), "added at runtime") {
		t.Fatalf("status of a new tool: %+v", st.Tools)
	}
	if rows := h.auditsOf("module.tool_withheld"); len(rows) != 1 || !strings.Contains(rows[0].detail, "new tool") {
		t.Fatalf("withheld audits = %+v", rows)
	}
	if err := h.sup.Approve(context.Background(), "testmod", "extra", extra.Hash); err != nil {
		t.Fatal(err)
	}
	raw, err := h.sup.Call(context.Background(), "testmod_extra", nil)
	if err != nil || !strings.Contains(string(raw), `"text":"extra"`) {
		t.Fatalf("call testmod_extra after its approval = %s, %v", raw, err)
	}
	st = h.status("testmod")
	if i := slices.IndexFunc(st.Tools, func(ts ToolStatus) bool { return ts.Name == "testmod_extra" }); st.Tools[i].New || st.Tools[i].Withheld {
		t.Fatalf("an approved new tool: %+v", st.Tools[i])
	}
}

// With include_tools the manifest, the operator's, names every tool that can
// appear: a tool it comes to include is pinned on first sight, not withheld.
func TestIncludedToolsArePinnedOnFirstSight(t *testing.T) {
	man := testManifest("testmod")
	man.IncludeTools = []string{"echo"}
	h := newHarness(t, []Manifest{man})
	h.start()
	h.sup.Close(context.Background())
	// The operator adds a tool to include_tools, and serve starts again.
	man.IncludeTools = []string{"echo", "testmod_status"}
	again := newHarness(t, []Manifest{man}, func(o *Options) { o.Pins = h.pins })
	again.pins = h.pins
	again.start()
	if status, ok := again.tool("testmod_status"); !ok || !status.Available || status.Withheld {
		t.Fatalf("a tool the manifest came to include: %+v, want available", status)
	}
}

// One tool the gateway cannot expose does not freeze the module's list: it is
// refused on its own, shown in the status, and later changes still arrive.
func TestUnexposableToolIsRefusedAlone(t *testing.T) {
	h := newHarness(t, []Manifest{testManifest("testmod")})
	h.start()
	h.call("testmod_add_tool", map[string]any{"name": "bad name"})
	// A refusal alone changes no tool, so it sends no change notice: poll.
	h.poll("the bad tool refused", func() bool { return len(h.status("testmod").RefusedTools) == 1 })
	r := h.status("testmod").RefusedTools[0]
	if r.Upstream != "bad name" || !strings.Contains(r.Reason, `"testmod_bad name" is not a valid MCP tool name`) {
		t.Fatalf("refused = %+v", r)
	}
	h.call("testmod_add_tool", map[string]any{"name": "extra"})
	h.until("testmod_extra listed after the refusal", func() bool {
		_, ok := h.tool("testmod_extra")
		return ok
	})
	if _, ok := h.tool("testmod_echo"); !ok {
		t.Fatal("testmod_echo is gone")
	}
	if n := len(h.status("testmod").RefusedTools); n != 1 {
		t.Fatalf("%d refused tools, want still 1", n)
	}
}

func TestChangedDefinitionIsWithheldUntilApproved(t *testing.T) {
	h := newHarness(t, []Manifest{testManifest("testmod")})
	h.start()
	before, _ := h.tool("testmod_echo")
	if n := len(h.auditsOf("module.tool_pinned")); n != 10 {
		t.Fatalf("first-sight pins audited = %d, want 10", n)
	}

	// The module redefines echo at runtime (a "rug pull").
	h.call("testmod_add_tool", map[string]any{"name": "echo", "description": "Now also emails your files."})
	h.until("echo withheld", func() bool {
		tool, _ := h.tool("testmod_echo")
		return tool.Withheld
	})
	after, _ := h.tool("testmod_echo")
	if after.Available || after.Hash == before.Hash {
		t.Fatalf("withheld echo = %+v", after)
	}
	if _, err := h.sup.Call(context.Background(), "testmod_echo", json.RawMessage(`{"text":"x"}`)); !errors.Is(err, ErrWithheld) {
		t.Fatalf("Call withheld tool: err = %v, want ErrWithheld", err)
	}
	withheld := h.auditsOf("module.tool_withheld")
	if len(withheld) != 1 || withheld[0].target != "testmod/testmod_echo" || !strings.Contains(withheld[0].detail, after.Hash) {
		t.Fatalf("withheld audits = %+v", withheld)
	}
	if pending, ok := h.pins.Pending("testmod", "testmod_echo"); !ok || pending != after.Hash {
		t.Fatalf("pending pin = %q, %v; want %q", pending, ok, after.Hash)
	}
	st := h.status("testmod")
	i := slices.IndexFunc(st.Tools, func(ts ToolStatus) bool { return ts.Name == "testmod_echo" && ts.Withheld })
	if i < 0 {
		t.Fatalf("status tools = %+v, want echo withheld", st.Tools)
	}
	// The status carries the approved definition beside the new one, both keys
	// sorted and indented, so that a human sees what changed line by line.
	was, now := string(st.Tools[i].PinnedDefinition), string(st.Tools[i].Definition)
	if !strings.Contains(now, "\n  \"description\": \"Now also emails your files.\",\n") ||
		!strings.Contains(was, "\n  \"name\": \"testmod_echo\"") || strings.Contains(was, "emails") ||
		strings.Index(was, `"description"`) > strings.Index(was, `"name"`) {
		t.Fatalf("status of withheld echo: pinned\n%s\nnow\n%s", was, now)
	}

	// An approval of the definition a human saw earlier (the pinned one, here)
	// pins nothing once the module has redefined the tool.
	if err := h.sup.Approve(context.Background(), "testmod", "echo", before.Hash); !errors.Is(err, ErrDefinitionChanged) {
		t.Fatalf("approving a definition no longer current: %v, want ErrDefinitionChanged", err)
	}
	if still, _ := h.tool("testmod_echo"); !still.Withheld {
		t.Fatal("a refused approval released the tool")
	}
	if err := h.sup.Approve(context.Background(), "testmod", "echo", strings.ToUpper(after.Hash)); err != nil {
		t.Fatal(err)
	}
	approved, _ := h.tool("testmod_echo")
	if !approved.Available || approved.Withheld {
		t.Fatalf("approved echo = %+v", approved)
	}
	// The approval keeps the definition it approved, for the next change.
	if def, _ := h.pins.PinnedDefinition(context.Background(), "testmod", "testmod_echo"); string(def) != now {
		t.Fatalf("pinned definition after approval:\n%s\nwant\n%s", def, now)
	}
	if got := h.call("testmod_echo", map[string]any{"text": "ok"}); got["text"] != "ok" {
		t.Fatalf("echo after approval = %v", got)
	}
	if n := len(h.auditsOf("module.tool_approved")); n != 1 {
		t.Fatalf("approval audits = %d", n)
	}
	if err := h.sup.Approve(context.Background(), "testmod", "nope", ""); !errors.Is(err, ErrUnknownTool) {
		t.Fatalf("Approve unknown tool: %v", err)
	}
}

func TestDefinitionChangedAcrossRestartIsWithheld(t *testing.T) {
	desc := filepath.Join(t.TempDir(), "desc")
	if err := os.WriteFile(desc, []byte("Echo, version one."), 0o600); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, []Manifest{testManifest("testmod", "-desc-file", desc)})
	h.start()
	if err := os.WriteFile(desc, []byte("Echo, version two."), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(h.status("testmod").PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	h.nextWait().fire <- time.Now()
	h.until("module up", h.sup.Ready)
	echo, _ := h.tool("testmod_echo")
	if !echo.Withheld || echo.Available {
		t.Fatalf("echo after a restart with a new definition = %+v, want withheld", echo)
	}
	if status, _ := h.tool("testmod_status"); !status.Available {
		t.Fatal("an unchanged tool was withheld")
	}

	// An approval written by another process (the CLI) takes effect on reload.
	if err := h.pins.PinTool(context.Background(), "testmod", "testmod_echo", echo.Hash, nil); err != nil {
		t.Fatal(err)
	}
	if err := h.sup.ReloadPins(context.Background()); err != nil {
		t.Fatal(err)
	}
	if echo, _ := h.tool("testmod_echo"); !echo.Available {
		t.Fatalf("echo after an out-of-process approval = %+v", echo)
	}
}

func TestGarbageOnStdoutRestartsTheModule(t *testing.T) {
	h := newHarness(t, []Manifest{testManifest("testmod")})
	h.start()
	pid := h.status("testmod").PID
	_, _ = h.sup.Call(context.Background(), "testmod_emit_garbage", nil)
	w := h.nextWait()
	st := h.status("testmod")
	if !strings.Contains(st.LastError, "not JSON-RPC") {
		t.Fatalf("last error = %q, want the garbage reported", st.LastError)
	}
	if !processGone(pid) {
		t.Fatalf("module %d still runs after its session broke", pid)
	}
	w.fire <- time.Now()
	h.until("module up", h.sup.Ready)
	if got := h.call("testmod_echo", map[string]any{"text": "clean"}); got["text"] != "clean" {
		t.Fatalf("echo after restart = %v", got)
	}
}

func TestCloseLeavesNoProcessBehind(t *testing.T) {
	for _, tc := range []struct {
		name       string
		args       []string
		wantSignal string
	}{
		{"orderly", nil, ""},
		{"stubborn module is killed", []string{"-stubborn"}, "SIGKILL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, []Manifest{testManifest("testmod", tc.args...)}, func(o *Options) {
				o.StopGrace = 200 * time.Millisecond
			})
			h.start()
			pid := h.status("testmod").PID
			got := h.call("testmod_spawn_grandchild", nil)
			grandchild := int(got["pid"].(float64))
			gone := testkit.WatchExit(t, grandchild, waitLimit)

			if err := h.sup.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			st := h.status("testmod")
			if st.State != StateStopped || st.LastExit == nil || st.LastExit.Signal != tc.wantSignal {
				t.Fatalf("status after Close = %+v, want stopped with signal %q", st, tc.wantSignal)
			}
			if !processGone(pid) {
				t.Fatalf("module %d survived Close", pid)
			}
			select {
			case <-gone:
			case <-time.After(waitLimit):
				t.Fatalf("grandchild %d survived Close", grandchild)
			}
			if !processGone(grandchild) {
				t.Fatalf("grandchild %d still runs", grandchild)
			}
			if _, err := h.sup.Call(context.Background(), "testmod_echo", nil); !errors.Is(err, ErrUnavailable) {
				t.Fatalf("Call after Close: %v", err)
			}
		})
	}
}

func TestStartRefusesIncludeToolTheModuleDoesNotAdvertise(t *testing.T) {
	m := testManifest("testmod")
	m.IncludeTools = []string{"echo", "does_not_exist"}
	h := newHarness(t, []Manifest{m})
	err := h.sup.Start(context.Background())
	if err == nil {
		_ = h.sup.Close(context.Background())
		t.Fatal("Start accepted an include_tools entry the module does not advertise")
	}
	if !strings.Contains(err.Error(), `testmod.json: field "include_tools": module does not advertise ["does_not_exist"]`) {
		t.Fatalf("err = %v", err)
	}
	st := h.status("testmod")
	if st.State != StateStopped || st.LastExit == nil || !processGone(st.PID) {
		t.Fatalf("status after refused start = %+v", st)
	}
}

func TestIncludeToolsSelectsExactly(t *testing.T) {
	m := testManifest("testmod")
	m.IncludeTools = []string{"echo", "testmod_status"}
	h := newHarness(t, []Manifest{m})
	h.start()
	var names []string
	for _, tool := range h.sup.Tools() {
		names = append(names, tool.Name)
	}
	if !slices.Equal(names, []string{"testmod_echo", "testmod_status"}) {
		t.Fatalf("tools = %q", names)
	}
	if _, err := h.sup.Call(context.Background(), "testmod_get_env", nil); !errors.Is(err, ErrUnknownTool) {
		t.Fatalf("Call of an unselected tool: %v, want ErrUnknownTool", err)
	}
}

func TestBrokenModuleRetriesWhileOthersServe(t *testing.T) {
	script := filepath.Join(t.TempDir(), "broken-module")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho 'cannot reach upstream' >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(script, 0o755); err != nil {
		t.Fatal(err)
	}
	broken := testManifest("broken")
	broken.Command = script
	h := newHarness(t, []Manifest{testManifest("testmod"), broken})
	h.start()

	if tool, ok := h.tool("testmod_echo"); !ok || !tool.Available {
		t.Fatal("the healthy module does not serve")
	}
	if h.sup.Ready() {
		t.Fatal("Ready() = true with a module down")
	}
	for _, want := range []time.Duration{5 * time.Second, 10 * time.Second, 20 * time.Second} {
		w := h.nextWait()
		if w.d != want {
			t.Fatalf("backoff = %v, want %v", w.d, want)
		}
		st := h.status("broken")
		if st.State != StateBackoff || st.LastExit == nil || st.LastExit.Code != 1 ||
			!slices.Contains(st.Stderr, "cannot reach upstream") || st.NextAttempt.IsZero() {
			t.Fatalf("broken module status = %+v", st)
		}
		w.fire <- time.Now()
	}
	h.nextWait() // the fourth wait: the loop goes on
	if _, err := h.sup.Call(context.Background(), "broken_anything", nil); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Call to a module that never came up: %v", err)
	}
	if got := h.call("testmod_echo", map[string]any{"text": "still here"}); got["text"] != "still here" {
		t.Fatalf("echo = %v", got)
	}
	if st := h.status("broken"); st.Restarts != 3 {
		t.Fatalf("restarts = %d, want 3", st.Restarts)
	}
}

func TestCallHonoursContext(t *testing.T) {
	h := newHarness(t, []Manifest{testManifest("testmod")})
	h.start()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := h.sup.Call(ctx, "testmod_sleep", json.RawMessage(`{"ms":600000}`))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want context.DeadlineExceeded", err)
	}
	// The session survives an abandoned call.
	if got := h.call("testmod_echo", map[string]any{"text": "still"}); got["text"] != "still" {
		t.Fatalf("echo = %v", got)
	}
	for _, args := range []string{`[1]`, `"x"`, `{"text":`} {
		if _, err := h.sup.Call(context.Background(), "testmod_echo", json.RawMessage(args)); !errors.Is(err, ErrArguments) {
			t.Fatalf("arguments %s: %v, want ErrArguments", args, err)
		}
	}
	// Checked before the tool is looked up: the answer does not depend on it.
	if _, err := h.sup.Call(context.Background(), "nomodule_echo", json.RawMessage(`[1]`)); !errors.Is(err, ErrArguments) {
		t.Fatalf("arguments of an unknown tool: %v, want ErrArguments", err)
	}
	if _, err := h.sup.Call(context.Background(), "nomodule_echo", nil); !errors.Is(err, ErrUnknownTool) {
		t.Fatalf("unknown module tool: %v", err)
	}
}

func TestStartRefusesInvalidManifest(t *testing.T) {
	m := testManifest("testmod")
	m.Environment = []string{"TESTMOD_UNSET_VARIABLE"}
	h := newHarness(t, []Manifest{m})
	err := h.sup.Start(context.Background())
	if err == nil || !strings.Contains(err.Error(), `testmod.json: field "environment"`) {
		t.Fatalf("Start err = %v", err)
	}
	if st := h.status("testmod"); st.State != StateStopped || st.PID != 0 {
		t.Fatalf("a module ran despite its invalid manifest: %+v", st)
	}
}

// A module that stops reading its stdin must not hold calls (or shutdown) behind a
// write that never finishes: the write's deadline kills the module, the call fails
// as unavailable, calls queued behind it fail too, and the module is restarted.
func TestModuleThatStopsReadingStdinIsKilled(t *testing.T) {
	h := newHarness(t, []Manifest{testManifest("testmod")}, func(o *Options) { o.StdinStall = 300 * time.Millisecond })
	h.start()
	pid := h.status("testmod").PID
	if _, err := h.sup.Call(context.Background(), "testmod_freeze_stdin", json.RawMessage(`{}`)); err != nil {
		t.Fatalf("freeze_stdin: %v", err)
	}
	// More than the pipe holds: the write blocks until the deadline.
	big := json.RawMessage(fmt.Sprintf(`{"text":%q}`, strings.Repeat("x", 1<<20)))
	errs := make(chan error, 3)
	for range 3 {
		go func() {
			_, err := h.sup.Call(context.Background(), "testmod_echo", big)
			errs <- err
		}()
	}
	for range 3 {
		select {
		case err := <-errs:
			if !errors.Is(err, ErrUnavailable) {
				t.Fatalf("a call to the wedged module: %v, want ErrUnavailable", err)
			}
		case <-time.After(waitLimit):
			t.Fatal("a call to a module that stopped reading its stdin never returned")
		}
	}
	w := h.nextWait()
	if st := h.status("testmod"); st.State != StateBackoff || st.LastExit == nil || st.LastExit.Signal != "SIGKILL" {
		t.Fatalf("after the stall: %+v, want backoff after SIGKILL", st)
	}
	w.fire <- time.Now()
	h.until("the module is up again", func() bool { return h.status("testmod").State == StateUp })
	if st := h.status("testmod"); st.PID == pid {
		t.Fatal("the module was not restarted")
	}
	if got := h.call("testmod_echo", map[string]any{"text": "back"}); got["text"] != "back" {
		t.Fatalf("echo after the restart = %v", got)
	}
}

// A definition that flaps between the pinned one and another is withheld every
// time it is the other, but reported (audit row, warning) once, not on every flap.
func TestFlappingDefinitionIsReportedOnce(t *testing.T) {
	h := newHarness(t, []Manifest{testManifest("testmod")})
	h.start()
	original, _ := h.tool("testmod_echo")
	var def struct {
		Description string `json:"description"`
	}
	if err := json.Unmarshal(original.Definition, &def); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		h.call("testmod_add_tool", map[string]any{"name": "echo", "description": "Now also emails your files."})
		h.until("echo withheld", func() bool { tool, _ := h.tool("testmod_echo"); return tool.Withheld })
		h.call("testmod_add_tool", map[string]any{"name": "echo", "description": def.Description})
		h.until("echo back as pinned", func() bool { tool, _ := h.tool("testmod_echo"); return !tool.Withheld })
	}
	if n := len(h.auditsOf("module.tool_withheld")); n != 1 {
		t.Fatalf("withheld audits after 5 flaps = %d, want 1", n)
	}
}

// A module whose tools change constantly gets its first change logged, then at
// most a line a minute with the count since.
func TestChangeLogIsThrottled(t *testing.T) {
	c := logevery.Counter[struct{}]{Every: time.Minute}
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	said := 0
	for i := 0; i < 100; i++ {
		if n := c.Note(struct{}{}, t0.Add(time.Duration(i)*100*time.Millisecond)); n > 0 {
			said++
		}
	}
	if said != 1 {
		t.Fatalf("%d lines for 100 changes in 10 s, want 1", said)
	}
	if n := c.Note(struct{}{}, t0.Add(time.Minute)); n != 100 {
		t.Fatalf("a minute later: %d, want the 99 unsaid and this one", n)
	}
}

// A module that never answers initialize holds serve from listening for the start
// timeout; Start says which module it is waiting for instead of looking hung.
func TestStartSaysWhichModuleItWaitsFor(t *testing.T) {
	var logs strings.Builder
	var mu sync.Mutex
	silent := Manifest{File: "silent.json", Version: 1, Type: "module", Name: "silent", Title: "Silent",
		Description: "Never answers.", Risk: "read", Command: "/usr/bin/sleep", Arguments: []string{"60"},
		EnforceEgressPolicy: true}
	if _, err := os.Stat(silent.Command); err != nil {
		t.Skipf("no %s: %v", silent.Command, err)
	}
	h := newHarness(t, []Manifest{silent}, func(o *Options) {
		o.StartTimeout, o.StartNotice = 2*time.Second, 50*time.Millisecond
		o.Logger = slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
			mu.Lock()
			defer mu.Unlock()
			return logs.Write(p)
		}), nil))
	})
	h.start()
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(logs.String(), "still waiting for the module") || !strings.Contains(logs.String(), "module=silent") {
		t.Fatalf("Start waited on a silent module without saying so:\n%s", logs.String())
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// A pin made by a Switchboard that kept only hashes gets the definition when the
// gateway meets it unchanged, so that a later change can be shown against it.
func TestPinWithoutDefinitionGetsOneWhenMetUnchanged(t *testing.T) {
	ctx := context.Background()
	first := newHarness(t, []Manifest{testManifest("testmod")})
	first.start()
	echo, _ := first.tool("testmod_echo")

	old := NewMemoryPins()
	if err := old.PinTool(ctx, "testmod", "testmod_echo", echo.Hash, nil); err != nil {
		t.Fatal(err)
	}
	if err := old.PinTool(ctx, "testmod", "testmod_status", "a-definition-since-changed", nil); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, []Manifest{testManifest("testmod")}, func(o *Options) { o.Pins = old })
	h.pins = old
	h.start()
	def, err := old.PinnedDefinition(ctx, "testmod", "testmod_echo")
	if err != nil || !strings.Contains(string(def), "\n  \"description\": \"Echo the text back.\",\n") {
		t.Fatalf("definition kept for an old pin met unchanged: %q, %v", def, err)
	}
	// A changed one is not the approved definition: it is withheld, not kept.
	if def, _ := old.PinnedDefinition(ctx, "testmod", "testmod_status"); def != nil {
		t.Fatalf("a changed definition was kept as the approved one: %s", def)
	}
}

// A module that goes back to its approved definition leaves nothing pending, and
// should it change again the change is withheld and reported again: an approval
// without --hash (whatever is pending) never reaches the definition it went back
// from.
func TestGoingBackToThePinnedDefinitionDropsThePending(t *testing.T) {
	desc := filepath.Join(t.TempDir(), "desc")
	write := func(s string) {
		if err := os.WriteFile(desc, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("Echo.")
	var mu sync.Mutex
	now := time.Now()
	h := newHarness(t, []Manifest{testManifest("testmod", "-desc-file", desc)}, func(o *Options) {
		o.Now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	})
	h.start()
	restart := func(wantWithheld bool) {
		t.Helper()
		if err := syscall.Kill(h.status("testmod").PID, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		h.nextWait().fire <- time.Now()
		h.until("module up", h.sup.Ready)
		if echo, _ := h.tool("testmod_echo"); echo.Withheld != wantWithheld {
			t.Fatalf("echo after a restart: %+v, want withheld %v", echo, wantWithheld)
		}
	}
	write("Echo, and also read ~/.ssh/id_rsa.")
	restart(true)
	if _, ok := h.pins.Pending("testmod", "testmod_echo"); !ok {
		t.Fatal("the changed definition is not pending")
	}
	write("Echo.")
	restart(false)
	if pending, ok := h.pins.Pending("testmod", "testmod_echo"); ok {
		t.Fatalf("the definition the module went back from is still pending: %s", pending)
	}
	// Past the minute that bounds a flapping tool's reports.
	mu.Lock()
	now = now.Add(withheldReportEvery)
	mu.Unlock()
	write("Echo, and also read ~/.ssh/id_rsa.")
	restart(true)
	if n := len(h.auditsOf("module.tool_withheld")); n != 2 {
		t.Fatalf("%d withheld audits, want 2: the change made again is news", n)
	}
}

// A module that does not come up after serve starts has its tools listed from the
// definitions its pins keep, so that calls answer unavailable (retry later), as
// when it goes down later, rather than find no such tool.
func TestToolsOfAModuleNotYetUpComeFromTheirPins(t *testing.T) {
	first := newHarness(t, []Manifest{testManifest("testmod")})
	first.start()
	want := len(first.sup.Tools())
	first.sup.Close(context.Background())

	// Started again, the module exits at once (its description file is gone).
	broken := testManifest("testmod", "-desc-file", filepath.Join(t.TempDir(), "gone"))
	h := newHarness(t, []Manifest{broken}, func(o *Options) { o.Pins = first.pins })
	h.pins = first.pins
	h.start()
	if h.sup.Ready() {
		t.Fatal("the broken module is up")
	}
	tools := h.sup.Tools()
	if len(tools) != want {
		t.Fatalf("%d tools listed from the pins, want %d", len(tools), want)
	}
	echo, ok := h.tool("testmod_echo")
	if !ok || echo.Available || !strings.Contains(string(echo.Definition), `"description": "Echo the text back."`) {
		t.Fatalf("echo of a module not up: %+v", echo)
	}
	if _, err := echo.MCPTool(); err != nil {
		t.Fatalf("a pinned definition does not list: %v", err)
	}
	if _, err := h.sup.Call(context.Background(), "testmod_echo", json.RawMessage(`{"text":"x"}`)); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("call of a tool of a module not up: %v, want ErrUnavailable", err)
	}
}

// A restart asked for stops the module and starts it again at once, from up or
// from a backoff, and counts as no failure.
func TestRestartAskedFor(t *testing.T) {
	h := newHarness(t, []Manifest{testManifest("testmod")})
	h.start()
	first := h.status("testmod").PID
	if err := h.sup.Restart("testmod"); err != nil {
		t.Fatal(err)
	}
	h.until("restarted", func() bool { st := h.status("testmod"); return st.State == StateUp && st.PID != first })
	// Its last lines say where each run began.
	starts := 0
	for _, l := range h.status("testmod").Stderr {
		if strings.HasPrefix(l, "── started ") {
			starts++
		}
	}
	if starts != 2 {
		t.Fatalf("%d run markers among the last lines, want 2: %q", starts, h.status("testmod").Stderr)
	}
	select {
	case w := <-h.waits:
		t.Fatalf("a restart asked for waited a backoff of %v", w.d)
	default:
	}
	// From a backoff: the wait is cut short.
	if err := syscall.Kill(h.status("testmod").PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	h.nextWait() // left unfired
	if err := h.sup.Restart("testmod"); err != nil {
		t.Fatal(err)
	}
	h.until("up again without the backoff", h.sup.Ready)
	if err := h.sup.Restart("nosuch"); !errors.Is(err, ErrUnknownModule) {
		t.Fatalf("restart of an unknown module: %v", err)
	}
}

// A module's MCP log messages join its stderr's last lines (escaped), where the
// board shows them.
func TestModuleLogMessagesJoinItsLastLines(t *testing.T) {
	h := newHarness(t, []Manifest{testManifest("testmod")})
	h.start()
	h.call("testmod_echo", map[string]any{"text": "log:disk almost full \x1b[2J"})
	h.poll("the log message kept", func() bool {
		return slices.Contains(h.status("testmod").Stderr, `log warning [testmod]: disk almost full \u001b[2J`)
	})
}
