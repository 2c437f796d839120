package cli

import (
	"errors"
	"flag"
	"os"
	"strings"
	"testing"
)

// Lookup hands over a command's flag set, parsed, without running the command:
// every command and subcommand parses its usual line, and nothing is opened.
func TestLookupParsesWithoutRunning(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	for _, args := range [][]string{
		{"serve", "--listen", "127.0.0.1:0", "--modules-dir", "/nonexistent"},
		{"endpoint", "create", "--agent", "a", "--queues", "q"}, {"endpoint", "list", "--all"},
		{"endpoint", "update", "7", "--queues", "q"}, {"endpoint", "revoke", "7"},
		{"admin", "create", "--username", "ana"}, {"admin", "passwd", "--username", "ana"},
		{"admin", "logout", "--username", "ana"}, {"admin", "list"},
		{"todo", "add", "--queue", "inbox", "--payload", "{}"}, {"todo", "list", "--state", "failed"},
		{"todo", "show", "3"}, {"todo", "release", "3"}, {"todo", "retry", "--all-failed"},
		{"webhook", "create", "--source", "github", "--queue", "q"}, {"webhook", "list"},
		{"webhook", "rotate", "4"}, {"webhook", "delete", "4"}, {"webhook", "events", "4"},
		{"secrets", "reencrypt"}, {"modules", "list"}, {"modules", "approve", "mod", "tool"},
		{"backup", "--to", "b.db"}, {"restore", "--from", "b.db"}, {"connect", "--url", "http://x/mcp"},
		{"bench", "--deliveries", "5"}, {"version"},
	} {
		fs, err := Lookup(args)
		if err != nil {
			t.Errorf("Lookup(%q): %v", args, err)
			continue
		}
		if want := "switchboard " + strings.Join(leaf(args), " "); fs.Name() != want {
			t.Errorf("Lookup(%q) is the flag set of %q, want %q", args, fs.Name(), want)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) > 0 {
		t.Errorf("Lookup left %v behind: a command ran", entries)
	}
	fs, err := Lookup([]string{"todo", "list", "--queue", "inbox"})
	if err != nil || fs.Lookup("queue").Value.String() != "inbox" || fs.Lookup("no-such-flag") != nil {
		t.Fatalf("todo list --queue inbox: %v", err)
	}
}

// leaf is the command and subcommand args name, without their arguments.
func leaf(args []string) []string {
	switch args[0] {
	case "endpoint", "admin", "todo", "webhook", "secrets", "modules":
		return args[:2]
	}
	return args[:1]
}

// Lookup says what switchboard would say of a line it refuses.
func TestLookupRefusesWhatTheCommandRefuses(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"bogus"}, `unknown command "bogus"`},
		{[]string{"todo"}, "missing subcommand"},
		{[]string{"todo", "frobnicate"}, `unknown subcommand "frobnicate"`},
		{[]string{"todo", "list", "--nope"}, "flag provided but not defined: -nope"},
		{[]string{"todo", "list", "--limit", "many"}, `invalid value "many" for flag -limit`},
		{[]string{"endpoint", "revoke", "ID"}, `endpoint ID must be a positive number, not "ID"`},
		{[]string{"todo", "show", "-1"}, `todo ID must be a positive number, not "-1"`},
		{[]string{"todo", "show", "--json"}, "missing todo ID"},
		{[]string{"endpoint", "list", "extra"}, `unexpected argument "extra"`},
	} {
		_, err := Lookup(c.args)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Lookup(%q) = %v, want it to say %q", c.args, err, c.want)
		}
	}
	if _, err := Lookup([]string{"serve", "-h"}); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("serve -h: %v, want flag.ErrHelp", err)
	}
}
