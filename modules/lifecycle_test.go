package modules

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/internal/testkit"
)

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
