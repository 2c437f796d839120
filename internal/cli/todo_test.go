package cli

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
			td, err = st.Claim(ctx, store.Ack{ID: td.ID, Owner: "agent:bot"}, time.Hour)
		}
		if err == nil {
			_, err = st.Fail(ctx, store.Ack{ID: td.ID, Owner: "agent:bot", LeaseSeq: td.LeaseSeq}, "boom", true)
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
	if code != 0 || !strings.Contains(out, "no failed todos on any queue with error \"no such error\": nothing to retry") {
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
	if code != 0 || !strings.Contains(out, "no failed todos on any queue: nothing to retry") {
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

// todo show prints one todo whole, its payload indented when it is JSON and
// what agents and producers wrote escaped; --json gives it all, a binary
// payload base64.
func TestTodoShow(t *testing.T) {
	db := filepath.Join(t.TempDir(), "sb.db")
	st := openRW(t, db)
	ctx := t.Context()
	td, err := st.AddTodo(ctx, store.NewTodo{Queue: "q", Payload: `{"pr":42,"title":"fix"}`, MaxAttempts: 1})
	if err == nil {
		td, err = st.Claim(ctx, store.Ack{ID: td.ID, Owner: "agent:bot"}, time.Minute)
	}
	if err == nil {
		_, err = st.Fail(ctx, store.Ack{ID: td.ID, Owner: "agent:bot", LeaseSeq: td.LeaseSeq}, "exit 1: \x1b[31mred\x1b[0m", false)
	}
	if err != nil {
		t.Fatal(err)
	}
	code, out, errs := cli(t, "", "todo", "show", fmt.Sprint(td.ID), "--db", db)
	for _, want := range []string{fmt.Sprintf("todo %d on q: failed, attempts 1/1", td.ID), "last error: exit 1: \\u001b[31mred\\u001b[0m",
		"failed:     ", "payload (23 bytes):\n  {\n    \"pr\": 42,\n    \"title\": \"fix\"\n  }\n"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Fatalf("show: exit %d, want %q in\n%s%s", code, want, out, errs)
		}
	}
	if strings.Contains(out, "\x1b") {
		t.Fatal("show wrote an escape sequence to the terminal")
	}
	bin, err := st.AddTodo(ctx, store.NewTodo{Queue: "q", Payload: "\xff\xfe"})
	if err != nil {
		t.Fatal(err)
	}
	code, out, _ = cli(t, "", "todo", "show", fmt.Sprint(bin.ID), "--json", "--db", db)
	var got struct {
		ID       int64  `json:"id"`
		Payload  string `json:"payload"`
		Encoding string `json:"payload_encoding"`
	}
	if err := json.Unmarshal([]byte(out), &got); code != 0 || err != nil || got.ID != bin.ID || got.Payload != "//4=" || got.Encoding != "base64" {
		t.Fatalf("show --json of a binary payload: exit %d, %v %q", code, err, out)
	}
	if _, out, _ := cli(t, "", "todo", "show", fmt.Sprint(bin.ID), "--db", db); !strings.Contains(out, "not UTF-8 text: --json shows it base64") {
		t.Fatalf("show of a binary payload:\n%s", out)
	}
	if code, _, errs := cli(t, "", "todo", "show", "999", "--db", db); code != 1 || !strings.Contains(errs, "todo 999: not found") {
		t.Fatalf("show 999: exit %d, %q", code, errs)
	}
	if code, _, _ := cli(t, "", "todo", "show", "--db", db); code != 2 {
		t.Fatalf("show without an id: exit %d", code)
	}
}

// todo release hands a claimed todo back, whoever holds it, as the board does.
func TestTodoRelease(t *testing.T) {
	db := filepath.Join(t.TempDir(), "sb.db")
	st := openRW(t, db)
	ctx := t.Context()
	td, err := st.AddTodo(ctx, store.NewTodo{Queue: "q", Payload: "x"})
	if err == nil {
		_, err = st.Claim(ctx, store.Ack{ID: td.ID, Owner: "agent:gone"}, 24*time.Hour)
	}
	if err != nil {
		t.Fatal(err)
	}
	id := fmt.Sprint(td.ID)
	code, out, errs := cli(t, "", "todo", "release", id, "--db", db)
	if code != 0 || !strings.Contains(out, "todo "+id+" is pending again on q; the claim agent:gone held does not count as an attempt") {
		t.Fatalf("release: exit %d, %q %q", code, out, errs)
	}
	if got, err := st.Todo(ctx, td.ID); err != nil || got.State != store.StatePending || got.Attempts != 0 || got.Owner != "" {
		t.Fatalf("after release: %+v, %v", got, err)
	}
	if rows, _ := st.ListAudit(ctx, store.AuditFilter{Target: "todo:" + id}); rows[0].Action != "todo.release" || rows[0].Actor != "human:cli" {
		t.Fatalf("audit %+v", rows[0])
	}
	if code, _, errs := cli(t, "", "todo", "release", id, "--db", db); code != 1 || !strings.HasSuffix(strings.TrimSpace(errs), "it is pending, not claimed") {
		t.Fatalf("release of a pending todo: exit %d, %q", code, errs)
	}
	if code, _, errs := cli(t, "", "todo", "release", "999", "--db", db); code != 1 || !strings.Contains(errs, "todo 999: not found") {
		t.Fatalf("release 999: exit %d, %q", code, errs)
	}
}
