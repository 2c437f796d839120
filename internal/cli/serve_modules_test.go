package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/switchboardhq/switchboard/agent"
	"github.com/switchboardhq/switchboard/internal/mcpclient"
	"github.com/switchboardhq/switchboard/internal/server"
	"github.com/switchboardhq/switchboard/internal/testkit"
	"github.com/switchboardhq/switchboard/modules"
	"github.com/switchboardhq/switchboard/store"
)

// waitLimit only bounds how long a broken build hangs; nothing asserts on time.
const waitLimit = 60 * time.Second

// testModuleDir builds the test module and writes its manifest ("testmod") into a
// fresh manifests directory, with the token it needs set; it returns both paths.
func testModuleDir(t *testing.T) (bin, manifests string) {
	t.Helper()
	dir := t.TempDir()
	bin = buildTestModule(t, dir)
	manifests = filepath.Join(dir, "manifests")
	if err := os.Mkdir(manifests, 0o755); err != nil {
		t.Fatal(err)
	}
	writeManifest(t, manifests, "testmod", bin, nil)
	t.Setenv("TESTMOD_TOKEN", "token-for-tests")
	return bin, manifests
}

// buildTestModule builds the modules package's stdio test module into dir.
func buildTestModule(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "testmodule")
	build := exec.Command("go", "build", "-o", bin, "../../modules/testdata/testmodule")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build test module: %v\n%s", err, out)
	}
	// go build honours the umask; the manifest contract refuses group-writable files.
	if err := os.Chmod(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}

// writeManifest writes a module manifest: the fields of a valid one, edited.
func writeManifest(t *testing.T, dir, name, command string, edit func(map[string]any)) string {
	t.Helper()
	m := map[string]any{
		"version": 1, "type": "module", "name": name, "title": "Test module " + name,
		"description": "Tools for the gateway tests.", "risk": "read", "command": command,
		"environment": []string{"TESTMOD_TOKEN"}, "enforce_egress_policy": true,
	}
	if edit != nil {
		edit(m)
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	file := name + ".json"
	if err := os.WriteFile(filepath.Join(dir, file), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

// backoffWait is one restart backoff the supervisor waits out; the test fires it.
type backoffWait struct {
	d    time.Duration
	fire chan time.Time
}

// moduleServer is a serve with capability modules over real HTTP.
type moduleServer struct {
	t       *testing.T
	base    string
	db      string
	stop    func()
	waits   chan backoffWait
	changes chan string
}

func startModuleServer(t *testing.T, cfg server.Config, tweak ...func(*modules.Options)) *moduleServer {
	t.Helper()
	ms := &moduleServer{t: t, db: filepath.Join(t.TempDir(), "sb.db"),
		waits: make(chan backoffWait, 16), changes: make(chan string, 1024)}
	cfg.DB = ms.db
	cfg.TweakModules = func(o *modules.Options) {
		served := o.OnChange
		o.OnChange = func(m string) {
			served(m)
			select {
			case ms.changes <- m:
			default:
			}
		}
		o.After = func(d time.Duration) <-chan time.Time {
			w := backoffWait{d: d, fire: make(chan time.Time, 1)}
			ms.waits <- w
			return w.fire
		}
		o.StopGrace = 5 * time.Second
		for _, f := range tweak {
			f(o)
		}
	}
	ms.base, ms.stop = startServer(t, cfg)
	return ms
}

type readiness struct {
	code    int
	Ready   bool                `json:"ready"`
	Modules []server.ModuleView `json:"modules"`
}

func (ms *moduleServer) readyz() readiness {
	ms.t.Helper()
	resp, err := http.Get(ms.base + "/readyz")
	if err != nil {
		ms.t.Fatal(err)
	}
	defer resp.Body.Close()
	var r readiness
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		ms.t.Fatal(err)
	}
	r.code = resp.StatusCode
	return r
}

func (r readiness) module(name string) server.ModuleView {
	for _, m := range r.Modules {
		if m.Name == name {
			return m
		}
	}
	return server.ModuleView{}
}

// until waits for cond, checking again after every module change.
func (ms *moduleServer) until(what string, cond func() bool) {
	ms.t.Helper()
	limit := time.After(waitLimit)
	for !cond() {
		select {
		case <-ms.changes:
		case <-limit:
			ms.t.Fatalf("timed out waiting for %s; readyz: %+v", what, ms.readyz())
		}
	}
}

// poll waits for cond by checking it every 10 ms, for what no change notice
// announces.
func (ms *moduleServer) poll(what string, cond func() bool) {
	ms.t.Helper()
	for deadline := time.Now().Add(waitLimit); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			ms.t.Fatalf("timed out waiting for %s; readyz: %+v", what, ms.readyz())
		}
	}
}

func (ms *moduleServer) nextWait() backoffWait {
	ms.t.Helper()
	select {
	case w := <-ms.waits:
		return w
	case <-time.After(waitLimit):
		ms.t.Fatalf("the module never went into backoff; readyz: %+v", ms.readyz())
		return backoffWait{}
	}
}

// endpoint creates an endpoint through the CLI (a second handle on the database,
// as an operator would) and returns its credential.
func (ms *moduleServer) endpoint(agentID string, flags ...string) string {
	ms.t.Helper()
	args := append([]string{"endpoint", "create", "--db", ms.db, "--agent", agentID, "--queues", "q", "--json"}, flags...)
	code, out, stderr := cli(ms.t, "", args...)
	if code != 0 {
		ms.t.Fatalf("endpoint create: %s", stderr)
	}
	var created struct {
		Credential string `json:"credential"`
	}
	if err := json.Unmarshal([]byte(out), &created); err != nil {
		ms.t.Fatal(err)
	}
	return created.Credential
}

type gatewayClient struct {
	*client.Client
	t     *testing.T
	ms    *moduleServer
	cred  string
	notes chan mcp.JSONRPCNotification
}

func (ms *moduleServer) dial(cred string) *gatewayClient {
	ms.t.Helper()
	gc := &gatewayClient{t: ms.t, ms: ms, cred: cred, notes: make(chan mcp.JSONRPCNotification, 256)}
	c, _, err := mcpclient.Dial(context.Background(), ms.base+"/mcp", cred, mcpclient.DialOptions{
		Listen: true,
		Logger: slog.New(slog.DiscardHandler),
		OnNotification: func(n mcp.JSONRPCNotification) {
			select {
			case gc.notes <- n:
			default:
			}
		},
	})
	if err != nil {
		ms.t.Fatal(err)
	}
	ms.t.Cleanup(func() { c.Close() })
	gc.Client = c
	return gc
}

// moduleTools lists the module tools (not the todo verbs) the session sees.
func (gc *gatewayClient) moduleTools() []string {
	gc.t.Helper()
	res, err := gc.ListTools(context.Background(), mcp.ListToolsRequest{})
	if err != nil {
		gc.t.Fatal(err)
	}
	var out []string
	for _, tool := range res.Tools {
		if !agent.KnownVerb(tool.Name) {
			out = append(out, tool.Name)
		}
	}
	slices.Sort(out)
	return out
}

// call returns the result's structuredContent, or the error code of a refusal.
func (gc *gatewayClient) call(tool string, args map[string]any) (map[string]any, string) {
	gc.t.Helper()
	res, err := gc.CallTool(context.Background(), mcp.CallToolRequest{Params: mcp.CallToolParams{Name: tool, Arguments: args}})
	if err != nil {
		gc.t.Fatalf("%s: %v", tool, err)
	}
	var out map[string]any
	if len(res.RawStructuredContent) > 0 {
		if err := json.Unmarshal(res.RawStructuredContent, &out); err != nil {
			gc.t.Fatalf("%s: %s: %v", tool, res.RawStructuredContent, err)
		}
	}
	if res.IsError {
		code, _ := out["code"].(string)
		if code == "" {
			code = "module error"
		}
		return out, code
	}
	return out, ""
}

func (gc *gatewayClient) ok(tool string, args map[string]any) map[string]any {
	gc.t.Helper()
	out, code := gc.call(tool, args)
	if code != "" {
		gc.t.Fatalf("%s refused: %s %v", tool, code, out)
	}
	return out
}

// raw posts one JSON-RPC request in the client's session and returns the body as
// sent on the wire.
func (gc *gatewayClient) raw(body string) string {
	gc.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, gc.ms.base+"/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+gc.cred)
	req.Header.Set("Mcp-Session-Id", gc.GetSessionId())
	req.Header.Set("Mcp-Protocol-Version", agent.SupportedProtocolVersions[0])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		gc.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

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

	granted := ms.dial(ms.endpoint("granted", "--capabilities", "testmod", "--tool-deny", "testmod_crash"))
	narrow := ms.dial(ms.endpoint("narrow", "--capabilities", "testmod,other", "--tool-allow", "testmod_echo,other_echo"))
	plain := ms.dial(ms.endpoint("plain"))

	t.Run("each endpoint sees exactly its grant", func(t *testing.T) {
		want := []string{"testmod_add_tool", "testmod_echo", "testmod_emit_garbage", "testmod_freeze_stdin", "testmod_get_env",
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
	})

	const canary = "argument-canary-7d1f"
	t.Run("calls are forwarded and audited without arguments", func(t *testing.T) {
		if got := granted.ok("testmod_echo", map[string]any{"text": canary}); got["text"] != canary {
			t.Fatalf("echo = %v", got)
		}
		if got := narrow.ok("other_echo", map[string]any{"text": "other"}); got["text"] != "other" {
			t.Fatalf("other_echo = %v", got)
		}
		st, err := store.Open(context.Background(), ms.db, store.Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		rows, err := st.ListAudit(context.Background(), store.AuditFilter{Action: "module.call"})
		if err != nil {
			t.Fatal(err)
		}
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
	})

	t.Run("the module's environment is exactly the allowlist", func(t *testing.T) {
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
	})

	t.Run("kill -9: unavailable at once, back after the backoff", func(t *testing.T) {
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
	})

	t.Run("a changed definition is withheld until approved from the CLI", func(t *testing.T) {
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
	})

	t.Run("a tool that cannot be exposed is refused alone and shown", func(t *testing.T) {
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
	})

	t.Run("metrics count calls and restarts", func(t *testing.T) {
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
	})

	t.Run("modules list --modules-dir shows that directory even while a serve answers", func(t *testing.T) {
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
	})

	t.Run("SIGHUP restarts the modules, audited", func(t *testing.T) {
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
	})

	t.Run("shutdown leaves no process behind", func(t *testing.T) {
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
	})

	t.Run("modules list without a serve shows manifests and pins", func(t *testing.T) {
		code, out, stderr := cli(t, "", "modules", "list", "--url", "http://127.0.0.1:1", "--modules-dir", manifests, "--db", ms.db, "--json")
		if code != 0 {
			t.Fatalf("modules list: %s", stderr)
		}
		var views []server.ModuleView
		if err := json.Unmarshal([]byte(out), &views); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		if len(views) != 2 || views[0].Name != "other" || views[1].Name != "testmod" || views[1].State != stateNotRunning ||
			!views[1].Granted || len(views[1].Tools) != 10 { // 9, and "later" (withheld as new, then approved)
			t.Fatalf("offline modules list = %+v", views)
		}
	})
}

// TestServeRefusesBadManifests: every manifest the contract refuses stops serve
// before it listens, with a message naming the file and the field.
func TestServeRefusesBadManifests(t *testing.T) {
	dir := t.TempDir()
	bin := buildTestModule(t, dir)
	t.Setenv("TESTMOD_TOKEN", "token-for-tests")
	link := filepath.Join(dir, "link")
	if err := os.Symlink(bin, link); err != nil {
		t.Fatal(err)
	}
	writable := filepath.Join(dir, "writable")
	b, _ := os.ReadFile(bin)
	if err := os.WriteFile(writable, b, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chmod(writable, 0o757)
	// A directory anyone may write (without the sticky bit), and a symlinked one.
	openDir := filepath.Join(dir, "open")
	if err := os.Mkdir(openDir, 0o755); err != nil {
		t.Fatal(err)
	}
	inOpen := filepath.Join(openDir, "testmodule")
	if err := os.WriteFile(inOpen, b, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chmod(openDir, 0o777)
	linkedDir := filepath.Join(dir, "linked")
	if err := os.Symlink(filepath.Dir(bin), linkedDir); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name   string
		field  string
		egress string
		edit   func(map[string]any)
	}{
		{"relative command", "command", "", func(m map[string]any) { m["command"] = "bin/testmodule" }},
		{"symlinked command", "command", "", func(m map[string]any) { m["command"] = link }},
		{"world-writable command", "command", "", func(m map[string]any) { m["command"] = writable }},
		{"command in a world-writable directory", "command", "", func(m map[string]any) { m["command"] = inOpen }},
		{"command under a symlinked directory", "command", "", func(m map[string]any) {
			m["command"] = filepath.Join(linkedDir, filepath.Base(bin))
		}},
		{"missing environment value", "environment", "", func(m map[string]any) { m["environment"] = []string{"TESTMOD_NEVER_SET_ANYWHERE"} }},
		{"reserved environment name", "environment", "", func(m map[string]any) { m["environment"] = []string{"SWITCHBOARD_MODULE_TOKEN"} }},
		{"the server's own secret key", "environment", "", func(m map[string]any) {
			m["environment"] = []string{"SWITCHBOARD_SECRET_ENCRYPTION_KEY"}
		}},
		{"bad name", "name", "", func(m map[string]any) { m["name"] = "Test-Mod" }},
		{"name that prefixes a verb", "name", "", func(m map[string]any) { m["name"] = "list" }},
		{"name that prefixes a webhook verb", "name", "", func(m map[string]any) { m["name"] = "rotate" }},
		{"duplicate include_tools", "include_tools", "", func(m map[string]any) { m["include_tools"] = []string{"echo", "echo"} }},
		{"include_tools the module does not advertise", "include_tools", "", func(m map[string]any) { m["include_tools"] = []string{"echo", "launch"} }},
		{"unknown field", "shell", "", func(m map[string]any) { m["shell"] = "/bin/sh" }},
		{"unknown type", "type", "", func(m map[string]any) { m["type"] = "rest" }},
		{"egress policy not enforced", "enforce_egress_policy", `{"allow":[]}`, func(m map[string]any) { m["enforce_egress_policy"] = false }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			manifests := t.TempDir()
			file := writeManifest(t, manifests, "testmod", bin, tc.edit)
			cfg := server.Config{DB: filepath.Join(t.TempDir(), "sb.db"), ModulesDir: manifests, EgressPolicy: tc.egress,
				ShutdownTimeout: 5 * time.Second}
			cfg.Logger = slog.New(slog.DiscardHandler)
			srv, err := server.New(context.Background(), cfg)
			if err == nil {
				srv.Close()
				t.Fatal("serve accepted the manifest")
			}
			if msg := err.Error(); !strings.Contains(msg, file) || !strings.Contains(msg, fmt.Sprintf("field %q", tc.field)) {
				t.Fatalf("error %q does not name %s and field %q", msg, file, tc.field)
			}
			// Only what the running module advertises is checked after the
			// database is open; anything the manifest alone shows, before.
			if _, err := os.Stat(cfg.DB); !strings.Contains(tc.name, "does not advertise") && !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("serve refused the manifest but created %s (%v)", cfg.DB, err)
			}
		})
	}

	// Through the command line: exit 1 and the reason on stderr, before listening.
	manifests := t.TempDir()
	file := writeManifest(t, manifests, "testmod", "testmodule", nil)
	code, _, stderr := cli(t, "", "serve", "--db", filepath.Join(t.TempDir(), "sb.db"), "--modules-dir", manifests, "--listen", "127.0.0.1:0")
	if code != 1 || !strings.Contains(stderr, file) || !strings.Contains(stderr, `field "command"`) {
		t.Fatalf("serve with a bad manifest: exit %d, stderr %q", code, stderr)
	}
}

// --module-call-timeout bounds a call the agent's request does not: past it the
// agent is answered unavailable, and the module is still there for the next call.
func TestModuleCallTimeout(t *testing.T) {
	_, manifests := testModuleDir(t)
	ms := startModuleServer(t, server.Config{ModulesDir: manifests, ModuleCallTimeout: 300 * time.Millisecond})
	c := ms.dial(ms.endpoint("granted", "--capabilities", "testmod"))

	start := time.Now()
	if _, code := c.call("testmod_sleep", map[string]any{"ms": 60_000}); code != agent.OutcomeUnavailable {
		t.Fatalf("a call past the timeout: %q, want unavailable", code)
	}
	if el := time.Since(start); el > 30*time.Second {
		t.Fatalf("the call was answered after %v, not at the timeout", el)
	}
	if out := c.ok("testmod_echo", map[string]any{"text": "still here"}); !strings.Contains(fmt.Sprint(out), "still here") {
		t.Fatalf("echo after the timeout: %v", out)
	}

	code, _, stderr := cli(t, "", "serve", "--db", filepath.Join(t.TempDir(), "sb.db"), "--module-call-timeout", "0s")
	if code != 2 || !strings.Contains(stderr, "--module-call-timeout must be positive") {
		t.Fatalf("serve --module-call-timeout 0s: exit %d, %q", code, stderr)
	}
}
