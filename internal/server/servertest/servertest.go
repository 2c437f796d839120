// Package servertest runs a whole server.Server on a loopback port for the
// end-to-end tests, built by server.New as serve builds it.
package servertest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/ingest"
	"github.com/switchboardhq/switchboard/internal/server"
	"github.com/switchboardhq/switchboard/internal/testkit"
)

// Start runs a server on a free loopback port until the test ends, or until
// stop. Unset durations get short test values, an unset DB a file in
// t.TempDir(), and an unset Logger one that discards.
func Start(t testing.TB, cfg server.Config) (base string, srv *server.Server, stop func()) {
	t.Helper()
	if cfg.DB == "" {
		cfg.DB = testkit.DB(t)
	}
	if cfg.ReaperInterval == 0 {
		cfg.ReaperInterval = 30 * time.Second
	}
	if cfg.Retention == 0 {
		cfg.Retention = time.Hour
	}
	if cfg.ShutdownTimeout == 0 {
		cfg.ShutdownTimeout = 5 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := server.New(ctx, cfg)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		cancel()
		srv.Close()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx, ln) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve returned %v", err)
		}
	}
	t.Cleanup(stop)
	return "http://" + ln.Addr().String(), srv, stop
}

// Readyz gets base's /readyz: its status code and its JSON.
func Readyz(t testing.TB, base string) (int, map[string]any) {
	t.Helper()
	resp, err := http.Get(base + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, body
}

// Deliver posts body to the webhook with token as its producer would, signed
// with secret under delivery id, and returns the answer (its body read and
// closed).
func Deliver(t testing.TB, base, token, source, secret, id string, body []byte) *http.Response {
	t.Helper()
	hdr, err := ingest.Sign(source, secret, id, body, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, base+"/webhooks/w/"+token, bytes.NewReader(body))
	req.Header = hdr
	req.Header.Set("X-Delivery-Id", id)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}
