package store

import (
	"context"
	"testing"
	"time"
)

// A todo that another process adds (`switchboard todo add` while serve runs) is
// counted as added on the charts even when serve's own worker claimed it (a
// worker polling claim_next) before the foreign watch looked (every 500 ms).
func TestChartsCountAForeignAddClaimedBeforeTheWatchLooks(t *testing.T) {
	ctx := context.Background()
	serveSide, cli := twoProcesses(t)
	charts, err := serveSide.NewChartSampler(ctx, ChartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	watch := watchOn(t, serveSide)

	if _, err := cli.AddTodo(ctx, NewTodo{Queue: "inbox", Payload: "{}", CreatedBy: "human:1"}); err != nil {
		t.Fatal(err)
	}
	td, ok, err := serveSide.ClaimNext(ctx, "agent:w", []string{"inbox"}, time.Minute)
	if err != nil || !ok {
		t.Fatalf("claim_next: %v %v", ok, err)
	}
	if _, err := serveSide.Complete(ctx, Ack{ID: td.ID, Owner: "agent:w", LeaseSeq: td.LeaseSeq, Queues: []string{"inbox"}}, "ok"); err != nil {
		t.Fatal(err)
	}
	watch.check(ctx)
	if err := charts.Sample(ctx); err != nil {
		t.Fatal(err)
	}
	qm, err := serveSide.QueueMinutes(ctx, "inbox", time.Now().Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	var added, completed int64
	for _, m := range qm {
		added, completed = added+m.Added, completed+m.Completed
	}
	if added != 1 || completed != 1 {
		t.Fatalf("inbox chart: %d added, %d completed; want 1 and 1 (the CLI's todo, done by serve's worker)", added, completed)
	}
}

// serve stopping (a deploy, SIGTERM) drops what the sampler tallied since the last
// minute's end: Run returns on ctx.Done without writing it, and a restart starts
// from nothing, so every restart leaves a hole of up to a minute in the charts.
func TestChartSamplerKeepsTheLastMinuteAtShutdown(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, Options{})
	charts, err := s.NewChartSampler(ctx, ChartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.AddTodo(ctx, NewTodo{Queue: "inbox", Payload: "{}", CreatedBy: "human:1"}); err != nil {
		t.Fatal(err)
	}
	stopped, stop := context.WithCancel(ctx)
	stop()
	charts.Run(stopped)
	qm, err := s.QueueMinutes(ctx, "inbox", time.Now().Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if len(qm) == 0 || qm[len(qm)-1].Added != 1 {
		t.Fatalf("inbox chart after shutdown: %+v, want the todo added before it", qm)
	}
}
