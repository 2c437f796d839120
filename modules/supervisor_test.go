package modules

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
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
