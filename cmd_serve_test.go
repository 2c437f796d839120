package main

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
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
		_, _, stop := startServerLogging(t, serveConfig{SecretKey: key}, slog.New(slog.NewTextHandler(&logs, nil)))
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
