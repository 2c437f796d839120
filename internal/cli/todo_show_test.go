package cli

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/store"
)

// todo show of bytes made to be expensive to indent (deep nesting, a megabyte)
// prints a bounded text: the nesting as it came, the megabyte cut, and says so.
func TestTodoShowBoundsHostileBytes(t *testing.T) {
	db := filepath.Join(t.TempDir(), "sb.db")
	st := openRW(t, db)
	ctx := t.Context()
	nest := func(depth int) string { return strings.Repeat("[", depth) + strings.Repeat("]", depth) }
	payload, result := nest(10_000), nest(30_000)+strings.Repeat(" ", 1<<20)
	td, err := st.AddTodo(ctx, store.NewTodo{Queue: "q", Payload: payload})
	if err == nil {
		td, err = st.Claim(ctx, store.Ack{ID: td.ID, Owner: "agent:bot"}, time.Minute)
	}
	if err == nil {
		_, err = st.Complete(ctx, store.Ack{ID: td.ID, Owner: "agent:bot", LeaseSeq: td.LeaseSeq}, result)
	}
	if err != nil {
		t.Fatal(err)
	}
	code, out, errs := cli(t, "", "todo", "show", fmt.Sprint(td.ID), "--db", db)
	if code != 0 {
		t.Fatalf("show: exit %d, %s", code, errs)
	}
	// The result's first 256 KiB and the payload whole, each on a line of its own.
	if len(out) > 400<<10 {
		t.Fatalf("show printed %d bytes for a %d-byte payload and a %d-byte result", len(out), len(payload), len(result))
	}
	for _, want := range []string{"\n  " + payload + "\n", "result:     " + nest(30_000),
		fmt.Sprintf("(only the first %d of %d bytes are shown: --json prints it whole)", 256<<10, len(result))} {
		if !strings.Contains(out, want) {
			t.Errorf("show lacks %.60q…", want)
		}
	}
}
