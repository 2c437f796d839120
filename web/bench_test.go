package web

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/internal/testkit/teststore"
	"github.com/switchboardhq/switchboard/store"
)

// BenchmarkBoard100k renders the board over a database of 100,000 todos in eight
// queues, most of them done (as a queue that has run for a while looks), some pending,
// claimed and dead-lettered. The goal is under 100 ms per page on a small machine.
//
//	go test ./web -run '^$' -bench Board100k -benchtime 50x
func BenchmarkBoard100k(b *testing.B) {
	ctx := context.Background()
	st := teststore.Open(b, store.Options{Synchronous: store.SyncNormal})
	h, err := st.CreateOperator(ctx, "ana", testPassword, "bench")
	if err != nil {
		b.Fatal(err)
	}
	const total, queues = 100_000, 8
	seedTodos(b, st, total, queues)

	ui := New(st, Options{Logger: quietLog})
	defer ui.Close()
	handler := ui.Handler()
	token, _, err := st.CreateWebSession(ctx, h.ID, time.Hour, "bench", "")
	if err != nil {
		b.Fatal(err)
	}
	cookie := &http.Cookie{Name: sessionCookie, Value: token}
	// A cursor in the middle of the table, for a deep page.
	mid, err := st.ListTodos(ctx, store.TodoFilter{Before: total / 2, Limit: 1})
	if err != nil || len(mid) == 0 {
		b.Fatalf("find a middle todo: %v", err)
	}

	for _, bc := range []struct{ name, path string }{
		{"all", "/"},
		{"state=pending", "/?state=pending"},
		{"state=failed", "/?state=failed"},
		{"queue", "/?queue=queue-3"},
		{"queue+state", "/?queue=queue-3&state=claimed"},
		{"state=done", "/?state=done"},
		{"rare-queue", "/?queue=rare"},
		{"deep-page", fmt.Sprintf("/?before=%d", mid[0].ID)},
		{"live-counts", "/?fragment=counts"},
		{"live-rows", "/?fragment=rows"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				req := httptest.NewRequest(http.MethodGet, bc.path, nil)
				req.AddCookie(cookie)
				rec := httptest.NewRecorder()
				handler.ServeHTTP(rec, req)
				if rec.Code != http.StatusOK {
					b.Fatalf("status %d", rec.Code)
				}
			}
		})
	}
}

// seedTodos adds n todos over the queues through the store, many writers at once so
// the group commit batches them, then works most of them: 90% done, 1% dead-lettered,
// 0.5% claimed, the rest pending.
func seedTodos(b *testing.B, st *store.Store, n, queues int) {
	b.Helper()
	ctx := context.Background()
	// A small, old queue: listing it must not walk the 100,000 newer todos.
	for i := range 5 {
		if _, err := st.AddTodo(ctx, store.NewTodo{Queue: "rare", Payload: fmt.Sprintf(`{"n":%d}`, i), CreatedBy: "bench"}); err != nil {
			b.Fatal(err)
		}
	}
	const workers = 64
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += workers {
				q := fmt.Sprintf("queue-%d", i%queues)
				if _, err := st.AddTodo(ctx, store.NewTodo{Queue: q, MaxAttempts: 1, CreatedBy: "bench",
					Payload: fmt.Sprintf(`{"n":%d,"kind":"benchmark"}`, i)}); err != nil {
					errs <- err
					return
				}
				// Work the todo right away, so the states spread over the table.
				switch {
				case i%1000 < 900:
					finish(ctx, st, q, "done", errs)
				case i%1000 < 910:
					finish(ctx, st, q, "failed", errs)
				case i%1000 < 915:
					finish(ctx, st, q, "claimed", errs)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
}

func finish(ctx context.Context, st *store.Store, q, state string, errs chan<- error) {
	owner := "agent:bench-" + q
	t, ok, err := st.ClaimNext(ctx, owner, []string{q}, time.Hour)
	if err != nil || !ok {
		errs <- fmt.Errorf("claim in %s: ok=%v err=%v", q, ok, err)
		return
	}
	ack := store.Ack{ID: t.ID, Owner: owner, LeaseSeq: t.LeaseSeq}
	switch state {
	case "done":
		_, err = st.Complete(ctx, ack, "ok")
	case "failed":
		_, err = st.Fail(ctx, ack, "benchmark failure", false)
	}
	if err != nil {
		errs <- err
	}
}
