package server_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/switchboardhq/switchboard/internal/server"
	"github.com/switchboardhq/switchboard/internal/server/servertest"
)

// A DNS-rebinding page reaches a loopback serve under its own host name: every
// route but the webhook receiver refuses it, and answers this machine's names
// and the public URL's host (a reverse proxy on the same machine).
func TestServeRefusesAForeignHostOnLoopback(t *testing.T) {
	base, _, _ := servertest.Start(t, server.Config{BaseURL: "https://sb.example.net"})
	local := strings.TrimPrefix(base, "http://")
	_, port, _ := strings.Cut(local, ":")
	get := func(method, path, host string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, base+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, path := range []string{"/metrics", "/readyz", "/healthz", "/login"} {
		for _, host := range []string{local, "localhost:" + port, "[::1]:" + port, "sb.example.net"} {
			if code, body := get(http.MethodGet, path, host); code != http.StatusOK {
				t.Errorf("GET %s with Host %s: %d %.200s", path, host, code, body)
			}
		}
		for _, host := range []string{"evil.example:" + port, "evil.example", "sb.example.net.evil.example"} {
			if code, body := get(http.MethodGet, path, host); code != http.StatusForbidden || !strings.Contains(body, "--base-url") {
				t.Errorf("GET %s with Host %s: %d %.200s, want 403", path, host, code, body)
			}
		}
	}
	// The receiver answers by any name: an unknown token is its own 404.
	if code, body := get(http.MethodPost, "/webhooks/w/nosuchtoken", "tunnel.example"); code != http.StatusNotFound {
		t.Errorf("POST to the receiver with a tunnel's Host: %d %.200s, want its 404", code, body)
	}
}
