package server

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// serve warns of a database other users may read (made by an earlier Switchboard
// under a umask of 022), and not of one that is its owner's alone.
func TestServeWarnsOfASharedDatabase(t *testing.T) {
	db := filepath.Join(t.TempDir(), "sb.db")
	if err := os.WriteFile(db, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	warnIfShared(logger, db)
	if logs.Len() != 0 {
		t.Fatalf("warned of a 0600 database: %s", logs.String())
	}
	if err := os.Chmod(db, 0o644); err != nil {
		t.Fatal(err)
	}
	warnIfShared(logger, db)
	if !strings.Contains(logs.String(), "other users may read the database (mode 0644)") || !strings.Contains(logs.String(), "chmod 600") {
		t.Fatalf("no warning of a 0644 database: %s", logs.String())
	}
}

func TestServeFinishesInFlightRequestsOnShutdown(t *testing.T) {
	cfg := Config{DB: filepath.Join(t.TempDir(), "sb.db"), ReaperInterval: time.Minute, Retention: time.Hour, ShutdownTimeout: 5 * time.Second}
	ctx, cancel := context.WithCancel(context.Background())
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	srv, err := New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	// A slow handler stands in for a request in flight when the signal comes.
	entered := make(chan struct{})
	srv.http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		time.Sleep(200 * time.Millisecond)
		io.WriteString(w, "finished")
	})
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx, ln) }()
	got := make(chan string, 1)
	go func() {
		resp, err := http.Get("http://" + ln.Addr().String() + "/")
		if err != nil {
			got <- err.Error()
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		got <- string(b)
	}()
	<-entered
	cancel()
	if body := <-got; body != "finished" {
		t.Fatalf("in-flight request got %q", body)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestListensEverywhere(t *testing.T) {
	for listen, want := range map[string]bool{"0.0.0.0:8080": true, "[::]:8080": true, ":8080": true,
		"127.0.0.1:8080": false, "[::1]:8080": false, "sb.example.net:80": false, "192.168.1.5:8080": false, "garbage": false} {
		if got := ListensEverywhere(listen); got != want {
			t.Errorf("ListensEverywhere(%q) = %v, want %v", listen, got, want)
		}
	}
}
