package server_test

import (
	"io"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/switchboardhq/switchboard/internal/server"
	"github.com/switchboardhq/switchboard/internal/server/servertest"
)

// The machine's own name resolves to a loopback address on most Linux installs
// (Debian and Ubuntu map it to 127.0.1.1, many images to 127.0.0.1), so an
// operator on the machine who opens http://HOSTNAME:PORT/ reaches a loopback
// listener (or a 0.0.0.0 one through loopback) naming it in Host. The board
// answered that before the rebinding guard; now it is 403. A rebinding page cannot
// make a browser send this machine's own name, so it is as safe to accept as
// "localhost".
func TestServeAnswersThisMachinesOwnNameOnLoopback(t *testing.T) {
	name, err := os.Hostname()
	if err != nil || name == "" || strings.EqualFold(name, "localhost") {
		t.Fatalf("hostname %q, %v: this test needs a machine name", name, err)
	}
	base, _, _ := servertest.Start(t, server.Config{})
	_, port, _ := strings.Cut(strings.TrimPrefix(base, "http://"), ":")
	for _, path := range []string{"/login", "/healthz"} {
		req, err := http.NewRequest(http.MethodGet, base+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = name + ":" + port
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s with Host %s (this machine's name): %d %.200s", path, req.Host, resp.StatusCode, b)
		}
	}
}

// nginx's usual `proxy_set_header Host $host;` forwards the host name without the
// port. With the public URL on a port of its own (https://sb.example.net:8443) the
// proxy's requests then name "sb.example.net", which only a page on that very
// name could send: the port adds nothing against rebinding, yet the board (and
// /mcp) answer 403.
func TestServeAnswersTheBaseURLsHostWithoutItsPort(t *testing.T) {
	base, _, _ := servertest.Start(t, server.Config{BaseURL: "https://sb.example.net:8443"})
	for _, host := range []string{"sb.example.net:8443", "sb.example.net"} {
		req, err := http.NewRequest(http.MethodGet, base+"/login", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET /login with Host %s behind a proxy for https://sb.example.net:8443: %d %.200s", host, resp.StatusCode, b)
		}
	}
}
