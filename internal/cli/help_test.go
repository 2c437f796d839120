package cli

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var updateGolden = flag.Bool("update", false, "rewrite testdata/help/*.txt from the commands' output")

// helpCases are every command and subcommand asked for help, and every group
// run bare, so that any change to a usage text or an exit code shows in a diff.
var helpCases = [][]string{
	{},
	{"-h"},
	{"help"},
	{"bogus"},
	{"serve", "-h"},
	{"endpoint"}, {"endpoint", "-h"},
	{"endpoint", "create", "-h"}, {"endpoint", "list", "-h"}, {"endpoint", "update", "-h"}, {"endpoint", "revoke", "-h"},
	{"operator"}, {"operator", "-h"},
	{"operator", "create", "-h"}, {"operator", "passwd", "-h"}, {"operator", "logout", "-h"}, {"operator", "list", "-h"},
	{"admin"}, {"admin", "-h"},
	{"admin", "create", "-h"}, {"admin", "passwd", "-h"}, {"admin", "logout", "-h"}, {"admin", "list", "-h"},
	{"todo"}, {"todo", "-h"},
	{"todo", "add", "-h"}, {"todo", "list", "-h"}, {"todo", "show", "-h"}, {"todo", "release", "-h"}, {"todo", "retry", "-h"},
	{"webhook"}, {"webhook", "-h"},
	{"webhook", "create", "-h"}, {"webhook", "list", "-h"}, {"webhook", "rotate", "-h"}, {"webhook", "delete", "-h"}, {"webhook", "events", "-h"},
	{"secrets"}, {"secrets", "-h"}, {"secrets", "reencrypt", "-h"},
	{"modules"}, {"modules", "-h"}, {"modules", "list", "-h"}, {"modules", "approve", "-h"}, {"modules", "import-openapi", "-h"},
	{"todo", "cancel", "-h"}, {"queue"}, {"queue", "-h"}, {"queue", "list", "-h"}, {"queue", "pause", "-h"}, {"queue", "resume", "-h"},
	{"backup", "-h"}, {"restore", "-h"}, {"connect", "-h"}, {"bench", "-h"}, {"version", "-h"},
}

// TestHelpGolden compares each command's help and exit code with
// testdata/help/; `go test -run TestHelpGolden -update` rewrites the files
// after a change meant to be seen.
func TestHelpGolden(t *testing.T) {
	dir, err := filepath.Abs(filepath.Join("testdata", "help"))
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(t.TempDir()) // a command that wrongly ran would leave its database here
	for _, args := range helpCases {
		name := strings.Join(args, "_")
		if name == "" {
			name = "no_arguments"
		}
		name = strings.TrimLeft(strings.ReplaceAll(name, "_-h", "_h"), "-")
		t.Run(name, func(t *testing.T) {
			code, stdout, stderr := cli(t, "", args...)
			got := fmt.Sprintf("$ switchboard %s\nexit %d\n--- stdout\n%s--- stderr\n%s", strings.Join(args, " "), code, stdout, stderr)
			path := filepath.Join(dir, name+".txt")
			if *updateGolden {
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to write it)", err)
			}
			if got != string(want) {
				t.Errorf("help of %q changed:\n--- got\n%s\n--- want (%s)\n%s", args, got, path, want)
			}
		})
	}
}
