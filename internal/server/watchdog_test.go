package server

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/store"
)

// While PostgreSQL is away the watchdog is still fed: a restart would not bring
// the server back, and serve reconnects by itself when it is.
func TestWatchdogFedWhilePostgreSQLIsAway(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	t.Setenv("NOTIFY_SOCKET", sock)
	t.Setenv("WATCHDOG_USEC", "100000")
	t.Setenv("WATCHDOG_PID", "")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	away := func(context.Context) error {
		return fmt.Errorf("store: PostgreSQL at 127.0.0.1:5432: connection refused: %w", store.ErrUnreachable)
	}
	go func() {
		superviseSystemd(ctx, slog.New(slog.NewTextHandler(io.Discard, nil)), time.Hour,
			func(context.Context) string { return "" }, away)
		close(done)
	}()
	defer func() { cancel(); <-done }()
	buf := make([]byte, 512)
	conn.SetReadDeadline(time.Now().Add(20 * time.Second)) // a guard against a hang, not a timing
	for {
		n, err := conn.Read(buf)
		if err != nil {
			t.Fatalf("no WATCHDOG=1 while PostgreSQL is away: %v", err)
		}
		if strings.Contains(string(buf[:n]), "WATCHDOG=1") {
			return
		}
	}
}
