package store

import (
	"context"
	"slices"
	"testing"
	"time"
)

// ListTodos filters by each state (written into its SQL as a literal), by an
// unknown one (bound, matching nothing), by queue and by cursor, newest first.
func TestListTodosByState(t *testing.T) {
	s := openTest(t, Options{})
	ctx := context.Background()
	add := func(q string) int64 { return addTodos(t, s, q, 1)[0] }
	claim := func(q string) Ack {
		t.Helper()
		td, ok, err := s.ClaimNext(ctx, "agent:a", []string{q}, time.Minute)
		if err != nil || !ok {
			t.Fatalf("claim in %s: %v %v", q, ok, err)
		}
		return Ack{ID: td.ID, Owner: "agent:a", LeaseSeq: td.LeaseSeq, Queues: []string{q}}
	}
	done, failed, claimed := add("c"), add("f"), add("k")
	if _, err := s.Complete(ctx, claim("c"), "ok"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Fail(ctx, claim("f"), "no", false); err != nil {
		t.Fatal(err)
	}
	claim("k")
	p1, p2, p3 := add("q"), add("r"), add("q")

	for _, c := range []struct {
		f    TodoFilter
		want []int64
	}{
		{TodoFilter{State: StatePending}, []int64{p3, p2, p1}},
		{TodoFilter{State: StatePending, Queues: []string{"q"}}, []int64{p3, p1}},
		{TodoFilter{State: StatePending, Before: p3}, []int64{p2, p1}},
		{TodoFilter{State: StatePending, Limit: 1}, []int64{p3}},
		{TodoFilter{State: StateClaimed}, []int64{claimed}},
		{TodoFilter{State: StateDone}, []int64{done}},
		{TodoFilter{State: StateFailed}, []int64{failed}},
		{TodoFilter{State: StateFailed, Queues: []string{"q", "r"}}, nil},
		{TodoFilter{State: "bogus' OR 1=1 --"}, nil},
		{TodoFilter{}, []int64{p3, p2, p1, claimed, failed, done}},
	} {
		got, err := s.ListTodos(ctx, c.f)
		if err != nil {
			t.Fatalf("%+v: %v", c.f, err)
		}
		var ids []int64
		for _, td := range got {
			if c.f.State != "" && td.State != c.f.State {
				t.Errorf("%+v: listed todo %d in state %s", c.f, td.ID, td.State)
			}
			ids = append(ids, td.ID)
		}
		if !slices.Equal(ids, c.want) {
			t.Errorf("%+v: listed %v, want %v", c.f, ids, c.want)
		}
	}
}
