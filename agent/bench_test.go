package agent

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/internal/testkit"
	"github.com/switchboardhq/switchboard/store"
)

// Benchmarks run the real /mcp handler over HTTP on a real SQLite file with the
// durability serve uses by default (synchronous FULL). Run them with
//
//	go test -run '^$' -bench . -benchtime 2000x ./agent/
//
// The million-todo depth case seeds a million rows and is skipped under -short.
// SWITCHBOARD_BENCH_SYNC=NORMAL runs them with synchronous NORMAL.

// benchEnv uses synchronous FULL, serve's default, unless
// SWITCHBOARD_BENCH_SYNC=NORMAL asks for the fewer-fsyncs mode.
func benchEnv(b *testing.B, tweak ...func(*envConfig)) *env {
	sync := store.SyncFull
	if os.Getenv("SWITCHBOARD_BENCH_SYNC") == store.SyncNormal {
		sync = store.SyncNormal
	}
	return newEnv(b, append([]func(*envConfig){func(c *envConfig) { c.sync = sync }}, tweak...)...)
}

// claim_next + complete throughput with 1 and 8 agents working one queue.
// Each in a session of 2025-11-25 and as stateless 2026-07-28 requests; and, as
// "one-call", 8 agents whose loop is complete with claim_next=true. cpu-µs/todo
// is this process's CPU (server and clients both) per todo.
func BenchmarkClaimComplete(b *testing.B) {
	for _, c := range []struct {
		agents          int
		stateless, once bool
	}{{1, false, false}, {8, false, false}, {1, true, false}, {8, true, false}, {8, false, true}} {
		rev := SessionProtocolVersion
		if c.stateless {
			rev = statelessVersion
		}
		name := fmt.Sprintf("agents=%d/%s", c.agents, rev)
		if c.once {
			name += "/one-call"
		}
		b.Run(name, func(b *testing.B) {
			e := benchEnv(b)
			_, cred := e.endpoint("bench", []string{"inbox"}, nil)
			if err := e.st.SeedTodosForBench(context.Background(), "inbox", b.N, `{"n":1}`); err != nil {
				b.Fatal(err)
			}
			clients := make([]*agentClient, c.agents)
			for i := range clients {
				if c.stateless {
					clients[i] = e.dialStateless(cred)
				} else {
					clients[i] = e.dial(cred, false)
				}
				clients[i].unchecked = true
			}
			var wg sync.WaitGroup
			b.ResetTimer()
			before, cpu := e.st.WriterStats(), testkit.ProcessCPU(b)
			start := time.Now()
			for _, cl := range clients {
				wg.Go(func() {
					if err := benchWorker(cl, c.once); err != nil {
						b.Error(err)
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			elapsed := time.Since(start)
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "todos/s")
			b.ReportMetric(float64((testkit.ProcessCPU(b)-cpu).Microseconds())/float64(b.N), "cpu-µs/todo")
			after := e.st.WriterStats()
			b.ReportMetric(float64(after.Requests-before.Requests)/float64(max(1, after.Batches-before.Batches)), "writes/commit")
			// writer-busy near 1: the writer goroutine is the bottleneck; commit-share
			// is how much of the elapsed time it spent inside COMMIT.
			b.ReportMetric(float64(after.Busy-before.Busy)/float64(elapsed), "writer-busy")
			b.ReportMetric(float64(after.Commit-before.Commit)/float64(elapsed), "commit-share")
		})
	}
}

// benchWorker drains until nothing is claimable: claim_next then complete, or with
// once, claim_next then complete with claim_next=true for every later todo.
func benchWorker(c *agentClient, once bool) error {
	var claim claimResult
	res, err := c.call(VerbClaimNext, nil)
	if err != nil || res.IsError {
		return errFromResult("claim_next", res, err)
	}
	if err := decodeResult(res, &claim); err != nil {
		return err
	}
	for claim.Claimed {
		args := map[string]any{"todo_id": claim.Todo.ID, "lease_seq": claim.LeaseSeq}
		if once {
			args["claim_next"] = true
		}
		res, err = c.call(VerbComplete, args)
		if err != nil || res.IsError {
			return errFromResult("complete", res, err)
		}
		if once {
			var ack ackResult
			if err := decodeResult(res, &ack); err != nil {
				return err
			}
			if ack.Next == nil {
				return fmt.Errorf("complete with claim_next=true answered no next")
			}
			claim = *ack.Next
			continue
		}
		if res, err = c.call(VerbClaimNext, nil); err != nil || res.IsError {
			return errFromResult("claim_next", res, err)
		}
		claim = claimResult{}
		if err := decodeResult(res, &claim); err != nil {
			return err
		}
	}
	return nil
}

// Enqueue → doorbell: from the start of AddTodo (which returns after the commit)
// to the ring arriving at an attached client over its GET stream.
func BenchmarkDoorbellLatency(b *testing.B) {
	e := benchEnv(b)
	_, cred := e.endpoint("bench", []string{"inbox"}, nil)
	c := e.dial(cred, true)
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		td, err := e.st.AddTodo(context.Background(), store.NewTodo{Queue: "inbox", Payload: "{}"})
		if err != nil {
			b.Fatal(err)
		}
		want := strconv.FormatInt(td.ID, 10)
		for {
			n := <-c.notes
			if n.Method != ChannelMethod {
				continue
			}
			if meta, _ := n.Params.AdditionalFields["meta"].(map[string]any); meta["todo_id"] == want {
				break
			}
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(lat)
	pct := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) }
	b.ReportMetric(pct(0.50), "p50-µs")
	b.ReportMetric(pct(0.99), "p99-µs")
}

// The cost of claim_next must not grow with queue depth: one index probe per
// queue. Measured over MCP (what an agent sees) and at the store (the claim
// alone). The queue is topped up by b.N before each run, so it stays at depth.
func BenchmarkClaimNextDepth(b *testing.B) {
	for _, depth := range []int{1_000, 1_000_000} {
		if depth > 1_000 && testing.Short() {
			b.Logf("skipping depth %d under -short", depth)
			continue
		}
		e := benchEnv(b)
		_, cred := e.endpoint("bench", []string{"inbox"}, nil)
		if err := e.st.SeedTodosForBench(context.Background(), "inbox", depth, `{"n":1}`); err != nil {
			b.Fatal(err)
		}
		c := e.dial(cred, false)
		c.unchecked = true
		b.Run(fmt.Sprintf("mcp/pending=%d", depth), func(b *testing.B) {
			b.StopTimer()
			if err := e.st.SeedTodosForBench(context.Background(), "inbox", b.N, `{"n":1}`); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			for range b.N {
				var claim claimResult
				c.ok(b, VerbClaimNext, nil, &claim)
				if !claim.Claimed {
					b.Fatal("queue ran dry")
				}
			}
		})
		b.Run(fmt.Sprintf("store/pending=%d", depth), func(b *testing.B) {
			b.StopTimer()
			if err := e.st.SeedTodosForBench(context.Background(), "inbox", b.N, `{"n":1}`); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			for range b.N {
				if _, ok, err := e.st.ClaimNext(context.Background(), "agent:bench", []string{"inbox"}, time.Minute); err != nil || !ok {
					b.Fatalf("claim: %v %v", ok, err)
				}
			}
		})
	}
}

// Doorbell fan-out: one enqueue rings 100 attached sessions; the figure is the time
// until the last of them has heard it (and the first, for comparison).
func BenchmarkDoorbellFanout100(b *testing.B) {
	const sessions = 100
	// All on one endpoint, which may then hold that many.
	e := benchEnv(b, withSessionLimit(sessions))
	_, cred := e.endpoint("bench", []string{"inbox"}, nil)
	clients := make([]*agentClient, sessions)
	for i := range clients {
		clients[i] = e.dial(cred, true)
	}
	first := make([]time.Duration, 0, b.N)
	last := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		td, err := e.st.AddTodo(context.Background(), store.NewTodo{Queue: "inbox", Payload: "{}"})
		if err != nil {
			b.Fatal(err)
		}
		want := strconv.FormatInt(td.ID, 10)
		arrived := make(chan time.Duration, sessions)
		for _, c := range clients {
			go func() {
				for n := range c.notes {
					if meta, _ := n.Params.AdditionalFields["meta"].(map[string]any); n.Method == ChannelMethod && meta["todo_id"] == want {
						arrived <- time.Since(start)
						return
					}
				}
			}()
		}
		var lo, hi time.Duration
		timeout := time.After(10 * time.Second)
		for i := 0; i < sessions; i++ {
			select {
			case d := <-arrived:
				if i == 0 {
					lo = d
				}
				hi = d
			case <-timeout:
				b.Fatalf("only %d of %d sessions heard todo %s", i, sessions, want)
			}
		}
		first, last = append(first, lo), append(last, hi)
	}
	b.StopTimer()
	slices.Sort(first)
	slices.Sort(last)
	pct := func(l []time.Duration, p float64) float64 { return float64(l[int(p*float64(len(l)-1))].Microseconds()) }
	b.ReportMetric(pct(first, 0.50), "first-p50-µs")
	b.ReportMetric(pct(last, 0.50), "all100-p50-µs")
	b.ReportMetric(pct(last, 0.99), "all100-p99-µs")
}
