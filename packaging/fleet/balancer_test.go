//go:build linux

package fleet

import (
	"errors"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/switchboardhq/switchboard/internal/testkit"
)

// testBalancer starts a fleet behind the load balancer lb, which start runs
// from its binary bin on port in front of the processes at a and b, and checks
// it (throughBalancer); skipped when lb is not installed.
func testBalancer(t *testing.T, lb string, start func(t *testing.T, bin, port, a, b string)) {
	bin, err := exec.LookPath(lb)
	if err != nil {
		testkit.SkipOrFail(t, "%s is not installed (sudo apt-get install %[1]s)", lb)
		return
	}
	port := freePort(t)
	base := "http://127.0.0.1:" + port
	f := startFleet(t, base)
	start(t, bin, port, f.a, f.b)
	throughBalancer(t, lb, base, f)
}

// rendered is the example config file with the processes at a and b for its
// 10.0.0.1:8080 and 10.0.0.2:8080, and each further old, new pair replaced.
func rendered(t *testing.T, file, a, b string, oldnew ...string) string {
	t.Helper()
	example, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return strings.NewReplacer(append([]string{"10.0.0.1:8080", strings.TrimPrefix(a, "http://"),
		"10.0.0.2:8080", strings.TrimPrefix(b, "http://")}, oldnew...)...).Replace(string(example))
}

// throughBalancer checks a load balancer at base in front of f: new sessions
// spread over both processes, every session's requests reach the process
// holding it, stateless calls, a delivery and the board go anywhere; when a
// process stops, its sessions are answered 404 by the other and their clients
// start again there.
func throughBalancer(t *testing.T, lb, base string, f *fleet) {
	t.Helper()
	routes := map[string]int{}
	var onA *sdk.ClientSession
	for range 4 {
		cs := f.session(t, base, nil)
		route, _, _ := strings.Cut(strings.TrimPrefix(cs.ID(), "sb-"), ".")
		routes[route]++
		if route == "a" {
			onA = cs
		}
		for i := range 3 {
			if err := call(cs, "list_webhooks", map[string]any{}); err != nil {
				t.Fatalf("call %d in session %s through %s: %v", i, cs.ID(), lb, err)
			}
		}
	}
	if routes["a"] == 0 || routes["b"] == 0 {
		t.Fatalf("new sessions by process: %v, want both processes to open some", routes)
	}

	stateless := f.stateless(t, base)
	for i := range 4 {
		if err := call(stateless, "list_webhooks", map[string]any{}); err != nil {
			t.Fatalf("stateless call %d through %s: %v", i, lb, err)
		}
	}
	if code := f.deliver(t, base, "through-"+lb); code != http.StatusAccepted {
		t.Fatalf("delivery through %s: %d", lb, code)
	}
	if err := call(onA, "claim_next", map[string]any{"queues": []string{"jobs"}}); err != nil {
		t.Fatalf("claim the delivered todo: %v", err)
	}
	browser := f.login(t, base)
	for i := range 4 {
		resp, err := browser.Get(base + "/")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.Request.URL.Path == "/login" {
			t.Fatalf("board request %d through %s: %d at %s", i, lb, resp.StatusCode, resp.Request.URL)
		}
	}

	f.stopA()
	err := call(onA, "list_webhooks", map[string]any{})
	if !errors.Is(err, sdk.ErrSessionMissing) {
		t.Fatalf("a session of the stopped process: %v, want a 404 (the Go SDK's ErrSessionMissing)", err)
	}
	again := f.session(t, base, nil)
	if err := call(again, "list_webhooks", map[string]any{}); err != nil || !strings.HasPrefix(again.ID(), "sb-b.") {
		t.Fatalf("the new session %q after a stopped: %v", again.ID(), err)
	}
}

// runUntilListening starts a load balancer's cmd, its output to a file in dir,
// and returns once it listens on port; it is stopped when the test ends, and its
// log (what log returns) shown if the test failed.
func runUntilListening(t *testing.T, cmd *exec.Cmd, dir, port string, log func() string) {
	t.Helper()
	name := filepath.Base(cmd.Path)
	// Should the test binary die before its cleanups (a timeout), it stops too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	// A file, not a pipe: nginx's workers would hold a pipe open after the
	// master ended, and Wait with it.
	out, err := os.Create(filepath.Join(dir, "output.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM) // nginx's master stops its workers
		<-exited
		if t.Failed() {
			t.Logf("%s's log:\n%s", name, log())
		}
	})
	// Wait until it listens (or exits): a start, not a timed assertion.
	for {
		select {
		case err := <-exited:
			t.Fatalf("%s exited (%v): %s", name, err, log())
		default:
		}
		if c, err := net.Dial("tcp", "127.0.0.1:"+port); err == nil {
			c.Close()
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// freePort is a loopback port free a moment ago.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port
}
