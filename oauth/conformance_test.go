package oauth_test

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/internal/testkit"
)

// TestConformanceAuthorizationServer runs the MCP conformance suite's
// authorization server scenarios (its `authorization` command:
// authorization-server-metadata-endpoint, authorization-code-grant) against
// the rig. The suite prints the authorization URL and waits on its own
// callback listener; the operator's consent is given over HTTP here, as a
// browser would (login session, the page's form and CSRF token), and the
// browser's last step, the GET of the redirect, goes to the suite. The suite
// and its Node.js 20 shim are internal/cli's (testdata/conformance). Skips
// without Node.js or the npm registry, unless SWITCHBOARD_REQUIRE_EXTERNAL=1.
func TestConformanceAuthorizationServer(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: an npm install and the Node.js conformance suite")
	}
	dir, node := testkit.NPMInstall(t, filepath.Join("..", "internal", "cli", "testdata", "conformance"),
		"package.json", "package-lock.json", "hooks.mjs")
	r := newRig(t, nil)
	port := freePort(t)
	client := r.register("http://127.0.0.1:" + port + "/callback")
	// A deadline, not a timed assertion: a hung suite must not hang go test.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "--import", "./hooks.mjs",
		filepath.Join("node_modules", "@modelcontextprotocol", "conformance", "dist", "index.js"),
		"authorization", "--url", r.base, "--client-id", client, "--resource", r.base+"/mcp", "--port", port)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "NO_COLOR=1")
	var out testkit.LockedBuffer // the suite's stderr and stdout
	cmd.Stderr = &out
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The suite prints the URL, then starts its callback listener: the
	// browser's last step waits for the listener's line.
	var callback string
	listening, consented := false, false
	arrive := func() {
		if callback == "" || !listening || consented {
			return
		}
		back, err := http.Get(callback) // the browser, arriving at the suite's callback
		if err != nil {
			t.Fatal(err)
		}
		back.Body.Close()
		consented = true
	}
	for lines := bufio.NewScanner(stdout); lines.Scan(); {
		line := lines.Text()
		out.Write([]byte(line + "\n"))
		switch {
		case strings.HasPrefix(line, "Callback server started"):
			listening = true
		case strings.HasPrefix(line, r.base+"/oauth/authorize?"):
			u, err := url.Parse(line)
			if err != nil {
				t.Fatal(err)
			}
			res, body := r.consent(u.Query(), "allow")
			if res.StatusCode != http.StatusSeeOther {
				t.Fatalf("consent: %d %s", res.StatusCode, body)
			}
			callback = res.Header.Get("Location")
		}
		arrive()
	}
	err = cmd.Wait()
	t.Logf("the suite said:\n%s", out.String())
	said := out.String()
	if err != nil || !consented || !strings.Contains(said, "✓ authorization-code-grant") ||
		!strings.Contains(said, "✓ authorization-server-metadata-endpoint") {
		t.Fatalf("the suite's authorization scenarios did not all pass (%v, consent given: %t)", err, consented)
	}
}

// freePort returns a loopback port nothing listens on now.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
}
