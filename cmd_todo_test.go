package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/store"
)

// todo retry puts dead letters back: named ones (reporting those it could not), or
// every one on a queue.
func TestTodoRetry(t *testing.T) {
	db := filepath.Join(t.TempDir(), "sb.db")
	ctx := context.Background()
	st := openRW(t, db)
	var dead []int64
	for _, q := range []string{"a", "a", "a", "b"} {
		td, err := st.AddTodo(ctx, store.NewTodo{Queue: q, Payload: "x", MaxAttempts: 1})
		if err == nil {
			_, err = st.Claim(ctx, store.Ack{ID: td.ID, Owner: "agent:bot"}, time.Hour)
		}
		if err == nil {
			_, err = st.Fail(ctx, store.Ack{ID: td.ID, Owner: "agent:bot"}, "boom", true)
		}
		if err != nil {
			t.Fatal(err)
		}
		dead = append(dead, td.ID)
	}
	id := func(i int) string { return strconv.FormatInt(dead[i], 10) }

	code, out, errs := cli(t, "", "todo", "retry", id(0), "999", "--db", db)
	if code != 1 || !strings.Contains(out, "todo "+id(0)+" is back on a") ||
		!strings.Contains(errs, "1 of 2 not retried") || !strings.Contains(errs, "todo 999") {
		t.Fatalf("retry %s 999: exit %d, %q %q", id(0), code, out, errs)
	}
	// --error picks the dead letters that failed with exactly that error: none here.
	code, out, errs = cli(t, "", "todo", "retry", "--all-failed", "--error", "no such error", "--db", db)
	if code != 0 || !strings.Contains(out, "no failed todos on every queue with error \"no such error\": nothing to retry") {
		t.Fatalf("retry --all-failed --error: exit %d, %q %q", code, out, errs)
	}
	code, out, errs = cli(t, "", "todo", "retry", "--all-failed", "--queue", "b", "--error", "boom", "--db", db)
	if code != 0 || !strings.Contains(out, "1 failed todo on b with error \"boom\" is back on its queue") {
		t.Fatalf("retry --all-failed --queue b --error boom: exit %d, %q %q", code, out, errs)
	}
	code, out, errs = cli(t, "", "todo", "retry", "--all-failed", "--queue", "a", "--json", "--db", db)
	var got struct {
		Retried int    `json:"retried"`
		Queue   string `json:"queue"`
	}
	if err := json.Unmarshal([]byte(out), &got); code != 0 || err != nil || got.Retried != 2 || got.Queue != "a" {
		t.Fatalf("retry --all-failed --queue a: exit %d, %q %q", code, out, errs)
	}
	code, out, errs = cli(t, "", "todo", "retry", "--db", db, "--all-failed")
	if code != 0 || !strings.Contains(out, "no failed todos on every queue: nothing to retry") {
		t.Fatalf("retry --all-failed: exit %d, %q %q", code, out, errs)
	}

	for _, i := range dead {
		td, err := st.Todo(ctx, i)
		if err != nil || td.State != store.StatePending || td.Attempts != 0 {
			t.Fatalf("todo %d after the retries: %+v, %v", i, td, err)
		}
	}

	for _, args := range [][]string{
		{"todo", "retry"},
		{"todo", "retry", "1", "--all-failed"},
		{"todo", "retry", "1", "--queue", "a"},
		{"todo", "retry", "1", "--error", "boom"},
		{"todo", "retry", "x"},
		{"todo", "retry", "--all-failed", "--queue", "no spaces"},
	} {
		if code, _, errs := cli(t, "", append(args, "--db", db)...); code != 2 || errs == "" {
			t.Fatalf("%q: exit %d, %q; want a usage error", args, code, errs)
		}
	}
	// A mistyped --db is reported, not created: a new database has nothing to retry.
	typo := filepath.Join(t.TempDir(), "typo.db")
	if code, out, errs := cli(t, "", "todo", "retry", "--all-failed", "--db", typo); code != 1 || !strings.Contains(errs, "no database") {
		t.Fatalf("retry on a mistyped --db: exit %d, %q %q", code, out, errs)
	}
	if _, err := os.Stat(typo); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("retry on a mistyped --db made %s (%v)", typo, err)
	}
}

// todo list says when there are more rows than it shows, on stderr, and --before
// pages to them; stdout stays the rows.
func TestTodoListPages(t *testing.T) {
	db := filepath.Join(t.TempDir(), "sb.db")
	st := openRW(t, db)
	var ids []int64
	for range 5 {
		td, err := st.AddTodo(t.Context(), store.NewTodo{Queue: "q", Payload: "x"})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, td.ID)
	}
	code, out, errs := cli(t, "", "todo", "list", "--db", db, "--limit", "2")
	if code != 0 || strings.Count(out, "\n") != 3 || !strings.Contains(errs, fmt.Sprintf("--before %d", ids[3])) {
		t.Fatalf("first page: exit %d\n%s%s", code, out, errs)
	}
	code, out, errs = cli(t, "", "todo", "list", "--db", db, "--limit", "2", "--before", fmt.Sprint(ids[1]), "--json")
	var rows []store.Todo
	if err := json.Unmarshal([]byte(out), &rows); code != 0 || err != nil || len(rows) != 1 || rows[0].ID != ids[0] || errs != "" {
		t.Fatalf("last page: exit %d, %v %+v %q", code, err, rows, errs)
	}
	if code, _, errs := cli(t, "", "todo", "list", "--db", db); code != 0 || errs != "" {
		t.Fatalf("everything on one page: exit %d, %q", code, errs)
	}
}

// An empty list says so in a sentence rather than print a header alone.
func TestEmptyListsSaySo(t *testing.T) {
	db := filepath.Join(t.TempDir(), "sb.db")
	openRW(t, db)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"todo", "list", "--state", "failed", "--queue", "q"}, "no failed todos on q\n"},
		{[]string{"todo", "list", "--before", "7"}, "no todos older than 7\n"},
		{[]string{"endpoint", "list"}, "no live endpoints (--all lists revoked ones too)\n"},
		{[]string{"webhook", "list", "--all"}, "no webhooks yet: switchboard webhook create --source S --queue Q makes one\n"},
	} {
		if code, out, errs := cli(t, "", append(c.args, "--db", db)...); code != 0 || out != c.want {
			t.Errorf("%q: exit %d, %q %q; want %q", c.args, code, out, errs, c.want)
		}
	}
}

// At the largest --limit, more todos than it shows are still said to be there:
// the store lists at most 1000, so the one more row that tells is not among them.
func TestTodoListAtTheLargestLimitSaysThereAreMore(t *testing.T) {
	db := filepath.Join(t.TempDir(), "sb.db")
	st := openRW(t, db)
	if err := st.SeedTodosForBench(t.Context(), "q", 1001, "x"); err != nil {
		t.Fatal(err)
	}
	code, out, errs := cli(t, "", "todo", "list", "--db", db, "--limit", "1000", "--json")
	var rows []store.Todo
	if err := json.Unmarshal([]byte(out), &rows); code != 0 || err != nil || len(rows) != 1000 ||
		!strings.Contains(errs, fmt.Sprintf("--before %d", rows[999].ID)) {
		t.Fatalf("--limit 1000 of 1001: exit %d, %d rows (%v), stderr %q", code, len(rows), err, errs)
	}
	code, _, errs = cli(t, "", "todo", "list", "--db", db, "--limit", "1000", "--before", fmt.Sprint(rows[0].ID))
	if code != 0 || errs != "" {
		t.Fatalf("--limit 1000 of exactly 1000: exit %d, stderr %q", code, errs)
	}
}
