package store

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/internal/testkit"
)

// A key freed in another process (its front completed, cancelled) rings this
// process's agents for the key's next todo, through the watch, once; a key
// freed here rings at the commit and not again through the watch. On
// PostgreSQL the complete is one pipelined statement (pgKeyNext), the cancel
// a transaction (keyEnded): both are covered.
func TestAKeyFreedInAnotherProcessRingsHere(t *testing.T) {
	ctx := context.Background()
	serveSide, other := twoProcesses(t)
	_, expect := recordRings(t, serveSide, func(c TodoChange) string { return c.Cause + ":" + strconv.FormatInt(c.ID, 10) })
	ids := addKeyedTodos(t, serveSide, "prs", "octo/repo#42", 4)
	claim := func(s *Store, want int64) Todo {
		t.Helper()
		td, ok, err := s.ClaimNext(ctx, "agent:1", []string{"prs"}, time.Minute)
		if err != nil || !ok || td.ID != want {
			t.Fatalf("claim: %v %v %+v, want todo %d", ok, err, td, want)
		}
		return td
	}
	front := claim(serveSide, ids[0])
	watch := watchOn(t, serveSide)
	expect("the adds", "add:"+strconv.FormatInt(ids[0], 10))

	if _, err := other.Complete(ctx, Ack{ID: front.ID, Owner: "agent:1", LeaseSeq: front.LeaseSeq}, ""); err != nil {
		t.Fatal(err)
	}
	expect("a foreign complete before the watch looked")
	watch.check(ctx)
	expect("the watch after a foreign complete", "key_free:"+strconv.FormatInt(ids[1], 10))

	second := claim(serveSide, ids[1])
	if _, err := serveSide.Complete(ctx, Ack{ID: second.ID, Owner: "agent:1", LeaseSeq: second.LeaseSeq}, ""); err != nil {
		t.Fatal(err)
	}
	expect("an own complete", "key_free:"+strconv.FormatInt(ids[2], 10))
	watch.check(ctx)
	expect("the watch after an own complete")

	if _, err := other.CancelTodo(ctx, ids[2], "human:cli"); err != nil {
		t.Fatal(err)
	}
	watch.check(ctx)
	expect("the watch after a foreign cancel", "key_free:"+strconv.FormatInt(ids[3], 10))
	claim(other, ids[3])
}

// A key's next todo whose available_at came (a debounce) by the time another
// process's ring arrives rings as a freed key, as the scan announces it, not
// as the end of a retry's backoff (the ring's timing of a retry is for those).
func TestAKeyFreedRingsAsAKeyFreeWhenItsTimeCame(t *testing.T) {
	ctx := context.Background()
	url := testkit.PostgresURL(t)
	serveSide, _ := openPair(t, url)
	var rang []string
	serveSide.OnTodoChange(func(c TodoChange) { rang = append(rang, c.Cause+":"+strconv.FormatInt(c.ID, 10)) })
	if _, err := serveSide.newForeignWatch(ctx, serveSide.rdb); err != nil {
		t.Fatal(err)
	}
	defer serveSide.own.stop()
	var schema string
	if err := serveSide.rdb.QueryRowContext(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
		t.Fatal(err)
	}
	entry := ringEntry{ID: 987654, Queue: "prs", Source: "github", State: StatePending, Cause: "key_free",
		AuditID: 876543, ClaimableAt: ms(time.Now().Add(-time.Second))}
	b, err := json.Marshal([]ringEntry{entry})
	if err != nil {
		t.Fatal(err)
	}
	serveSide.ringFrom(ringPrefix+schema+"\n"+string(b), schema)
	if want := []string{"key_free:987654"}; !slices.Equal(rang, want) {
		t.Fatalf("rang %q, want %q", rang, want)
	}
}
