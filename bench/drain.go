package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboardhq/switchboard/agent"
)

// maxConsecutiveErrors is how many failed calls in a row stop a draining agent.
const maxConsecutiveErrors = 20

// The drain's loops. The lease contract (agent/instructions.go) tells workers to
// call claim_next, then complete, and offers complete's claim_next: true to save a
// call; a worker that stops after such a complete leaves the todo it was handed
// claimed until its lease lapses. The bench drains with the contract's loop unless
// told otherwise.
const (
	LoopTwoCall = "two-call" // claim_next, then complete: two calls a todo
	LoopOneCall = "one-call" // complete with claim_next: true, which claims the next todo: one call a todo
)

// Loops lists the loops, the default first.
var Loops = []string{LoopTwoCall, LoopOneCall}

// loop is the drain's loop: t.Loop, or the default.
func (t Target) loop() string { return cmp.Or(t.Loop, LoopTwoCall) }

// loopSteps says what a loop's calls are.
func loopSteps(loop string) string {
	if loop == LoopOneCall {
		return "complete with claim_next: true"
	}
	return "claim_next → complete"
}

// drain has agents loop claim_next → complete until the queue has nothing left to
// claim, and reports the rate. The bench's own todos are all queued by then; any
// that an earlier, failed run left on the queue are completed with them.
func drain(ctx context.Context, t Target, agents int, timeout time.Duration, queued int64, r *Report) error {
	var before ProcUsage
	if t.PID > 0 && len(t.More) == 0 {
		before, _ = ReadProc(t.PID)
	}
	d, err := drainQueue(ctx, t, agents, timeout)
	if err != nil {
		return err
	}
	if before.CPUSec > 0 && d.done > 0 {
		if after, err := ReadProc(t.PID); err == nil {
			r.Drain.ServerCPUPerTodoMS = (after.CPUSec - before.CPUSec) * 1000 / float64(d.done)
		}
	}
	r.Drain.Protocol, r.Drain.Loop = cmp.Or(t.Protocol, agent.SessionProtocolVersion), t.loop()
	r.Drain.Agents, r.Drain.Todos, r.Drain.Errors = agents, d.done, d.errs
	r.Drain.PerSec = float64(d.done) / d.elapsed.Seconds()
	r.Drain.ClaimNext, r.Drain.Complete = d.claimLat.Summary(), d.completeLat.Summary()
	if d.stalled != nil {
		// Its elapsed time includes the wait, and the server may be stuck.
		return fmt.Errorf("bench: drain: %w (%s)", errNoAnswer("a call", timeout, d.stalled), leftBehind(t))
	}
	if d.ended != nil {
		return fmt.Errorf("bench: drain: the server ended an agent's session (%v): an endpoint holds at most "+
			"serve's --max-sessions-per-endpoint sessions (32 by default), and bench opens --agents + 1 on it (%s)",
			d.ended, leftBehind(t))
	}
	if d.done >= queued || ctx.Err() != nil {
		return nil
	}
	// A rate would be meaningless: the agents stopped, or someone else took the
	// bench's todos.
	if f := d.failures(); f != "" {
		return fmt.Errorf("bench: the drain completed %d todos, fewer than the %d this run queued: %s (%s)",
			d.done, queued, f, leftBehind(t))
	}
	return fmt.Errorf("bench: the drain completed %d todos, fewer than the %d this run queued: the queue ran dry "+
		"first (does another agent work queue %s?)", d.done, queued, t.Queue)
}

// sweep completes every todo still claimable on the queue (the doorbell phase's,
// on the queue bench was given), so that a run leaves it as it found it. It is not
// measured, and it does not fail the run: a failure is reported on progress and
// returned for the report.
func sweep(ctx context.Context, t Target, agents int, timeout time.Duration, progress func(string, ...any)) string {
	d, err := drainQueue(ctx, t, agents, timeout)
	if err == nil {
		if f := d.failures(); f != "" {
			err = errors.New(f)
		}
	}
	if err == nil {
		return ""
	}
	msg := fmt.Sprintf("could not complete the doorbell's todos: %s (%s)", strings.TrimPrefix(err.Error(), "bench: "),
		leftBehind(t))
	progress("bench: %s", msg)
	return msg
}

// leftBehind says what becomes of the todos a failed drain left on t's queue.
func leftBehind(t Target) string {
	lease := fmt.Sprintf("%d-second lease", benchLeaseSeconds)
	if t.loop() == LoopOneCall {
		lease += " (the endpoint's default lease for those a complete claimed)"
	}
	return fmt.Sprintf("the next run's drain completes those left on queue %s; any left claimed, once their "+
		"%s has ended and the reaper has returned them", t.Queue, lease)
}

// benchLeaseSeconds is the lease the bench's agents claim with: short, so that a
// todo a failed run left claimed is soon claimable again.
const benchLeaseSeconds = 30

// drained is what drainQueue did.
type drained struct {
	done, errs            int64
	lastErr               error
	stalled               error // the first call that timed out, if any did
	ended                 error // the first call the server refused for its ended session
	claimLat, completeLat *Latencies
	elapsed               time.Duration
}

// failures describes the failed calls, or is empty when none failed.
func (d drained) failures() string {
	if d.lastErr == nil {
		return ""
	}
	return fmt.Sprintf("%d calls failed, the last with: %v", d.errs, d.lastErr)
}

// drainQueue has agents loop claim_next → complete until claim_next finds nothing
// on the queue. The agents are lean MCP clients (see leanClient), so that as much
// of the machine as possible is left to the server being measured. Each call is
// bounded by timeout; an agent whose call outlasts it stops, as a server that has
// stopped answering one call will not answer the next.
func drainQueue(ctx context.Context, t Target, agents int, timeout time.Duration) (drained, error) {
	clients := make([]*leanClient, 0, agents)
	// Ended side by side: against a server that has stopped answering, each
	// close waits out its few seconds.
	defer func() {
		var wg sync.WaitGroup
		for _, c := range clients {
			wg.Go(c.close)
		}
		wg.Wait()
	}()
	for i := range agents {
		c, err := dialLean(ctx, t.on(i), timeout)
		if err != nil {
			return drained{}, err
		}
		clients = append(clients, c)
	}
	claim := drainClaimArgs{[]string{t.Queue}, benchLeaseSeconds}
	oneCall := t.loop() == LoopOneCall
	d := drained{claimLat: &Latencies{}, completeLat: &Latencies{}}
	var tally drainTally
	start := time.Now()
	var wg sync.WaitGroup
	for _, c := range clients {
		wg.Go(func() { drainAgent(ctx, c, claim, oneCall, &d, &tally) })
	}
	wg.Wait()
	d.elapsed = time.Since(start)
	d.done, d.errs = tally.done.Load(), tally.errs.Load()
	if e := tally.lastErr.Load(); e != nil {
		d.lastErr = *e
	}
	if e := tally.stalled.Load(); e != nil {
		d.stalled = *e
	}
	if e := tally.ended.Load(); e != nil {
		d.ended = *e
	}
	return d, nil
}

// The drain's calls and answers, as far as it reads them.
type (
	drainClaimed struct {
		Claimed  bool  `json:"claimed"`
		LeaseSeq int64 `json:"lease_seq"`
		Todo     struct {
			ID int64 `json:"id"`
		} `json:"todo"`
	}
	drainCompleted struct {
		Todo struct {
			State string `json:"state"`
		} `json:"todo"`
		Next *drainClaimed `json:"next"` // with claim_next: true
	}
	drainClaimArgs struct {
		Queues   []string `json:"queues"`
		LeaseTTL int      `json:"lease_ttl_seconds"`
	}
	drainCompleteArgs struct {
		TodoID    int64 `json:"todo_id"`
		LeaseSeq  int64 `json:"lease_seq"`
		ClaimNext bool  `json:"claim_next,omitempty"`
	}
)

// drainTally is what the drain's agents count together.
type drainTally struct {
	done, errs              atomic.Int64
	lastErr, stalled, ended atomic.Pointer[error]
}

// drainAgent is one agent of the drain: claim_next → complete until the queue is
// empty, ctx ends or its calls keep failing. With oneCall each complete claims the
// next todo; claim_next is called only for the first todo, and whenever a
// complete did not hand one over (an empty queue, or a claim that failed: it says
// so, and claim_next then tells which).
func drainAgent(ctx context.Context, c *leanClient, claim drainClaimArgs, oneCall bool, d *drained, tally *drainTally) {
	// An agent whose calls keep failing (say, its session was ended) stops
	// rather than spin; every failure is counted.
	failed := 0
	fail := func(err error) bool {
		tally.errs.Add(1)
		tally.lastErr.Store(&err)
		failed++
		if stalledCall(ctx, err) {
			tally.stalled.CompareAndSwap(nil, &err)
			return false
		}
		if se := (*sessionEnded)(nil); errors.As(err, &se) {
			tally.ended.CompareAndSwap(nil, &err) // every later call would be refused too
			return false
		}
		return failed < maxConsecutiveErrors
	}
	var handed *drainClaimed // the todo the last complete claimed
	for ctx.Err() == nil {
		cl := handed
		if handed = nil; cl == nil {
			t0 := time.Now()
			got, err := leanCall[drainClaimed](ctx, c, "claim_next", claim)
			if err != nil {
				if !fail(err) {
					return
				}
				continue
			}
			d.claimLat.Add(time.Since(t0))
			cl = got
		}
		if !cl.Claimed || cl.Todo.ID == 0 {
			return // nothing claimable: the queue is drained
		}
		t1 := time.Now()
		co, err := leanCall[drainCompleted](ctx, c, "complete", drainCompleteArgs{cl.Todo.ID, cl.LeaseSeq, oneCall})
		if err == nil && co.Todo.State != "done" {
			err = fmt.Errorf("complete: todo %d is %q, not done", cl.Todo.ID, co.Todo.State)
		}
		if err != nil {
			if !fail(err) {
				return
			}
			continue
		}
		d.completeLat.Add(time.Since(t1))
		tally.done.Add(1)
		failed = 0
		if co.Next != nil && co.Next.Claimed {
			handed = co.Next
		}
	}
}
