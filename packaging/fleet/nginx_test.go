//go:build linux

package fleet

import (
	"errors"
	"fmt"
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

// The example nginx.conf, as docs/fleet.md shows it, in front of two processes
// on one PostgreSQL: new sessions spread over both, every session's requests
// reach the process holding it, stateless calls, a delivery and the board go
// anywhere; when a process dies, its sessions are answered 404 by the other and
// their clients start again there.
func TestNginxExampleConfig(t *testing.T) {
	bin, err := exec.LookPath("nginx")
	if err != nil {
		testkit.SkipOrFail(t, "nginx is not installed (sudo apt-get install nginx)")
		return
	}
	port := freePort(t)
	base := "http://127.0.0.1:" + port
	f := startFleet(t, base)
	startNginx(t, bin, port, f.a, f.b)

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
				t.Fatalf("call %d in session %s through nginx: %v", i, cs.ID(), err)
			}
		}
	}
	if routes["a"] == 0 || routes["b"] == 0 {
		t.Fatalf("new sessions by process: %v, want both processes to open some", routes)
	}

	stateless := f.stateless(t, base)
	for i := range 4 {
		if err := call(stateless, "list_webhooks", map[string]any{}); err != nil {
			t.Fatalf("stateless call %d through nginx: %v", i, err)
		}
	}
	if code := f.deliver(t, base, "through-nginx"); code != http.StatusAccepted {
		t.Fatalf("delivery through nginx: %d", code)
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
			t.Fatalf("board request %d through nginx: %d at %s", i, resp.StatusCode, resp.Request.URL)
		}
	}

	f.stopA()
	if err := call(onA, "list_webhooks", map[string]any{}); !errors.Is(err, sdk.ErrSessionMissing) {
		t.Fatalf("a session of the stopped process: %v, want a 404 (the Go SDK's ErrSessionMissing)", err)
	}
	again := f.session(t, base, nil)
	if err := call(again, "list_webhooks", map[string]any{}); err != nil || !strings.HasPrefix(again.ID(), "sb-b.") {
		t.Fatalf("the new session %q after a stopped: %v", again.ID(), err)
	}
}

// startNginx runs nginx with nginx.conf rendered for the processes at a and b,
// listening on port, until the test ends.
func startNginx(t *testing.T, bin, port, a, b string) {
	t.Helper()
	example, err := os.ReadFile("nginx.conf")
	if err != nil {
		t.Fatal(err)
	}
	site := strings.NewReplacer("10.0.0.1:8080", strings.TrimPrefix(a, "http://"),
		"10.0.0.2:8080", strings.TrimPrefix(b, "http://"), "listen 80;", "listen 127.0.0.1:"+port+";").Replace(string(example))
	dir := t.TempDir()
	user := ""
	if os.Geteuid() == 0 {
		user = "user root;" // the workers must reach the temporary directories
	}
	main := fmt.Sprintf(`daemon off;
%s
worker_processes 1;
pid %[2]s/nginx.pid;
error_log %[2]s/error.log;
events { worker_connections 256; }
http {
    access_log off;
    client_body_temp_path %[2]s/body;
    proxy_temp_path %[2]s/proxy;
    fastcgi_temp_path %[2]s/fastcgi;
    uwsgi_temp_path %[2]s/uwsgi;
    scgi_temp_path %[2]s/scgi;
    include %[2]s/switchboard.conf;
}
`, user, dir)
	for name, text := range map[string]string{"nginx.conf": main, "switchboard.conf": site} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(bin, "-p", dir, "-e", filepath.Join(dir, "error.log"), "-c", filepath.Join(dir, "nginx.conf"))
	// Should the test binary die before its cleanups (a timeout), nginx stops too.
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
		cmd.Process.Signal(syscall.SIGTERM) // the master stops its workers
		<-exited
		if t.Failed() {
			t.Logf("nginx's error log:\n%s", nginxLog(dir))
		}
	})
	// Wait until it listens (or exits): a start, not a timed assertion.
	for {
		select {
		case err := <-exited:
			t.Fatalf("nginx exited (%v): %s", err, nginxLog(dir))
		default:
		}
		if c, err := net.Dial("tcp", "127.0.0.1:"+port); err == nil {
			c.Close()
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// nginxLog is what nginx wrote to its error log and its output.
func nginxLog(dir string) string {
	var b strings.Builder
	for _, name := range []string{"error.log", "output.log"} {
		text, _ := os.ReadFile(filepath.Join(dir, name))
		b.Write(text)
	}
	return b.String()
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
