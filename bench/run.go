package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/switchboardhq/switchboard/agent"
	"github.com/switchboardhq/switchboard/ingest"
)

// Target is the Switchboard under test.
type Target struct {
	URL        string // base URL, e.g. http://127.0.0.1:8080
	Credential string // an endpoint credential with the webhook verbs and a ceiling of 2+ (generic, github)
	Queue      string // the queue the bench's webhooks feed; in the endpoint's scope
	PID        int    // the server's process id when it runs on this machine (0 = unknown)
}

// Config says how hard to push.
type Config struct {
	Deliveries int           // signed deliveries in the ingest phase
	Senders    int           // concurrent senders
	Agents     int           // concurrent agents draining over MCP
	Doorbells  int           // todos enqueued one at a time in the doorbell phase
	BodyBytes  int           // size of each delivery body (~2 KB)
	PacedFor   time.Duration // how long the half-rate ingest run lasts
	Floor      func() (float64, error)
	Progress   io.Writer // a progress line per phase; nil for none
	// CallTimeout bounds each delivery and each MCP call (default 30 s). A call
	// that outlasts it ends the phase it is in with an error, rather than leave
	// the run waiting on a server that has stopped answering.
	CallTimeout time.Duration
}

// defaultCallTimeout is Config.CallTimeout's default: far above any answer a
// working server gives under the bench's load, which is in milliseconds.
const defaultCallTimeout = 30 * time.Second

// Report is every figure bench prints.
type Report struct {
	FloorCommitsPerSec float64 `json:"floor_commits_per_sec"`
	// FloorRuns are the floor measured before the phases and after them; the
	// floor is the higher, so a disk still busy writing back the phases' data
	// cannot flatter the ratios.
	FloorRuns []float64 `json:"floor_runs,omitempty"`

	Ingest struct {
		Senders       int     `json:"senders"`
		Deliveries    int     `json:"deliveries"`
		Errors        int64   `json:"errors"`
		PerSec        float64 `json:"per_sec"`
		RatioToFloor  float64 `json:"ratio_to_floor"`
		Latency       Summary `json:"latency"`
		HalfRatePerS  float64 `json:"half_rate_per_sec"`
		HalfRateLat   Summary `json:"half_rate_latency"`
		HalfRateError int64   `json:"half_rate_errors"`
	} `json:"ingest"`

	Drain struct {
		Agents       int     `json:"agents"`
		Todos        int64   `json:"todos"`
		Errors       int64   `json:"errors"`
		PerSec       float64 `json:"per_sec"`
		RatioToFloor float64 `json:"ratio_to_floor"`
		ClaimNext    Summary `json:"claim_next"`
		Complete     Summary `json:"complete"`
	} `json:"drain"`

	Doorbell struct {
		Sessions int     `json:"sessions"`
		Rung     int     `json:"rung"`
		Missed   int     `json:"missed"`
		Latency  Summary `json:"latency"` // enqueue POST sent → first session hears the ring
		// Answered is the same POSTs' own latency, sent → 202 read: the ring and
		// the answer leave the server together, so the two are comparable.
		Answered Summary `json:"enqueue_answered"`
	} `json:"doorbell"`

	// SweepError says why the todos left on the queue after the doorbell phase
	// could not all be completed; empty when they were.
	SweepError string `json:"sweep_error,omitempty"`

	Process *struct {
		IdleRSSMB   float64 `json:"idle_rss_mb"`
		PeakRSSMB   float64 `json:"peak_rss_mb"`
		CPUSeconds  float64 `json:"cpu_seconds"`
		IngestRSSMB float64 `json:"rss_after_ingest_mb"`
	} `json:"process,omitempty"`
}

type webhook struct {
	source string
	url    string
	secret string
}

// Run runs every phase against t and returns the figures.
func Run(ctx context.Context, t Target, cfg Config) (_ *Report, err error) {
	if cfg.Deliveries <= 0 || cfg.Senders <= 0 || cfg.Agents <= 0 {
		return nil, fmt.Errorf("bench: deliveries, senders and agents must be positive")
	}
	if cfg.BodyBytes <= 0 {
		cfg.BodyBytes = 2048
	}
	if cfg.Doorbells <= 0 {
		cfg.Doorbells = 200
	}
	if cfg.PacedFor <= 0 {
		cfg.PacedFor = 3 * time.Second
	}
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = defaultCallTimeout
	}
	r := &Report{}
	progress := func(format string, a ...any) {
		if cfg.Progress != nil {
			fmt.Fprintf(cfg.Progress, format+"\n", a...)
		}
	}
	var idle ProcUsage
	if t.PID > 0 {
		var err error
		if idle, err = ReadProc(t.PID); err != nil {
			return nil, err
		}
	}

	floor := func() error {
		if cfg.Floor == nil {
			return nil
		}
		progress("floor: raw durable single-row commits on the same disk…")
		f, err := cfg.Floor()
		if err != nil {
			return err
		}
		r.FloorRuns = append(r.FloorRuns, f)
		r.FloorCommitsPerSec = max(r.FloorCommitsPerSec, f)
		return nil
	}
	// 0. the floor, on a quiet disk.
	if err := floor(); err != nil {
		return nil, err
	}

	setup, err := connect(ctx, t, cfg.CallTimeout, nil)
	if err != nil {
		return nil, err
	}
	// However the run ends, leave the target as we found it: delete the bench's
	// webhooks (this run's, and any an interrupted run left behind).
	defer func() {
		// Even when ctx ended (Ctrl-C), but not forever, and only briefly when
		// the server has just left a call unanswered.
		wait := 30 * time.Second
		if timedOut(err) {
			wait = 5 * time.Second
		}
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), wait)
		defer cancel()
		if err := cleanup(cctx, setup); err != nil {
			progress("bench: could not delete its webhooks on the target (delete those described %q): %v", benchWebhook, err)
		}
		setup.Close()
	}()
	if err := cleanup(ctx, setup); err != nil {
		return nil, fmt.Errorf("bench: list the target's webhooks: %w", err)
	}
	var hooks []webhook
	for _, src := range []string{"generic", "github"} {
		res, err := callTool(ctx, setup, "create_webhook", map[string]any{"source_type": src, "queue": t.Queue,
			"description": benchWebhook})
		if err != nil {
			return nil, fmt.Errorf("bench: create a %s webhook on queue %s: %w", src, t.Queue, err)
		}
		// Deliveries go to the server bench was pointed at, whatever base URL
		// that server puts in its ingest URLs (a proxy's, say).
		u, err := ingestURL(t.URL, str(res["ingest_url"]))
		if err != nil {
			return nil, fmt.Errorf("bench: create a %s webhook: %w", src, err)
		}
		hooks = append(hooks, webhook{source: src, url: u, secret: str(res["signing_secret"])})
	}
	httpc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: cfg.Senders * 2, MaxConnsPerHost: 0},
		Timeout: cfg.CallTimeout}

	// 1. ingest, flat out.
	progress("ingest: %d deliveries from %d senders…", cfg.Deliveries, cfg.Senders)
	var seq atomic.Int64
	lat := &Latencies{}
	var errs failures
	start := time.Now()
	if err := sendAll(ctx, httpc, hooks, cfg, cfg.Deliveries, cfg.Senders, &seq, lat, &errs, 0); err != nil {
		return nil, fmt.Errorf("bench: ingest: %w", err)
	}
	el := time.Since(start)
	r.Ingest.Senders, r.Ingest.Deliveries, r.Ingest.Errors = cfg.Senders, cfg.Deliveries, errs.n.Load()
	r.Ingest.PerSec = float64(cfg.Deliveries-int(errs.n.Load())) / el.Seconds()
	r.Ingest.Latency = lat.Summary()
	progress("ingest: %.0f deliveries/s, p50 %.2f ms, p99 %.2f ms, %d errors", r.Ingest.PerSec, r.Ingest.Latency.P50,
		r.Ingest.Latency.P99, r.Ingest.Errors)
	if err := errs.tooMany(cfg.Deliveries); err != nil {
		return nil, fmt.Errorf("bench: ingest: %w", err)
	}
	if t.PID > 0 {
		u, _ := ReadProc(t.PID)
		r.Process = &struct {
			IdleRSSMB   float64 `json:"idle_rss_mb"`
			PeakRSSMB   float64 `json:"peak_rss_mb"`
			CPUSeconds  float64 `json:"cpu_seconds"`
			IngestRSSMB float64 `json:"rss_after_ingest_mb"`
		}{IdleRSSMB: idle.RSSMB, IngestRSSMB: u.PeakRSSMB}
	}

	// 1b. ingest at half that rate: the latency a producer sees in normal running.
	half := r.Ingest.PerSec / 2
	n := int(half * cfg.PacedFor.Seconds())
	if n > 0 {
		progress("ingest: %d deliveries paced at %.0f/s…", n, half)
		plat := &Latencies{}
		var perrs failures
		start = time.Now()
		if err := sendAll(ctx, httpc, hooks, cfg, n, cfg.Senders, &seq, plat, &perrs, time.Duration(float64(time.Second)/half)); err != nil {
			return nil, fmt.Errorf("bench: ingest at half rate: %w", err)
		}
		r.Ingest.HalfRatePerS = float64(n) / time.Since(start).Seconds()
		r.Ingest.HalfRateLat = plat.Summary()
		r.Ingest.HalfRateError = perrs.n.Load()
		progress("ingest: at half rate p50 %.2f ms, p99 %.2f ms", r.Ingest.HalfRateLat.P50, r.Ingest.HalfRateLat.P99)
	}
	queued := int64(cfg.Deliveries+n) - errs.n.Load() - r.Ingest.HalfRateError

	// 2. drain over MCP.
	progress("drain: %d agents over MCP, claim_next → complete…", cfg.Agents)
	if err := drain(ctx, t, cfg.Agents, cfg.CallTimeout, queued, r); err != nil {
		return nil, err
	}
	progress("drain: %.0f todos/s, claim_next p50 %.2f ms, complete p50 %.2f ms, %d errors", r.Drain.PerSec,
		r.Drain.ClaimNext.P50, r.Drain.Complete.P50, r.Drain.Errors)

	// 3. doorbell latency with agents idle on their GET streams.
	progress("doorbell: %d todos one at a time to %d idle sessions…", cfg.Doorbells, cfg.Agents)
	if err := doorbell(ctx, t, httpc, hooks[0], cfg, &seq, r); err != nil {
		return nil, err
	}
	progress("doorbell: p50 %.2f ms, p99 %.2f ms (the enqueue POST itself: p50 %.2f ms)", r.Doorbell.Latency.P50,
		r.Doorbell.Latency.P99, r.Doorbell.Answered.P50)
	r.SweepError = sweep(ctx, t, 2, cfg.CallTimeout, progress)

	// 4. the floor again, after the phases: the higher of the two counts.
	if err := floor(); err != nil {
		return nil, err
	}
	if f := r.FloorCommitsPerSec; f > 0 {
		r.Ingest.RatioToFloor = r.Ingest.PerSec / f
		r.Drain.RatioToFloor = r.Drain.PerSec / f
	}

	// 5. the server's own footprint.
	if t.PID > 0 {
		u, err := ReadProc(t.PID)
		if err == nil {
			r.Process.PeakRSSMB, r.Process.CPUSeconds = u.PeakRSSMB, u.CPUSec
		}
	}
	return r, nil
}

// ingestURL is the advertised ingest URL's /webhooks/… path on base, the URL
// bench was given (which already carries any path prefix a proxy adds).
func ingestURL(base, advertised string) (string, error) {
	u, err := url.Parse(advertised)
	if err != nil {
		return "", fmt.Errorf("ingest_url %q: %w", advertised, err)
	}
	i := strings.Index(u.EscapedPath(), "/webhooks/")
	if i < 0 {
		return "", fmt.Errorf("ingest_url %q has no /webhooks/ path", advertised)
	}
	return strings.TrimSuffix(base, "/") + u.EscapedPath()[i:], nil
}

// failures counts failed calls and keeps the last error.
type failures struct {
	n    atomic.Int64
	last atomic.Pointer[error]
}

func (f *failures) add(err error) {
	f.n.Add(1)
	f.last.Store(&err)
}

// tooMany is an error when more than a tenth of total calls failed: the figures
// would describe the failures, not the server.
func (f *failures) tooMany(total int) error {
	n := f.n.Load()
	if n == 0 || n*10 <= int64(total) {
		return nil
	}
	return fmt.Errorf("%d of %d deliveries failed, the last with: %v", n, total, *f.last.Load())
}

// benchWebhook is the description of the webhooks bench creates, by which it
// finds them again to delete them.
const benchWebhook = "switchboard bench"

// cleanup deletes the webhooks bench created on the target. The endpoint may be
// over its rate limit (that is one way a run ends), so each call is retried for a
// while when it is.
func cleanup(ctx context.Context, c *client.Client) error {
	call := func(name string, args map[string]any) (map[string]any, error) {
		for i := 0; ; i++ {
			out, err := callTool(ctx, c, name, args)
			if err == nil || str(out["code"]) != "rate_limited" || i == 50 {
				return out, err
			}
			select {
			case <-ctx.Done():
				return out, err
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	list, err := call("list_webhooks", map[string]any{})
	if err != nil {
		return err
	}
	rows, _ := list["webhooks"].([]any)
	for _, row := range rows {
		if m, ok := row.(map[string]any); ok && str(m["description"]) == benchWebhook {
			if _, err := call("delete_webhook", map[string]any{"webhook_id": m["webhook_id"]}); err != nil {
				return err
			}
		}
	}
	return nil
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

// sendAll posts n signed deliveries from senders goroutines; with a gap, the
// deliveries are spread so that one starts every gap (an open-loop pace). A failed
// delivery is counted in errs; one that timed out stops every sender, and is
// sendAll's error: the server has stopped answering.
func sendAll(ctx context.Context, c *http.Client, hooks []webhook, cfg Config, n, senders int, seq *atomic.Int64,
	lat *Latencies, errs *failures, gap time.Duration) error {
	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var stalled atomic.Pointer[error]
	var next atomic.Int64
	start := time.Now()
	pad := strings.Repeat("x", max(0, cfg.BodyBytes-160))
	var wg sync.WaitGroup
	for g := 0; g < senders; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(n) || ctx.Err() != nil {
					return
				}
				if gap > 0 {
					if wait := time.Until(start.Add(time.Duration(i) * gap)); wait > 0 {
						time.Sleep(wait)
					}
				}
				h := hooks[int(i)%len(hooks)]
				id := "bench-" + strconv.FormatInt(seq.Add(1), 10) + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
				body := []byte(`{"id":"` + id + `","action":"opened","number":` + strconv.FormatInt(i, 10) +
					`,"padding":"` + pad + `"}`)
				t0 := time.Now()
				if err := deliver(ctx, c, h, id, body); err != nil {
					if ctx.Err() != nil && stalled.Load() != nil {
						return // another sender's delivery timed out
					}
					errs.add(err)
					if stalledCall(parent, err) {
						stalled.CompareAndSwap(nil, &err)
						cancel()
						return
					}
					continue
				}
				lat.Add(time.Since(t0))
			}
		}()
	}
	wg.Wait()
	if err := stalled.Load(); err != nil {
		return errNoAnswer("a delivery", c.Timeout, *err)
	}
	return nil
}

// timedOut says whether err is a call that outlasted its timeout.
func timedOut(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
}

// stalledCall says whether err is a call that outlasted its timeout while ctx, its
// caller's, still lived: the server has stopped answering, and the phase stops.
// A call cut short by the caller (Ctrl-C) is not one.
func stalledCall(ctx context.Context, err error) bool {
	return ctx.Err() == nil && timedOut(err)
}

// errNoAnswer is the error a phase stops with at a stalled call (stalledCall).
func errNoAnswer(what string, timeout time.Duration, err error) error {
	return fmt.Errorf("%s had no answer within %s, so the run stopped: %w", what, timeout, err)
}

func deliver(ctx context.Context, c *http.Client, h webhook, id string, body []byte) error {
	hdr, err := ingest.Sign(h.source, h.secret, id, body, time.Now())
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header = hdr
	req.Header.Set("Content-Type", "application/json")
	if h.source == "generic" {
		req.Header.Set("X-Delivery-Id", id)
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("delivery answered %d", resp.StatusCode)
	}
	if err != nil {
		return fmt.Errorf("read the delivery's answer: %w", err)
	}
	return nil
}

// connect opens an MCP session with the target's credential. Each call on it is
// bounded by timeout; with onNote, the session instead opens the GET stream that
// doorbells arrive on, which lasts as long as the session and so has no timeout.
func connect(ctx context.Context, t Target, timeout time.Duration, onNote func(mcp.JSONRPCNotification)) (*client.Client, error) {
	httpc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	if onNote == nil {
		httpc.Timeout = timeout
	}
	// The handshake is bounded either way; Dial keeps the GET stream off ctx.
	hctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c, _, err := agent.Dial(hctx, strings.TrimSuffix(t.URL, "/")+"/mcp", t.Credential, agent.DialOptions{
		Listen: onNote != nil, OnNotification: onNote, ClientName: "switchboard-bench",
		HTTPClient: httpc, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	return c, nil
}

// callTool calls a tool and returns its structured result; a tool error is an error.
func callTool(ctx context.Context, c *client.Client, name string, args map[string]any) (map[string]any, error) {
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = args
	res, err := c.CallTool(ctx, req)
	if err != nil {
		return nil, err
	}
	var out map[string]any
	if res.StructuredContent != nil {
		b, _ := json.Marshal(res.StructuredContent)
		json.Unmarshal(b, &out)
	} else {
		for _, ct := range res.Content {
			if tc, ok := ct.(mcp.TextContent); ok {
				json.Unmarshal([]byte(tc.Text), &out)
			}
		}
	}
	if res.IsError {
		if code, msg := str(out["code"]), str(out["message"]); code != "" || msg != "" {
			return out, fmt.Errorf("%s: %s: %s", name, code, msg)
		}
		return out, fmt.Errorf("%s: %v", name, out)
	}
	return out, nil
}

// maxConsecutiveErrors is how many failed calls in a row stop a draining agent.
const maxConsecutiveErrors = 20

// drain has agents loop claim_next → complete until the queue has nothing left to
// claim, and reports the rate. The bench's own todos are all queued by then; any
// that an earlier, failed run left on the queue are completed with them.
func drain(ctx context.Context, t Target, agents int, timeout time.Duration, queued int64, r *Report) error {
	d, err := drainQueue(ctx, t, agents, timeout)
	if err != nil {
		return err
	}
	r.Drain.Agents, r.Drain.Todos, r.Drain.Errors = agents, d.done, d.errs
	r.Drain.PerSec = float64(d.done) / d.elapsed.Seconds()
	r.Drain.ClaimNext, r.Drain.Complete = d.claimLat.Summary(), d.completeLat.Summary()
	if d.stalled != nil {
		// Its elapsed time includes the wait, and the server may be stuck.
		return fmt.Errorf("bench: drain: %w (%s)", errNoAnswer("a call", timeout, d.stalled), leftBehind(t.Queue))
	}
	if d.done >= queued || ctx.Err() != nil {
		return nil
	}
	// A rate would be meaningless: the agents stopped, or someone else took the
	// bench's todos.
	if f := d.failures(); f != "" {
		return fmt.Errorf("bench: the drain completed %d todos, fewer than the %d this run queued: %s (%s)",
			d.done, queued, f, leftBehind(t.Queue))
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
	msg := fmt.Sprintf("could not complete the doorbell's todos: %v (%s)", err, leftBehind(t.Queue))
	progress("bench: %s", msg)
	return msg
}

// leftBehind says what becomes of the todos a failed drain left on queue.
func leftBehind(queue string) string {
	return fmt.Sprintf("the next run's drain completes those left on queue %s; any left claimed, once their "+
		"%d-second lease has ended and the reaper has returned them", queue, benchLeaseSeconds)
}

// benchLeaseSeconds is the lease the bench's agents claim with: short, so that a
// todo a failed run left claimed is soon claimable again.
const benchLeaseSeconds = 30

// drained is what drainQueue did.
type drained struct {
	done, errs            int64
	lastErr               error
	stalled               error // the first call that timed out, if any did
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
	httpc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: agents + 1}, Timeout: timeout}
	defer httpc.CloseIdleConnections()
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
	for range agents {
		c, err := dialLean(ctx, t, httpc)
		if err != nil {
			return drained{}, err
		}
		clients = append(clients, c)
	}
	type claimed struct {
		Claimed  bool  `json:"claimed"`
		LeaseSeq int64 `json:"lease_seq"`
		Todo     struct {
			ID int64 `json:"id"`
		} `json:"todo"`
	}
	type completed struct {
		Todo struct {
			State string `json:"state"`
		} `json:"todo"`
	}
	claimArgs := map[string]any{"queues": []string{t.Queue}, "lease_ttl_seconds": benchLeaseSeconds}
	d := drained{claimLat: &Latencies{}, completeLat: &Latencies{}}
	var done, errs atomic.Int64
	var lastErr, stalled atomic.Pointer[error]
	start := time.Now()
	var wg sync.WaitGroup
	for _, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// An agent whose calls keep failing (say, its session was ended) stops
			// rather than spin; every failure is counted.
			failed := 0
			fail := func(err error) bool {
				errs.Add(1)
				lastErr.Store(&err)
				failed++
				if stalledCall(ctx, err) {
					stalled.CompareAndSwap(nil, &err)
					return false
				}
				return failed < maxConsecutiveErrors
			}
			for ctx.Err() == nil {
				t0 := time.Now()
				var cl claimed
				if err := c.callTool(ctx, "claim_next", claimArgs, &cl); err != nil {
					if !fail(err) {
						return
					}
					continue
				}
				d.claimLat.Add(time.Since(t0))
				if !cl.Claimed || cl.Todo.ID == 0 {
					return // nothing claimable: the queue is drained
				}
				t1 := time.Now()
				var co completed
				err := c.callTool(ctx, "complete", map[string]any{"todo_id": cl.Todo.ID, "lease_seq": cl.LeaseSeq}, &co)
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
				done.Add(1)
				failed = 0
			}
		}()
	}
	wg.Wait()
	d.elapsed = time.Since(start)
	d.done, d.errs = done.Load(), errs.Load()
	if e := lastErr.Load(); e != nil {
		d.lastErr = *e
	}
	if e := stalled.Load(); e != nil {
		d.stalled = *e
	}
	return d, nil
}

// doorbell measures enqueue → notification: agents sit on their GET streams; one
// delivery at a time, at random gaps, and the first session to hear of its todo
// stops the clock. The ring can arrive before the delivery's answer (it is sent
// after the commit, before the response), so both orders are matched up.
func doorbell(ctx context.Context, t Target, httpc *http.Client, h webhook, cfg Config, seq *atomic.Int64, r *Report) error {
	var mu sync.Mutex
	sent := map[string]time.Time{}    // todo id → enqueue start, ring not heard yet
	arrived := map[string]time.Time{} // todo id → ring heard before the answer came
	seen := map[string]bool{}
	lat, answered := &Latencies{}, &Latencies{}
	onNote := func(n mcp.JSONRPCNotification) {
		if n.Method != "notifications/claude/channel" {
			return
		}
		at := time.Now()
		meta, _ := n.Params.AdditionalFields["meta"].(map[string]any)
		id := str(meta["todo_id"])
		mu.Lock()
		defer mu.Unlock()
		if seen[id] {
			return
		}
		seen[id] = true
		if t0, ok := sent[id]; ok {
			lat.Add(at.Sub(t0))
			delete(sent, id)
		} else {
			arrived[id] = at
		}
	}
	for i := 0; i < cfg.Agents; i++ {
		c, err := connect(ctx, t, cfg.CallTimeout, onNote)
		if err != nil {
			return err
		}
		defer c.Close()
	}
	time.Sleep(300 * time.Millisecond) // let every GET stream attach
	rung := 0
	for i := 0; i < cfg.Doorbells && ctx.Err() == nil; i++ {
		time.Sleep(time.Duration(5+rand.IntN(20)) * time.Millisecond)
		id := "bell-" + strconv.FormatInt(seq.Add(1), 10)
		body := []byte(`{"id":"` + id + `","action":"ring"}`)
		t0 := time.Now()
		todoID, err := deliverForID(ctx, httpc, h, id, body)
		if err != nil {
			if stalledCall(ctx, err) {
				return fmt.Errorf("bench: doorbell: %w", errNoAnswer("a delivery", httpc.Timeout, err))
			}
			continue
		}
		answered.Add(time.Since(t0))
		rung++
		mu.Lock()
		if at, ok := arrived[todoID]; ok {
			lat.Add(at.Sub(t0))
			delete(arrived, todoID)
		} else {
			sent[todoID] = t0
		}
		mu.Unlock()
	}
	time.Sleep(200 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	r.Doorbell.Sessions = cfg.Agents
	r.Doorbell.Rung = rung
	r.Doorbell.Missed = len(sent)
	r.Doorbell.Latency = lat.Summary()
	r.Doorbell.Answered = answered.Summary()
	return nil
}

// deliverForID posts one delivery and returns the todo id from the answer.
func deliverForID(ctx context.Context, c *http.Client, h webhook, id string, body []byte) (string, error) {
	hdr, err := ingest.Sign(h.source, h.secret, id, body, time.Now())
	if err != nil {
		return "", err
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, h.url, bytes.NewReader(body))
	req.Header = hdr
	req.Header.Set("X-Delivery-Id", id)
	resp, err := c.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var ans map[string]any
	derr := json.NewDecoder(resp.Body).Decode(&ans)
	if resp.StatusCode/100 != 2 {
		return "", fmt.Errorf("delivery answered %d", resp.StatusCode)
	}
	if derr != nil && !errors.Is(derr, io.EOF) {
		return "", fmt.Errorf("read the delivery's answer: %w", derr)
	}
	switch v := ans["todo_id"].(type) {
	case float64:
		return strconv.FormatInt(int64(v), 10), nil
	case string:
		return v, nil
	}
	return "", fmt.Errorf("delivery answer has no todo_id")
}
