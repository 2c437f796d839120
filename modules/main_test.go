package modules

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/internal/testkit"
)

// testModuleBin is the test module, built once (testkit keeps it for every
// package whose tests run it).
var testModuleBin string

func TestMain(m *testing.M) {
	bin, err := testkit.BuildTestModule()
	if err != nil {
		fmt.Fprintln(os.Stderr, "build test module:", err)
		os.Exit(1)
	}
	testModuleBin = bin
	os.Exit(m.Run())
}

// waitLimit only bounds how long a broken test hangs; nothing asserts on it.
const waitLimit = 60 * time.Second

const testToken = "token-value-for-tests"

func testManifest(name string, args ...string) Manifest {
	return Manifest{
		File: name + ".json", Version: 1, Type: "module", Name: name,
		Title: "Test module", Description: "Tools for the supervisor tests.", Risk: "read",
		Command: testModuleBin, Arguments: args,
		Environment: []string{"TESTMOD_TOKEN"}, EnforceEgressPolicy: true,
	}
}

func testLookup(name string) (string, bool) {
	if name == "TESTMOD_TOKEN" {
		return testToken, true
	}
	return os.LookupEnv(name)
}

// backoffWait is one call of Options.After: the test decides when it fires.
type backoffWait struct {
	d    time.Duration
	fire chan time.Time
}

type auditEvent struct{ action, target, detail string }

// harness runs a Supervisor whose backoff waits and change notifications
// are channels the test reads, so no test sleeps.
type harness struct {
	t       *testing.T
	sup     *Supervisor
	pins    *MemoryPins
	changes chan string
	waits   chan backoffWait

	mu     sync.Mutex
	audits []auditEvent
}

func newHarness(t *testing.T, mans []Manifest, edit ...func(*Options)) *harness {
	t.Helper()
	h := &harness{
		t: t, pins: NewMemoryPins(),
		changes: make(chan string, 1024),
		waits:   make(chan backoffWait, 16),
	}
	logger := slog.New(slog.DiscardHandler)
	if testing.Verbose() {
		logger = slog.Default()
	}
	opts := Options{
		Manifests:    mans,
		Logger:       logger,
		LookupEnv:    testLookup,
		EgressPolicy: `{"allow":["example.test"]}`,
		Pins:         h.pins,
		StopGrace:    5 * time.Second,
		RelistGap:    10 * time.Millisecond,
		Audit: func(action, target, detail string) {
			h.mu.Lock()
			h.audits = append(h.audits, auditEvent{action, target, detail})
			h.mu.Unlock()
		},
		OnChange: func(module string) {
			select {
			case h.changes <- module:
			default:
			}
		},
		After: func(d time.Duration) <-chan time.Time {
			w := backoffWait{d: d, fire: make(chan time.Time, 1)}
			h.waits <- w
			return w.fire
		},
	}
	for _, e := range edit {
		e(&opts)
	}
	h.sup = New(opts)
	return h
}

func (h *harness) start() {
	h.t.Helper()
	if err := h.sup.Start(context.Background()); err != nil {
		h.t.Fatalf("Start: %v", err)
	}
	h.t.Cleanup(func() { _ = h.sup.Close(context.Background()) })
}

// nextWait returns the next backoff the supervisor waits on.
func (h *harness) nextWait() backoffWait {
	h.t.Helper()
	select {
	case w := <-h.waits:
		return w
	case <-time.After(waitLimit):
		h.t.Fatalf("no backoff wait; status: %+v", h.sup.Status())
		return backoffWait{}
	}
}

// until waits for cond, re-checking it after every change notification.
func (h *harness) until(what string, cond func() bool) {
	h.t.Helper()
	limit := time.After(waitLimit)
	for !cond() {
		select {
		case <-h.changes:
		case <-limit:
			h.t.Fatalf("timed out waiting for %s; status: %+v", what, h.sup.Status())
		}
	}
}

// poll waits for cond by checking it every 10 ms, for what no change notice
// announces.
func (h *harness) poll(what string, cond func() bool) {
	h.t.Helper()
	for deadline := time.Now().Add(waitLimit); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			h.t.Fatalf("timed out waiting for %s; status: %+v", what, h.sup.Status())
		}
	}
}

func (h *harness) status(name string) ModuleStatus {
	h.t.Helper()
	for _, st := range h.sup.Status() {
		if st.Name == name {
			return st
		}
	}
	h.t.Fatalf("no status for %s", name)
	return ModuleStatus{}
}

func (h *harness) tool(name string) (Tool, bool) {
	for _, t := range h.sup.Tools() {
		if t.Name == name {
			return t, true
		}
	}
	return Tool{}, false
}

func (h *harness) auditsOf(action string) []auditEvent {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []auditEvent
	for _, a := range h.audits {
		if a.action == action {
			out = append(out, a)
		}
	}
	return out
}

// call invokes a tool and decodes the structuredContent of its result.
func (h *harness) call(tool string, args any) map[string]any {
	h.t.Helper()
	raw, err := h.sup.Call(context.Background(), tool, mustJSON(h.t, args))
	if err != nil {
		h.t.Fatalf("Call %s: %v", tool, err)
	}
	var res struct {
		IsError    bool           `json:"isError"`
		Structured map[string]any `json:"structuredContent"`
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		h.t.Fatalf("Call %s: result %s: %v", tool, raw, err)
	}
	if res.IsError {
		h.t.Fatalf("Call %s: tool error %s", tool, raw)
	}
	return res.Structured
}

func mustJSON(t *testing.T, v any) json.RawMessage {
	t.Helper()
	if v == nil {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// processGone reports whether pid no longer runs: absent from /proc, or a
// zombie waiting for a reaper that is not ours (its code can no longer run).
func processGone(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if errors.Is(err, os.ErrNotExist) {
		return true
	}
	if err != nil {
		return false
	}
	// The state follows the parenthesised command name.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && (s[i+2] == 'Z' || s[i+2] == 'X')
}
