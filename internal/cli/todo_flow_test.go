package cli

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/store"
)

// todo add's flow control: a key, a priority, a delay, coalescing; bad values
// are refused with the reason and add nothing.
func TestTodoAddFlowControl(t *testing.T) {
	db := filepath.Join(t.TempDir(), "sb.db")
	code, out, errs := cli(t, "", "todo", "add", "--queue", "prs", "--payload", "v1", "--key", "octo/repo#42",
		"--coalesce", "--priority", "5", "--json", "--db", db)
	var first store.Todo
	if err := json.Unmarshal([]byte(out), &first); code != 0 || err != nil || first.Key != "octo/repo#42" || first.Priority != 5 {
		t.Fatalf("add --key --priority: exit %d, %q %q (%v)", code, out, errs, err)
	}
	code, out, errs = cli(t, "", "todo", "add", "--queue", "prs", "--payload", "v2", "--key", "octo/repo#42",
		"--coalesce", "--db", db)
	if want := "folded into todo " + itoa(first.ID) + " on prs (pending; coalesced 1)"; code != 0 || !strings.Contains(out, want) {
		t.Fatalf("second add --coalesce: exit %d, %q %q, want %q", code, out, errs, want)
	}
	code, out, errs = cli(t, "", "todo", "add", "--queue", "prs", "--payload", "later", "--delay", "10m", "--json", "--db", db)
	var later store.Todo
	if err := json.Unmarshal([]byte(out), &later); code != 0 || err != nil ||
		later.AvailableAt.Sub(later.CreatedAt) != 10*time.Minute {
		t.Fatalf("add --delay 10m: exit %d, %q %q (%v)", code, out, errs, err)
	}
	for _, bad := range [][]string{
		{"--key", strings.Repeat("k", store.MaxKeyBytes+1)},
		{"--priority", "5000"},
		{"--delay", "-1s"},
		{"--coalesce"},
		{"--key", "k", "--debounce", "1m"},
	} {
		args := append([]string{"todo", "add", "--queue", "prs", "--payload", "x", "--db", db}, bad...)
		code, out, errs = cli(t, "", args...)
		if code != 2 || out != "" || errs == "" {
			t.Errorf("todo add %v: exit %d, %q %q, want a usage error", bad, code, out, errs)
		}
	}
	st := openRW(t, db)
	todos, err := st.ListTodos(context.Background(), store.TodoFilter{})
	if err != nil || len(todos) != 2 {
		t.Fatalf("%d todos (%v), want the folded one and the delayed one", len(todos), err)
	}
}
