package cli

import (
	"bytes"
	"flag"
	"log/slog"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/switchboardhq/switchboard/internal/server"
	"github.com/switchboardhq/switchboard/store"
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

// --add-todo-cap and SWITCHBOARD_ADD_TODO_CAP set the cap of add_todo; a cap
// that is not a positive whole number stops serve with the reason.
func TestServeAddTodoCap(t *testing.T) {
	for _, tc := range []struct {
		env, flag string
		want      int
		bad       string
	}{
		{want: store.MaxAddedPending},
		{env: "25", want: 25},
		{env: "25", flag: "7", want: 7},
		{env: "lots", bad: "SWITCHBOARD_ADD_TODO_CAP=\"lots\" is not a whole number"},
		{flag: "0", bad: "--add-todo-cap must be positive"},
	} {
		var c serveConfig
		env := &environ{getenv: func(k string) string {
			if k == "SWITCHBOARD_ADD_TODO_CAP" {
				return tc.env
			}
			return ""
		}}
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		c.register(fs, env)
		var args []string
		if tc.flag != "" {
			args = []string{"--add-todo-cap", tc.flag}
		}
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		err := c.validate()
		switch {
		case tc.bad == "" && (err != nil || c.AddTodoCap != tc.want):
			t.Errorf("env %q, flag %q: cap %d (%v), want %d", tc.env, tc.flag, c.AddTodoCap, err, tc.want)
		case tc.bad != "" && (err == nil || !strings.Contains(err.Error(), tc.bad)):
			t.Errorf("env %q, flag %q: %v, want %q", tc.env, tc.flag, err, tc.bad)
		}
	}
}
