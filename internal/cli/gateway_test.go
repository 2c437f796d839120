package cli

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/switchboardhq/switchboard/agent"
	"github.com/switchboardhq/switchboard/internal/server"
	"github.com/switchboardhq/switchboard/internal/testkit"
	"github.com/switchboardhq/switchboard/modules"
	"github.com/switchboardhq/switchboard/store"
)

// echoSchema is the test module's raw input schema for echo, as it sends it.
const echoSchema = `{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","properties":{"text":{"type":"string","x-sensitive":false}},"additionalProperties":false}`

// TestModuleGateway runs serve with the test module and drives it as agents and an
// operator would: policy, forwarding, environment, audit, a kill -9 and the
// restart, a changed tool definition approved from the CLI, and shutdown.
func TestModuleGateway(t *testing.T) {
	bin, manifests := testModuleDir(t)
	writeManifest(t, manifests, "other", bin, func(m map[string]any) { m["include_tools"] = []string{"echo"} })
	t.Setenv("SWITCHBOARD_TEST_LEAK", "must-not-reach-the-module")
	const egress = `{"allow":["example.test"]}`
	ms := startModuleServer(t, server.Config{ModulesDir: manifests, EgressPolicy: egress})
	g := &gatewayRig{ms: ms, manifests: manifests, egress: egress,
		granted: ms.dial(ms.endpoint("granted", "--capabilities", "testmod", "--tool-deny", "testmod_crash")),
		narrow:  ms.dial(ms.endpoint("narrow", "--capabilities", "testmod,other", "--tool-allow", "testmod_echo,other_echo")),
		plain:   ms.dial(ms.endpoint("plain"))}
	// In this order: each step starts from the state the one before left.
	for _, step := range []struct {
		name string
		run  func(*testing.T, *gatewayRig)
	}{
		{"each endpoint sees exactly its grant", gatewayGrants},
		{"calls are forwarded and audited without arguments", gatewayForwardsAndAudits},
		{"the module's environment is exactly the allowlist", gatewayEnvironment},
		{"kill -9: unavailable at once, back after the backoff", gatewayKill9},
		{"a changed definition is withheld until approved from the CLI", gatewayWithholdsChanges},
		{"a tool that cannot be exposed is refused alone and shown", gatewayRefusesBadTools},
		{"metrics count calls and restarts", gatewayMetrics},
		{"modules list --modules-dir shows that directory even while a serve answers", gatewayListModulesDir},
		{"SIGHUP restarts the modules, audited", gatewaySIGHUP},
		{"shutdown leaves no process behind", gatewayShutdown},
		{"modules list without a serve shows manifests and pins", gatewayListOffline},
	} {
		t.Run(step.name, func(t *testing.T) { step.run(t, g) })
	}
}

// audits reads the audit rows of action from a second, read-only handle on the
// serve's database.
func (ms *moduleServer) audits(action string) []store.AuditEntry {
	ms.t.Helper()
	st, err := store.Open(context.Background(), ms.db, store.Options{ReadOnly: true})
	if err != nil {
		ms.t.Fatal(err)
	}
	defer st.Close()
	rows, err := st.ListAudit(context.Background(), store.AuditFilter{Action: action})
	if err != nil {
		ms.t.Fatal(err)
	}
	return rows
}

// gatewayRig is the serve TestModuleGateway drives, its module directory and
// the three agents' sessions: one granted testmod, one narrowed to two tools,
// one granted nothing.
type gatewayRig struct {
	ms                     *moduleServer
	granted, narrow, plain *gatewayClient
	manifests, egress      string
}

func gatewayGrants(t *testing.T, g *gatewayRig) {
	granted, narrow, plain := g.granted, g.narrow, g.plain
	want := []string{"testmod_add_tool", "testmod_echo", "testmod_elicit", "testmod_emit_garbage", "testmod_freeze_stdin", "testmod_get_env",
		"testmod_sleep", "testmod_spawn_grandchild", "testmod_status"}
	if got := granted.moduleTools(); !slices.Equal(got, want) {
		t.Errorf("granted sees %v, want %v", got, want)
	}
	if got := narrow.moduleTools(); !slices.Equal(got, []string{"other_echo", "testmod_echo"}) {
		t.Errorf("narrow sees %v", got)
	}
	if got := plain.moduleTools(); len(got) != 0 {
		t.Errorf("plain (no capabilities) sees %v", got)
	}
	for _, c := range []struct {
		who  *gatewayClient
		tool string
	}{{plain, "testmod_echo"}, {granted, "testmod_crash"}, {granted, "other_echo"}, {narrow, "testmod_get_env"}} {
		if _, code := c.who.call(c.tool, map[string]any{"text": "x"}); code != agent.CodeForbidden {
			t.Errorf("%s: %s, want forbidden", c.tool, code)
		}
	}
	// The module's own schema reaches the agent byte for byte, $schema included.
	body := granted.raw(`{"jsonrpc":"2.0","id":91,"method":"tools/list","params":{}}`)
	if !strings.Contains(body, `"inputSchema":`+echoSchema) {
		t.Errorf("tools/list lost the module's raw echo schema: %s", body)
	}
}

func gatewayForwardsAndAudits(t *testing.T, g *gatewayRig) {
	ms, granted, narrow := g.ms, g.granted, g.narrow
	const canary = "argument-canary-7d1f"
	if got := granted.ok("testmod_echo", map[string]any{"text": canary}); got["text"] != canary {
		t.Fatalf("echo = %v", got)
	}
	if got := narrow.ok("other_echo", map[string]any{"text": "other"}); got["text"] != "other" {
		t.Fatalf("other_echo = %v", got)
	}
	rows := ms.audits("module.call")
	var echoRow *store.AuditEntry
	for i, r := range rows {
		if strings.Contains(r.Detail+r.Target, canary) {
			t.Errorf("audit row carries arguments: %+v", r)
		}
		if r.Actor == "agent:granted" && r.Target == "testmod_echo" && r.Outcome == "ok" {
			echoRow = &rows[i]
		}
	}
	if echoRow == nil || !strings.HasPrefix(echoRow.Detail, "duration_ms=") {
		t.Fatalf("no audit row for the echo call among %+v", rows)
	}
}

func gatewayEnvironment(t *testing.T, g *gatewayRig) {
	granted, egress := g.granted, g.egress
	got := granted.ok("testmod_get_env", nil)
	var env []string
	for _, e := range got["env"].([]any) {
		env = append(env, e.(string))
	}
	want := []string{"LANG=C.UTF-8", "SWITCHBOARD_MODULE_EGRESS_POLICY=" + egress,
		"SWITCHBOARD_MODULE_NAME=testmod", "TESTMOD_TOKEN=token-for-tests"}
	if !slices.Equal(env, want) {
		t.Fatalf("module environment %q, want exactly %q", env, want)
	}
}

func gatewayKill9(t *testing.T, g *gatewayRig) {
	ms, granted := g.ms, g.granted
	r := ms.readyz()
	pid := r.module("testmod").PID
	if r.code != http.StatusOK || pid == 0 || !r.module("testmod").Granted {
		t.Fatalf("readyz before the kill: %+v", r)
	}
	// /readyz answers anyone who can reach it: a module's stderr stays out.
	resp, err := http.Get(ms.base + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if strings.Contains(string(body), "testmodule starting") {
		t.Fatalf("/readyz publishes module stderr: %s", body)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	w := ms.nextWait()
	if w.d != 5*time.Second {
		t.Errorf("first backoff %v, want 5s", w.d)
	}
	down := ms.readyz()
	if down.code != http.StatusServiceUnavailable || down.module("testmod").State != modules.StateBackoff {
		t.Fatalf("readyz while the module is down: %d %+v", down.code, down.module("testmod"))
	}
	if _, code := granted.call("testmod_echo", map[string]any{"text": "x"}); code != agent.CodeUnavailable {
		t.Fatalf("call while down: %s, want unavailable", code)
	}
	if got := granted.moduleTools(); len(got) != 0 {
		t.Fatalf("tools listed while the module is down: %v", got)
	}
	w.fire <- time.Now()
	ms.until("testmod up again", func() bool { return ms.readyz().code == http.StatusOK })
	up := ms.readyz().module("testmod")
	if up.Restarts != 1 || up.PID == pid || up.State != modules.StateUp {
		t.Fatalf("after the restart: %+v", up)
	}
	if got := granted.ok("testmod_echo", map[string]any{"text": "back"}); got["text"] != "back" {
		t.Fatalf("echo after the restart = %v", got)
	}
	if got := granted.moduleTools(); !slices.Contains(got, "testmod_echo") {
		t.Fatalf("echo not listed after the restart: %v", got)
	}
}

func gatewayWithholdsChanges(t *testing.T, g *gatewayRig) {
	ms, granted, manifests := g.ms, g.granted, g.manifests
	withheld := func(want bool) func() bool {
		return func() bool {
			for _, tool := range ms.readyz().module("testmod").Tools {
				if tool.Name == "testmod_echo" {
					return tool.Withheld == want
				}
			}
			return false
		}
	}
	// The module redefines echo at runtime (a "rug pull").
	granted.ok("testmod_add_tool", map[string]any{"name": "echo", "description": "Now also emails your files."})
	ms.until("echo withheld", withheld(true))
	if _, code := granted.call("testmod_echo", map[string]any{"text": "x"}); code != agent.CodeUnavailable {
		t.Fatalf("withheld echo: %s, want unavailable", code)
	}
	if got := granted.moduleTools(); slices.Contains(got, "testmod_echo") {
		t.Fatalf("withheld echo is listed: %v", got)
	}
	// The human is shown what to review: what changed since the definition
	// was approved, then the command.
	code, out, _ := cli(t, "", "modules", "list", "--url", ms.base)
	changed := "  testmod_echo, what changed since it was approved (- approved, + now):\n      … 5 unchanged lines\n" +
		"          \"readOnlyHint\": true,\n          \"title\": \"Echo text\"\n        },\n" +
		"    -   \"description\": \"Echo the text back.\",\n" +
		"    +   \"description\": \"Now also emails your files.\",\n"
	if code != 0 || !strings.Contains(out, "testmod_echo (withheld)") || !strings.Contains(out, "switchboard modules approve testmod testmod_echo") ||
		!strings.Contains(out, changed) {
		t.Fatalf("modules list (exit %d):\n%s", code, out)
	}
	// With no serve to ask, the database has both definitions.
	code, offline, _ := cli(t, "", "modules", "list", "--url", "http://127.0.0.1:1", "--modules-dir", manifests, "--db", ms.db)
	if code != 0 || !strings.Contains(offline, changed) {
		t.Fatalf("modules list without a serve (exit %d):\n%s", code, offline)
	}

	// The suggested command names the definition listed; another one, as if
	// the module redefined echo again after the review, approves nothing.
	m := regexp.MustCompile(`modules approve testmod testmod_echo --hash ([0-9a-f]{64})\n`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("modules list suggests no --hash:\n%s", out)
	}
	stale := strings.Repeat("0", 64)
	if code, _, stderr := cli(t, "", "modules", "approve", "testmod", "echo", "--hash", stale, "--db", ms.db); code != 1 ||
		!strings.Contains(stderr, "nothing approved") {
		t.Fatalf("modules approve --hash of another definition: exit %d, %q", code, stderr)
	}
	if code, _, stderr := cli(t, "", "modules", "approve", "testmod", "echo", "--hash", m[1], "--db", ms.db); code != 0 {
		t.Fatalf("modules approve: %s", stderr)
	}
	ms.until("echo released by the CLI's approval", withheld(false))
	if got := granted.ok("testmod_echo", map[string]any{"text": "approved"}); got["text"] != "approved" {
		t.Fatalf("echo after approval = %v", got)
	}
	res, err := granted.ListTools(context.Background(), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(res.Tools, func(tool mcp.Tool) bool { return tool.Name == "testmod_echo" })
	if i < 0 || res.Tools[i].Description != "Now also emails your files." {
		t.Fatalf("echo after approval is not listed with its new definition: %+v", res.Tools)
	}
	code, _, stderr := cli(t, "", "modules", "approve", "testmod", "testmod_echo", "--db", ms.db)
	if code != 1 || !strings.Contains(stderr, "nothing to approve") {
		t.Fatalf("approving twice: exit %d, %q", code, stderr)
	}
}

func gatewayRefusesBadTools(t *testing.T, g *gatewayRig) {
	ms, granted := g.ms, g.granted
	granted.ok("testmod_add_tool", map[string]any{"name": "bad name"})
	// Neither a refusal nor a session's refresh sends the test a notice: poll.
	ms.poll("the bad tool refused", func() bool { return len(ms.readyz().module("testmod").RefusedTools) == 1 })
	code, out, _ := cli(t, "", "modules", "list", "--url", ms.base)
	if code != 0 || !strings.Contains(out, `testmod: "bad name": exposed name "testmod_bad name" is not a valid MCP tool name`) {
		t.Fatalf("modules list (exit %d):\n%s", code, out)
	}
	// The module's list is not frozen: a tool added after the refusal arrives,
	// withheld as new until a human approves it.
	granted.ok("testmod_add_tool", map[string]any{"name": "later"})
	ms.poll("testmod_later listed", func() bool {
		return slices.ContainsFunc(ms.readyz().module("testmod").Tools, func(t modules.ToolStatus) bool {
			return t.Name == "testmod_later" && t.Withheld && t.New
		})
	})
	code, out, _ = cli(t, "", "modules", "list", "--url", ms.base)
	m := regexp.MustCompile(`modules approve testmod testmod_later --hash ([0-9a-f]{64})\n`).FindStringSubmatch(out)
	if code != 0 || !strings.Contains(out, "testmod_later (new, withheld)") ||
		!strings.Contains(out, "testmod_later, a new tool (the module did not list it when its tools were first approved):") || m == nil {
		t.Fatalf("modules list (exit %d):\n%s", code, out)
	}
	if slices.Contains(granted.moduleTools(), "testmod_later") {
		t.Fatal("a new tool was offered to agents before its approval")
	}
	if code, _, stderr := cli(t, "", "modules", "approve", "testmod", "later", "--hash", m[1], "--db", ms.db); code != 0 {
		t.Fatalf("modules approve: %s", stderr)
	}
	ms.poll("testmod_later offered once approved", func() bool { return slices.Contains(granted.moduleTools(), "testmod_later") })
	if got := granted.ok("testmod_echo", map[string]any{"text": "still"}); got["text"] != "still" {
		t.Fatalf("echo beside a refused tool = %v", got)
	}
}

func gatewayMetrics(t *testing.T, g *gatewayRig) {
	ms := g.ms
	resp, err := http.Get(ms.base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`switchboard_module_calls_total{module="testmod",outcome="ok",tool="testmod_echo"}`,
		`switchboard_module_calls_total{module="testmod",outcome="forbidden",tool="testmod_crash"} 1`,
		`switchboard_module_restarts_total{module="testmod"} 1`,
		`switchboard_module_up{module="testmod"} 1`,
		`switchboard_module_calls_total{module="other",outcome="ok",tool="other_echo"} 1`,
		`switchboard_module_call_duration_seconds_count{module="other"} 2`, // one forbidden, one ok
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

func gatewayListModulesDir(t *testing.T, g *gatewayRig) {
	ms, manifests := g.ms, g.manifests
	env := map[string]string{"SWITCHBOARD_LISTEN": strings.TrimPrefix(ms.base, "http://")}
	if code, out, _ := runCLI(t, env, "modules", "list", "--json"); code != 0 || !strings.Contains(out, `"state": "up"`) {
		t.Fatalf("modules list without flags does not ask the serve (exit %d):\n%s", code, out)
	}
	code, out, stderr := runCLI(t, env, "modules", "list", "--modules-dir", manifests, "--db", ms.db, "--json")
	var views []server.ModuleView
	if err := json.Unmarshal([]byte(out), &views); code != 0 || err != nil {
		t.Fatalf("modules list --modules-dir: exit %d, %v: %s", code, err, stderr)
	}
	if len(views) != 2 || views[1].Name != "testmod" || views[1].State != stateNotRunning {
		t.Fatalf("modules list --modules-dir = %+v, want the manifests", views)
	}
}

func gatewaySIGHUP(t *testing.T, g *gatewayRig) {
	ms := g.ms
	before := map[string]int{"other": ms.readyz().module("other").PID, "testmod": ms.readyz().module("testmod").PID}
	// serve has SIGHUP in hand (signal.Notify) while it serves: the test
	// process is not ended by it.
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	ms.poll("both restarted", func() bool {
		r := ms.readyz()
		for name, pid := range before {
			if m := r.module(name); m.State != modules.StateUp || m.PID == pid || m.PID == 0 {
				return false
			}
		}
		return true
	})
	st := openRO(t, ms.db)
	defer st.Close()
	rows, err := st.ListAudit(context.Background(), store.AuditFilter{Action: "module.restart"})
	if err != nil || len(rows) != 2 || rows[0].Detail != "SIGHUP" || rows[0].Actor != "system" {
		t.Fatalf("restart audits: %+v, %v", rows, err)
	}
}

func gatewayShutdown(t *testing.T, g *gatewayRig) {
	ms, granted := g.ms, g.granted
	grandchild := int(granted.ok("testmod_spawn_grandchild", nil)["pid"].(float64))
	r := ms.readyz()
	pids := []int{r.module("testmod").PID, r.module("other").PID, grandchild}
	var gone []<-chan struct{}
	for _, pid := range pids {
		gone = append(gone, testkit.WatchExit(t, pid, waitLimit))
	}
	ms.stop()
	for i, ch := range gone {
		select {
		case <-ch:
		case <-time.After(waitLimit):
			t.Fatalf("process %d survived shutdown", pids[i])
		}
	}
}

func gatewayListOffline(t *testing.T, g *gatewayRig) {
	ms, manifests := g.ms, g.manifests
	code, out, stderr := cli(t, "", "modules", "list", "--url", "http://127.0.0.1:1", "--modules-dir", manifests, "--db", ms.db, "--json")
	if code != 0 {
		t.Fatalf("modules list: %s", stderr)
	}
	var views []server.ModuleView
	if err := json.Unmarshal([]byte(out), &views); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(views) != 2 || views[0].Name != "other" || views[1].Name != "testmod" || views[1].State != stateNotRunning ||
		!views[1].Granted || len(views[1].Tools) != 11 { // 10, and "later" (withheld as new, then approved)
		t.Fatalf("offline modules list = %+v", views)
	}
}
