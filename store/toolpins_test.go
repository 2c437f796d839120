package store

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/internal/testkit"
)

func TestToolPinsLifecycle(t *testing.T) {
	s := openTest(t, Options{})
	ctx := context.Background()

	if err := s.WithholdTool(ctx, "git", "git_log", "h2", nil); !errors.Is(err, ErrNotFound) {
		t.Fatalf("withhold an unpinned tool: %v, want ErrNotFound", err)
	}
	for _, p := range []struct{ module, tool, hash string }{
		{"git", "git_log", "h1"}, {"git", "git_diff", "d1"}, {"web", "web_fetch", "f1"},
	} {
		if err := s.PinTool(ctx, p.module, p.tool, p.hash, nil); err != nil {
			t.Fatal(err)
		}
	}
	pins, err := s.ToolPins(ctx, "git")
	if err != nil || len(pins) != 2 || pins["git_log"] != "h1" || pins["git_diff"] != "d1" {
		t.Fatalf("ToolPins(git) = %v, %v", pins, err)
	}
	if _, err := s.ApprovePendingTool(ctx, "git", "git_log", "", "human:cli"); !errors.Is(err, ErrConflict) {
		t.Fatalf("approve with nothing pending: %v, want ErrConflict", err)
	}
	if _, err := s.ApprovePendingTool(ctx, "git", "git_blame", "", "human:cli"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("approve an unknown tool: %v, want ErrNotFound", err)
	}

	// A changed definition is recorded as pending; the pin itself stays.
	if err := s.WithholdTool(ctx, "git", "git_log", "h2", nil); err != nil {
		t.Fatal(err)
	}
	if pins, _ := s.ToolPins(ctx, "git"); pins["git_log"] != "h1" {
		t.Fatalf("withholding moved the pin: %v", pins)
	}
	all, err := s.ListToolPins(ctx, "")
	if err != nil || len(all) != 3 {
		t.Fatalf("ListToolPins = %+v, %v", all, err)
	}
	if p := all[1]; p.Tool != "git_log" || p.PendingHash != "h2" || p.PendingAt == nil || p.Hash != "h1" {
		t.Fatalf("pending pin = %+v", p)
	}
	if only, _ := s.ListToolPins(ctx, "web"); len(only) != 1 || only[0].Tool != "web_fetch" || only[0].PendingHash != "" {
		t.Fatalf("ListToolPins(web) = %+v", only)
	}

	pin, err := s.ApprovePendingTool(ctx, "git", "git_log", "", "human:cli")
	if err != nil || pin.Hash != "h2" {
		t.Fatalf("approve: %+v, %v", pin, err)
	}
	if pins, _ := s.ToolPins(ctx, "git"); pins["git_log"] != "h2" {
		t.Fatalf("after approval the pin is %v, want h2", pins)
	}
	if list, _ := s.ListToolPins(ctx, "git"); list[1].PendingHash != "" || list[1].PendingAt != nil {
		t.Fatalf("pending left after approval: %+v", list[1])
	}
	audit, err := s.ListAudit(ctx, AuditFilter{Action: "module.tool_approved"})
	if err != nil || len(audit) != 1 || audit[0].Actor != "human:cli" || audit[0].Target != "git/git_log" {
		t.Fatalf("approval audit = %+v, %v", audit, err)
	}

	// Re-pinning (first sight after a reset, or an approval from the UI) clears
	// anything pending.
	s.WithholdTool(ctx, "git", "git_diff", "d2", nil)
	if err := s.PinTool(ctx, "git", "git_diff", "d2", nil); err != nil {
		t.Fatal(err)
	}
	if list, _ := s.ListToolPins(ctx, "git"); list[0].Hash != "d2" || list[0].PendingHash != "" {
		t.Fatalf("PinTool left %+v", list[0])
	}
}

func TestOnForeignCommitSeesAnotherHandle(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	path := testkit.DB(t)
	serveSide, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer serveSide.Close()
	if err := serveSide.PinTool(ctx, "git", "git_log", "h1", nil); err != nil {
		t.Fatal(err)
	}
	if err := serveSide.WithholdTool(ctx, "git", "git_log", "h2", nil); err != nil {
		t.Fatal(err)
	}
	seen := make(chan string, 16)
	serveSide.OnForeignCommit(func() {
		pins, err := serveSide.ToolPins(ctx, "git")
		if err == nil {
			select {
			case seen <- pins["git_log"]:
			default:
			}
		}
	})
	done := make(chan struct{})
	go func() { serveSide.WatchForeign(ctx, 5*time.Millisecond); close(done) }()

	// A second handle on the same file stands for `switchboard modules approve`.
	cli, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = cli.ApprovePendingTool(ctx, "git", "git_log", "", "human:cli")
	cli.Close()
	if err != nil {
		t.Fatal(err)
	}
	// The watcher may have read its starting data_version only after the approval
	// committed; a write of our own then moves data_version again, so keep nudging
	// until the hook has run over the approved pin.
	nudge := time.NewTicker(50 * time.Millisecond)
	defer nudge.Stop()
	limit := time.After(10 * time.Second)
	for {
		select {
		case h := <-seen:
			if h == "h2" {
				cancel()
				<-done
				return
			}
		case <-nudge.C:
			if err := serveSide.PinTool(ctx, "other", "other_x", "x", nil); err != nil {
				t.Fatal(err)
			}
		case <-limit:
			t.Fatal("OnForeignCommit never saw the approval made by another handle")
		}
	}
}

// An approval naming the definition the human reviewed pins nothing if the pending
// one is another: the module redefined the tool again after the review.
func TestApprovePendingToolNamedByHash(t *testing.T) {
	s := openTest(t, Options{})
	ctx := context.Background()
	pinned, reviewed, later := strings.Repeat("1", 64), strings.Repeat("2", 64), strings.Repeat("3", 60)+"abcd"
	if err := s.PinTool(ctx, "git", "git_log", pinned, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.WithholdTool(ctx, "git", "git_log", reviewed, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.WithholdTool(ctx, "git", "git_log", later, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ApprovePendingTool(ctx, "git", "git_log", reviewed, "human:cli"); !errors.Is(err, ErrStale) {
		t.Fatalf("approve the reviewed definition after it changed again: %v, want ErrStale", err)
	}
	if pins, _ := s.ToolPins(ctx, "git"); pins["git_log"] != pinned {
		t.Fatalf("a refused approval moved the pin to %q", pins["git_log"])
	}
	// 8 digits could be matched by a definition searched for; 16 is the least.
	for _, bad := range []string{later[:8], later[:15], later[:15] + "x", later + "00"} {
		if _, err := s.ApprovePendingTool(ctx, "git", "git_log", bad, "human:cli"); !errors.Is(err, ErrInvalid) {
			t.Fatalf("approve with hash %q: %v, want ErrInvalid", bad, err)
		}
	}
	pin, err := s.ApprovePendingTool(ctx, "git", "git_log", strings.ToUpper(later[:16]), "human:cli")
	if err != nil || pin.Hash != later {
		t.Fatalf("approve the current pending definition: %+v, %v", pin, err)
	}
}

// Pinning one definition (a human approving it on the board) leaves a newer one
// recorded as pending meanwhile pending: it still needs its own approval.
func TestPinKeepsANewerPendingDefinition(t *testing.T) {
	s := openTest(t, Options{})
	ctx := context.Background()
	if err := s.PinTool(ctx, "git", "git_log", "h1", nil); err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{"h2", "h3"} {
		if err := s.WithholdTool(ctx, "git", "git_log", h, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.PinTool(ctx, "git", "git_log", "h2", nil); err != nil {
		t.Fatal(err)
	}
	all, _ := s.ListToolPins(ctx, "git")
	if len(all) != 1 || all[0].Hash != "h2" || all[0].PendingHash != "h3" || all[0].PendingAt == nil {
		t.Fatalf("after pinning h2 with h3 pending: %+v", all)
	}
	if err := s.PinTool(ctx, "git", "git_log", "h3", nil); err != nil {
		t.Fatal(err)
	}
	if all, _ := s.ListToolPins(ctx, "git"); all[0].Hash != "h3" || all[0].PendingHash != "" || all[0].PendingAt != nil {
		t.Fatalf("after pinning the pending h3: %+v", all)
	}
}

func TestToolPinsKeepDefinitions(t *testing.T) {
	s := openTest(t, Options{})
	ctx := context.Background()
	v1, v2, v3 := []byte(`{"description": "one"}`), []byte(`{"description": "two"}`), []byte(`{"description": "three"}`)

	if def, err := s.PinnedDefinition(ctx, "git", "git_log"); def != nil || err != nil {
		t.Fatalf("definition of a tool never pinned: %q, %v", def, err)
	}
	if err := s.PinTool(ctx, "git", "git_log", "h1", v1); err != nil {
		t.Fatal(err)
	}
	if err := s.WithholdTool(ctx, "git", "git_log", "h2", v2); err != nil {
		t.Fatal(err)
	}
	if def, err := s.PinnedDefinition(ctx, "git", "git_log"); string(def) != string(v1) || err != nil {
		t.Fatalf("withholding changed the pinned definition: %q, %v", def, err)
	}
	// The CLI's approval pins the pending definition, kept with it.
	if _, err := s.ApprovePendingTool(ctx, "git", "git_log", "", "human:cli"); err != nil {
		t.Fatal(err)
	}
	if def, _ := s.PinnedDefinition(ctx, "git", "git_log"); string(def) != string(v2) {
		t.Fatalf("after the CLI's approval the pinned definition is %q, want %q", def, v2)
	}
	// The board's (the supervisor pins the hash it has now, with its definition).
	if err := s.WithholdTool(ctx, "git", "git_log", "h3", v3); err != nil {
		t.Fatal(err)
	}
	if err := s.PinTool(ctx, "git", "git_log", "h3", v3); err != nil {
		t.Fatal(err)
	}
	if def, _ := s.PinnedDefinition(ctx, "git", "git_log"); string(def) != string(v3) {
		t.Fatalf("after PinTool the pinned definition is %q, want %q", def, v3)
	}
	var pending sql.NullString
	if err := s.rdb.QueryRow(`SELECT pending_definition FROM tool_pins WHERE tool = 'git_log'`).Scan(&pending); err != nil || pending.Valid {
		t.Fatalf("pending definition left after its pin: %v, %v", pending, err)
	}
	// A pin without a definition (as a Switchboard before 0011 made) has none.
	if err := s.PinTool(ctx, "git", "git_diff", "d1", nil); err != nil {
		t.Fatal(err)
	}
	if def, err := s.PinnedDefinition(ctx, "git", "git_diff"); def != nil || err != nil {
		t.Fatalf("definition of a pin made without one: %q, %v", def, err)
	}
	// Met again unchanged, it gets one; met with another hash, or once it has
	// one, nothing changes.
	if err := s.MetAsPinned(ctx, "git", map[string]string{"git_diff": "d0"}, map[string][]byte{"git_diff": v2}); err != nil {
		t.Fatal(err)
	}
	if def, _ := s.PinnedDefinition(ctx, "git", "git_diff"); def != nil {
		t.Fatalf("a definition of another hash was kept: %q", def)
	}
	for _, def := range [][]byte{v1, v3} {
		if err := s.MetAsPinned(ctx, "git", map[string]string{"git_diff": "d1"}, map[string][]byte{"git_diff": def}); err != nil {
			t.Fatal(err)
		}
	}
	if def, _ := s.PinnedDefinition(ctx, "git", "git_diff"); string(def) != string(v1) {
		t.Fatalf("kept definition = %q, want the first, %q", def, v1)
	}
}

// A module that goes back to its approved definition leaves nothing pending: an
// approval without --hash, which takes whatever is pending, cannot then approve
// the definition it went back from.
func TestToolPinsMetAsPinnedDropsPending(t *testing.T) {
	s := openTest(t, Options{})
	ctx := context.Background()
	if err := s.PinTool(ctx, "pm", "pm_echo", "a", []byte(`"a"`)); err != nil {
		t.Fatal(err)
	}
	if err := s.WithholdTool(ctx, "pm", "pm_echo", "b", []byte(`"read ~/.ssh"`)); err != nil {
		t.Fatal(err)
	}
	if err := s.MetAsPinned(ctx, "pm", map[string]string{"pm_echo": "a"}, map[string][]byte{"pm_echo": []byte(`"a"`)}); err != nil {
		t.Fatal(err)
	}
	list, err := s.ListToolPins(ctx, "pm")
	if err != nil || len(list) != 1 || list[0].PendingHash != "" || list[0].PendingDefinition != nil || list[0].PendingAt != nil {
		t.Fatalf("pins after the module went back: %+v, %v", list, err)
	}
	if _, err := s.ApprovePendingTool(ctx, "pm", "pm_echo", "", "human:cli"); !errors.Is(err, ErrConflict) {
		t.Fatalf("approve after the module went back: %v, want ErrConflict (nothing pending)", err)
	}
	// Met with another hash than the pin's, a pending definition stays.
	if err := s.WithholdTool(ctx, "pm", "pm_echo", "b", nil); err != nil {
		t.Fatal(err)
	}
	if err := s.MetAsPinned(ctx, "pm", map[string]string{"pm_echo": "c"}, nil); err != nil {
		t.Fatal(err)
	}
	if list, _ := s.ListToolPins(ctx, "pm"); list[0].PendingHash != "b" {
		t.Fatalf("a pending definition was dropped by a listing of another: %+v", list[0])
	}
}

// A tool the module did not list when its tools were first pinned is pinned with
// no approved hash and its own pending, until a human approves it.
func TestWithholdNewTool(t *testing.T) {
	s := openTest(t, Options{})
	ctx := context.Background()
	if err := s.WithholdNewTool(ctx, "pm", "pm_delete_everything", "n1", []byte(`{"name":"pm_delete_everything"}`)); err != nil {
		t.Fatal(err)
	}
	if pins, _ := s.ToolPins(ctx, "pm"); pins["pm_delete_everything"] != "" || len(pins) != 1 {
		t.Fatalf("pins of a new tool: %v, want it with no approved hash", pins)
	}
	list, _ := s.ListToolPins(ctx, "pm")
	if list[0].PendingHash != "n1" || string(list[0].PendingDefinition) != `{"name":"pm_delete_everything"}` || list[0].Definition != nil {
		t.Fatalf("new tool's pin: %+v", list[0])
	}
	if _, err := s.ApprovePendingTool(ctx, "pm", "pm_delete_everything", "", "human:cli"); err != nil {
		t.Fatal(err)
	}
	if pins, _ := s.ToolPins(ctx, "pm"); pins["pm_delete_everything"] != "n1" {
		t.Fatalf("after approval: %v", pins)
	}
	if rows, _ := s.ListAudit(ctx, AuditFilter{Action: "module.tool_approved"}); len(rows) != 1 || !strings.Contains(rows[0].Detail, "a new tool") {
		t.Fatalf("approval audit: %+v", rows)
	}
	// Once approved it is no longer new: withholding it as new changes nothing.
	if err := s.WithholdNewTool(ctx, "pm", "pm_delete_everything", "n2", nil); err != nil {
		t.Fatal(err)
	}
	if list, _ := s.ListToolPins(ctx, "pm"); list[0].Hash != "n1" || list[0].PendingHash != "" {
		t.Fatalf("an approved tool withheld as new: %+v", list[0])
	}
}

// PinnedDefinitions lists the approved pins that keep a definition.
func TestPinnedDefinitions(t *testing.T) {
	s := openTest(t, Options{})
	ctx := context.Background()
	s.PinTool(ctx, "pm", "pm_a", "a", []byte(`{"name":"pm_a"}`))
	s.PinTool(ctx, "pm", "pm_b", "b", nil)                                // kept only its hash
	s.WithholdNewTool(ctx, "pm", "pm_c", "c", []byte(`{"name":"pm_c"}`))  // never approved
	s.PinTool(ctx, "other", "other_a", "a", []byte(`{"name":"other_a"}`)) // another module
	defs, err := s.PinnedDefinitions(ctx, "pm")
	if err != nil || len(defs) != 1 || string(defs["pm_a"]) != `{"name":"pm_a"}` {
		t.Fatalf("PinnedDefinitions = %q, %v", defs, err)
	}
}
