//go:build linux

package fleet

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The example haproxy.cfg, as docs/fleet.md shows it, in front of two processes
// on one PostgreSQL (see throughBalancer).
func TestHAProxyExampleConfig(t *testing.T) { testBalancer(t, "haproxy", startHAProxy) }

// startHAProxy runs haproxy with haproxy.cfg rendered for the processes at a and
// b, listening on port without TLS, until the test ends.
func startHAProxy(t *testing.T, bin, port, a, b string) {
	t.Helper()
	cfg := rendered(t, "haproxy.cfg", a, b, "bind :443 ssl crt /etc/haproxy/switchboard.pem", "bind 127.0.0.1:"+port,
		"switchboard.example.com", "127.0.0.1:"+port)
	if !strings.Contains(cfg, "bind 127.0.0.1:"+port) {
		t.Fatal("haproxy.cfg has no bind line this test knows how to change")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "haproxy.cfg")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	// -db: in the foreground, its errors on its output.
	cmd := exec.Command(bin, "-db", "-f", path)
	runUntilListening(t, cmd, dir, port, func() string {
		text, _ := os.ReadFile(filepath.Join(dir, "output.log"))
		return string(text)
	})
}
