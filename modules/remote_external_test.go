package modules

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// everythingHTTP runs the MCP reference server in its Streamable HTTP mode on
// port, in a process group of its own, and waits until it accepts connections.
// It returns the function that kills it.
func everythingHTTP(t *testing.T, port int) (stop func()) {
	t.Helper()
	return everythingServer(t, port, "streamableHttp")
}

// everythingServer runs it in mode (streamableHttp, sse).
func everythingServer(t *testing.T, port int, mode string) (stop func()) {
	t.Helper()
	cmd := exec.Command("npx", "--yes", everythingPackage, mode)
	cmd.Env = append(os.Environ(), "PORT="+strconv.Itoa(port))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			_ = cmd.Wait()
		}
	}
	t.Cleanup(stop)
	// The first run downloads the package: a deadline, not a timed assertion.
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(50 * time.Millisecond) {
		if c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port)); err == nil {
			c.Close()
			return stop
		}
		if time.Now().After(deadline) {
			t.Fatalf("the reference server did not listen on %d", port)
		}
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TestRemoteEverything reaches the MCP reference server over Streamable HTTP as
// a remote capability: its tools listed with the prefix and called, its restart
// survived, and a tool whose definition differs from its pin withheld until
// approved.
func TestRemoteEverything(t *testing.T) {
	requireExternal(t, "node", "npx")
	port := freePort(t)
	stop := everythingHTTP(t, port)
	m := Manifest{
		File: "everything.json", Version: 1, Type: TypeRemote, Name: "everything",
		Title: "Everything", Description: "MCP reference server, over HTTP.", Risk: "read",
		URL: "http://127.0.0.1:" + strconv.Itoa(port) + "/mcp", AllowPrivateNetwork: true,
		Headers: map[string]EnvRef{"Authorization": {Env: "TESTMOD_TOKEN", Prefix: "Bearer "}},
	}
	pins := NewMemoryPins()
	run := func() *harness {
		h := newHarness(t, []Manifest{m}, func(o *Options) {
			o.EgressPolicy, o.Pins = `{"allow":["127.0.0.1"]}`, pins
		})
		h.pins = pins
		h.start()
		return h
	}
	// The first run pins what the server lists; then get-sum's pin is made one
	// of a definition it once had, which the second run's listing differs from.
	if err := run().sup.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := pins.PinTool(context.Background(), "everything", "everything_get-sum", strings.Repeat("0", 64), nil); err != nil {
		t.Fatal(err)
	}
	h := run()

	echo, ok := h.tool("everything_echo")
	if !ok || !echo.Available {
		t.Fatalf("everything_echo = %+v, %v; status %s, %s", echo.Name, echo.Available, h.status("everything").State, h.status("everything").LastError)
	}
	var def map[string]json.RawMessage
	if err := json.Unmarshal(echo.Definition, &def); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(def["annotations"]), `"readOnlyHint":true`) || !strings.Contains(string(def["inputSchema"]), `"message"`) {
		t.Fatalf("everything_echo definition lost keys: %s", echo.Definition)
	}
	if text := callText(t, h, "everything_echo", `{"message":"over http"}`); !strings.Contains(text, "over http") {
		t.Fatalf("echo = %q", text)
	}

	sum, _ := h.tool("everything_get-sum")
	if !sum.Withheld || sum.Available {
		t.Fatalf("get-sum = %+v, want withheld: its pin differs", sum)
	}
	if err := h.sup.Approve(context.Background(), "everything", "get-sum", sum.Hash); err != nil {
		t.Fatal(err)
	}
	if text := callText(t, h, "everything_get-sum", `{"a":2,"b":3}`); !strings.Contains(text, "5") {
		t.Fatalf("get-sum after approval = %q", text)
	}

	// The server restarts and forgets every session: the capability goes down,
	// waits out its backoff, and comes back on a new session.
	stop()
	w := h.nextWait()
	if h.status("everything").State == StateUp {
		t.Fatal("up while the server is down")
	}
	everythingHTTP(t, port)
	w.fire <- time.Now()
	h.until("everything up again", func() bool { return h.status("everything").State == StateUp })
	if text := callText(t, h, "everything_echo", `{"message":"back"}`); !strings.Contains(text, "back") {
		t.Fatalf("echo after the restart = %q", text)
	}
}

// TestRemoteEverythingOverSSE reaches the reference server over the legacy
// HTTP+SSE transport: its tools listed, one called.
func TestRemoteEverythingOverSSE(t *testing.T) {
	requireExternal(t, "node", "npx")
	port := freePort(t)
	everythingServer(t, port, "sse")
	m := Manifest{
		File: "everything.json", Version: 1, Type: TypeRemote, Name: "everything", Transport: transportSSE,
		Title: "Everything", Description: "MCP reference server, over HTTP+SSE.", Risk: "read",
		URL: "http://127.0.0.1:" + strconv.Itoa(port) + "/sse", AllowPrivateNetwork: true,
	}
	h := newHarness(t, []Manifest{m}, func(o *Options) { o.EgressPolicy = "" })
	h.start()
	if echo, ok := h.tool("everything_echo"); !ok || !echo.Available {
		t.Fatalf("everything_echo = %+v, %v; status %s %s", echo.Name, ok, h.status("everything").State, h.status("everything").LastError)
	}
	if text := callText(t, h, "everything_echo", `{"message":"over sse"}`); !strings.Contains(text, "over sse") {
		t.Fatalf("echo = %q", text)
	}
}
