package cli

import (
	"bytes"
	"github.com/switchboardhq/switchboard/internal/server"
	"log/slog"
	"runtime/debug"
	"strings"
	"testing"
)

// serve and bench set the collector's percentage, unless GOGC is set: the
// operator's own setting stands.
func TestSetGCPercentLeavesGOGCAlone(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	setGCPercent(&environ{getenv: func(string) string { return "" }}, 250)
	if got := debug.SetGCPercent(100); got != 250 {
		t.Fatalf("collector at %d%%, want 250", got)
	}
	setGCPercent(&environ{getenv: func(k string) string {
		if k == "GOGC" {
			return "50"
		}
		return ""
	}}, 250)
	if got := debug.SetGCPercent(100); got != 100 {
		t.Fatalf("collector at %d%% with GOGC set, want it left at 100", got)
	}
}

// serve without a secret encryption key says once, at WARN, that secrets are
// stored as plaintext and how to give it a key; with a key it says nothing of it.
func TestServeWarnsWithoutASecretKey(t *testing.T) {
	for _, key := range [][]byte{nil, bytes.Repeat([]byte{5}, 32)} {
		var logs bytes.Buffer
		_, _, stop := startServerLogging(t, server.Config{SecretKey: key}, slog.New(slog.NewTextHandler(&logs, nil)))
		stop()
		n := strings.Count(logs.String(), "level=WARN msg=\"no secret encryption key: webhook secrets and the device-cookie key are stored")
		switch {
		case key == nil && (n != 1 || !strings.Contains(logs.String(), "--secret-key-file") ||
			!strings.Contains(logs.String(), "SWITCHBOARD_SECRET_ENCRYPTION_KEY")):
			t.Fatalf("without a key, %d warnings naming the fix:\n%s", n, logs.String())
		case key != nil && n != 0:
			t.Fatalf("warned with a key configured:\n%s", logs.String())
		}
	}
}
