//go:build linux

package fleet

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The example nginx.conf, as docs/fleet.md shows it, in front of two processes
// on one PostgreSQL (see throughBalancer).
func TestNginxExampleConfig(t *testing.T) { testBalancer(t, "nginx", startNginx) }

// startNginx runs nginx with nginx.conf rendered for the processes at a and b,
// listening on port, until the test ends.
func startNginx(t *testing.T, bin, port, a, b string) {
	t.Helper()
	site := rendered(t, "nginx.conf", a, b, "listen 80;", "listen 127.0.0.1:"+port+";")
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
	runUntilListening(t, cmd, dir, port, func() string { return nginxLog(dir) })
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
