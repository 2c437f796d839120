package modules

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/internal/logevery"
)

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
