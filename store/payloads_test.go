package store

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// A payload is bytes, whatever the database: one that is not UTF-8, has a NUL,
// or starts as PostgreSQL's mark for an encoded payload does reads back, claimed
// or loaded, exactly as it was added; so does a webhook body that is not UTF-8.
func TestPayloadsReadBackByteForByte(t *testing.T) {
	s := openTest(t, Options{})
	ctx := context.Background()
	want := map[int64]string{}
	for _, p := range []string{"plain", "h\u00e9llo w\u00f6rld", "\xff\xfeA\x00\xc3", "nul\x00inside",
		pgBinaryMark + "aGk=", "\uFDD0 not the mark", pgBinaryMark + "not base64!"} {
		td, err := s.AddTodo(ctx, NewTodo{Queue: "q", Payload: p})
		if err != nil {
			t.Fatalf("add %q: %v", p, err)
		}
		want[td.ID] = p
	}
	wh, err := s.CreateWebhook(ctx, NewWebhook{SourceType: "generic", Queue: "q", Secret: "k", CreatedBy: "human:1"})
	if err != nil {
		t.Fatal(err)
	}
	body := "\x89PNG\r\n\x1a\n\x00\xff"
	d, err := s.RecordDelivery(ctx, NewDelivery{WebhookID: wh.ID, DeliveryID: "d1", TrustMode: "signed", Body: []byte(body)})
	if err != nil {
		t.Fatal(err)
	}
	want[d.TodoID] = body
	for id, p := range want {
		if got, err := s.Todo(ctx, id); err != nil || got.Payload != p || got.PayloadSize != len(p) {
			t.Errorf("todo %d: payload %q size %d (err %v), want %q", id, got.Payload, got.PayloadSize, err, p)
		}
	}
	for range want {
		c, ok, err := s.ClaimNext(ctx, "agent:a", []string{"q"}, time.Minute)
		if err != nil || !ok || c.Payload != want[c.ID] {
			t.Fatalf("claimed todo %d with payload %q (ok %v, err %v), want %q", c.ID, c.Payload, ok, err, want[c.ID])
		}
	}
}

// Payloads live outside the todos row; every way of reading a todo in full must
// still see them, and pruning must take them along.
func TestPayloadsAreStoredOnceAndFollowTheTodo(t *testing.T) {
	clock := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	s := openTest(t, Options{Now: func() time.Time { return clock }})
	ctx := context.Background()

	manual, err := s.AddTodo(ctx, NewTodo{Queue: "q", Payload: `{"manual":true}`})
	if err != nil {
		t.Fatal(err)
	}
	wh, err := s.CreateWebhook(ctx, NewWebhook{SourceType: "generic", Queue: "q", Secret: "k", CreatedBy: "human:1"})
	if err != nil {
		t.Fatal(err)
	}
	body := `{"from":"a webhook"}`
	d, err := s.RecordDelivery(ctx, NewDelivery{WebhookID: wh.ID, DeliveryID: "d1", TrustMode: "signed", Body: []byte(body)})
	if err != nil {
		t.Fatal(err)
	}
	for id, want := range map[int64]string{manual.ID: `{"manual":true}`, d.TodoID: body} {
		got, err := s.Todo(ctx, id)
		if err != nil || got.Payload != want || got.PayloadSize != len(want) {
			t.Fatalf("todo %d: payload %q size %d (err %v), want %q", id, got.Payload, got.PayloadSize, err, want)
		}
	}
	// The webhook's body is stored once: with its event, not again for the todo.
	var copies int
	s.rdb.QueryRow(s.q(`SELECT count(*) FROM todo_payloads WHERE payload = ?`), body).Scan(&copies)
	if copies != 0 {
		t.Fatalf("the delivery's body was stored %d extra times", copies)
	}
	ev, err := s.WebhookEvent(ctx, d.EventID)
	if err != nil || ev.TodoID != d.TodoID {
		t.Fatalf("event %d links todo %d (err %v), want %d", d.EventID, ev.TodoID, err, d.TodoID)
	}

	// Claims return the payload from either place.
	seen := map[int64]string{}
	for i := 0; i < 2; i++ {
		c, ok, err := s.ClaimNext(ctx, "agent:a", []string{"q"}, time.Minute)
		if err != nil || !ok {
			t.Fatalf("claim: ok=%v err=%v", ok, err)
		}
		seen[c.ID] = c.Payload
		if _, err := s.Complete(ctx, Ack{ID: c.ID, Owner: "agent:a", LeaseSeq: c.LeaseSeq}, "done"); err != nil {
			t.Fatal(err)
		}
	}
	if seen[manual.ID] != `{"manual":true}` || seen[d.TodoID] != body {
		t.Fatalf("claimed payloads %v", seen)
	}

	// Pruning done todos deletes their payload rows; the event stays, unlinked.
	// (A newer todo is there because pruning always keeps the newest.)
	newest, err := s.AddTodo(ctx, NewTodo{Queue: "q"})
	if err != nil {
		t.Fatal(err)
	}
	clock = clock.Add(48 * time.Hour)
	if n, err := s.PruneDone(ctx, clock.Add(-time.Hour)); err != nil || n != 2 {
		t.Fatalf("pruned %d (err %v), want 2", n, err)
	}
	var left int
	s.rdb.QueryRow(s.q(`SELECT count(*) FROM todo_payloads WHERE todo_id != ?`), newest.ID).Scan(&left)
	if left != 0 {
		t.Fatalf("%d payload rows outlived their todos", left)
	}
	if ev, err := s.WebhookEvent(ctx, d.EventID); err != nil || ev.TodoID != 0 {
		t.Fatalf("after prune the event links todo %d (err %v)", ev.TodoID, err)
	}
}

// queue_counts is kept by triggers; after every kind of transition it must agree
// with a count over the todos themselves.
func TestQueueCountsFollowEveryTransition(t *testing.T) {
	clock := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	s := openTest(t, Options{Now: func() time.Time { return clock }})
	ctx := context.Background()
	check := func(step string) {
		t.Helper()
		got, err := s.QueueCounts(ctx)
		if err != nil {
			t.Fatal(err)
		}
		rows, err := s.rdb.Query(`SELECT queue, state, count(*) FROM todos GROUP BY queue, state ORDER BY queue, state`)
		if err != nil {
			t.Fatal(err)
		}
		var want []QueueCount
		for rows.Next() {
			var c QueueCount
			rows.Scan(&c.Queue, &c.State, &c.Count)
			want = append(want, c)
		}
		rows.Close()
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("%s: QueueCounts = %v, todos say %v", step, got, want)
		}
	}
	for i := 0; i < 6; i++ {
		s.AddTodo(ctx, NewTodo{Queue: []string{"a", "b"}[i%2], Payload: "x", MaxAttempts: 1})
	}
	s.SeedTodosForBench(ctx, "c", 50, "y")
	check("after adds")
	var claimed []Todo
	for i := 0; i < 4; i++ {
		td, ok, err := s.ClaimNext(ctx, "agent:w", []string{"a", "b"}, time.Minute)
		if err != nil || !ok {
			t.Fatal(ok, err)
		}
		claimed = append(claimed, td)
	}
	check("after claims")
	s.Complete(ctx, Ack{ID: claimed[0].ID, Owner: "agent:w", LeaseSeq: claimed[0].LeaseSeq}, "")
	s.Fail(ctx, Ack{ID: claimed[1].ID, Owner: "agent:w", LeaseSeq: claimed[1].LeaseSeq}, "boom", false)
	s.Release(ctx, Ack{ID: claimed[2].ID, Owner: "agent:w", LeaseSeq: claimed[2].LeaseSeq})
	check("after complete, fail, release")
	s.Retry(ctx, claimed[1].ID, "human:1")
	clock = clock.Add(time.Hour)
	if r, err := s.ReapExpired(ctx); err != nil || r.DeadLettered != 1 {
		t.Fatalf("reap: %+v %v", r, err)
	}
	check("after retry and reap")
	if n, err := s.PruneDone(ctx, clock.Add(time.Minute)); err != nil || n != 1 {
		t.Fatalf("prune: %d %v", n, err)
	}
	check("after prune")
}
