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
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/switchboardhq/switchboard/agent"
	"github.com/switchboardhq/switchboard/internal/mcpclient"
	"github.com/switchboardhq/switchboard/internal/server"
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
		if !store.KnownVerb(tool.Name) {
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
	req.Header.Set("Mcp-Protocol-Version", agent.SessionProtocolVersion)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		gc.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
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
		{"unknown type", "type", "", func(m map[string]any) { m["type"] = "ftp" }},
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
