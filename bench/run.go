package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/switchboardhq/switchboard/internal/mcpclient"
)

// Target is the Switchboard under test.
type Target struct {
	URL        string // base URL, e.g. http://127.0.0.1:8080
	Credential string // an endpoint credential with the webhook verbs and a ceiling of 2+ (generic, github)
	Queue      string // the queue the bench's webhooks feed; in the endpoint's scope
	PID        int    // the server's process id when it runs on this machine (0 = unknown)
	// More are the base URLs of further processes on the same database (a
	// fleet): agents and senders spread over all of them (see fleet.go).
	More []string
	// Protocol is the MCP revision the drain's agents speak: empty or
	// agent.SessionProtocolVersion for sessions, 2026-07-28 for stateless requests.
	Protocol string
	// Loop is how the drain's agents work the queue: LoopTwoCall (the default)
	// or LoopOneCall.
	Loop string
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
	Processes          int     `json:"processes"` // the target's, agents and senders spread over them
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
		Protocol     string  `json:"protocol"`
		Loop         string  `json:"loop"` // LoopTwoCall or LoopOneCall
		Agents       int     `json:"agents"`
		Todos        int64   `json:"todos"`
		Errors       int64   `json:"errors"`
		PerSec       float64 `json:"per_sec"`
		RatioToFloor float64 `json:"ratio_to_floor"`
		ClaimNext    Summary `json:"claim_next"`
		Complete     Summary `json:"complete"`
		// ServerCPUPerTodoMS is the server's CPU time during the drain ÷ its
		// todos (a one-process server on this machine only; else 0).
		ServerCPUPerTodoMS float64 `json:"server_cpu_ms_per_todo,omitempty"`
	} `json:"drain"`

	Doorbell struct {
		Sessions int `json:"sessions"`
		// AcrossProcesses: the todos are added through the first process, the
		// sessions listen on the others.
		AcrossProcesses bool    `json:"across_processes"`
		Rung            int     `json:"rung"`
		Missed          int     `json:"missed"`
		Errors          int64   `json:"errors"`  // enqueue POSTs that failed
		Latency         Summary `json:"latency"` // enqueue POST sent → first session hears the ring
		// Answered is the same POSTs' own latency, sent → 202 read: the ring and
		// the answer leave the server together, so the two are comparable.
		Answered Summary `json:"enqueue_answered"`
	} `json:"doorbell"`

	// SweepError says why the todos left on the queue after the doorbell phase
	// could not all be completed; empty when they were.
	SweepError string `json:"sweep_error,omitempty"`
	// CleanupError says why the webhooks bench created could not all be
	// deleted; empty when they were.
	CleanupError string `json:"cleanup_error,omitempty"`

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
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	r := &Report{Processes: t.processes()}
	progress := progressTo(cfg.Progress)
	var idle ProcUsage
	if t.PID > 0 {
		var err error
		if idle, err = ReadProc(t.PID); err != nil {
			return nil, err
		}
	}

	floor := func() error { return measureFloor(cfg, r, progress) }
	// The setup session first: a wrong URL or credential is said at once, not
	// after the floor's seconds. Then the floor, on a quiet disk.
	setup, err := connect(ctx, t, cfg.CallTimeout, nil)
	if err != nil {
		return nil, err
	}
	if err := floor(); err != nil {
		setup.Close()
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
			msg := fmt.Sprintf("could not delete its webhooks on the target (delete those described %q): %v", benchWebhook, err)
			progress("bench: %s", msg)
			r.CleanupError = msg
		}
		setup.Close()
	}()
	if err := cleanup(ctx, setup); err != nil {
		return nil, fmt.Errorf("bench: list the target's webhooks: %w", err)
	}
	hooks, err := createHooks(ctx, setup, t)
	if err != nil {
		return nil, err
	}
	var seq atomic.Int64
	queued, err := ingestPhases(ctx, t, hooks, cfg, &seq, idle, r, progress)
	if err != nil {
		return nil, err
	}
	if err := agentPhases(ctx, t, hooks, cfg, &seq, queued, r, progress); err != nil {
		return nil, err
	}

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

// defaults fills in the settings left unset and refuses the ones that cannot work.
func (cfg *Config) defaults() error {
	if cfg.Deliveries <= 0 || cfg.Senders <= 0 || cfg.Agents <= 0 {
		return fmt.Errorf("bench: deliveries, senders and agents must be positive")
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
	return nil
}

// createHooks creates the bench's two webhooks (generic and github) on t's queue.
func createHooks(ctx context.Context, setup *client.Client, t Target) ([]webhook, error) {
	var hooks []webhook
	for _, src := range []string{"generic", "github"} {
		res, err := callTool(ctx, setup, "create_webhook", map[string]any{"source_type": src, "queue": t.Queue,
			"description": benchWebhook})
		if err != nil && strings.Contains(err.Error(), "tool 'create_webhook' not found") {
			// The endpoint's session does not list create_webhook: it may not
			// create webhooks at all.
			return nil, fmt.Errorf("bench: the endpoint may not create webhooks (its sessions do not list create_webhook): "+
				"give it --max-webhooks 2 --webhook-sources generic,github, as docs/performance.md says (%v)", err)
		}
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
	return hooks, nil
}

// ingestPhases runs the ingest phases, flat out and then at half that rate, and
// returns how many todos they queued.
func ingestPhases(ctx context.Context, t Target, hooks []webhook, cfg Config, seq *atomic.Int64, idle ProcUsage, r *Report,
	progress func(string, ...any)) (queued int64, err error) {
	// 1. ingest, flat out.
	progress("ingest: %d deliveries from %d senders…", cfg.Deliveries, cfg.Senders)
	lat := &Latencies{}
	var errs failures
	start := time.Now()
	if err := sendAll(ctx, cfg.CallTimeout, hooks, t.urls(), cfg, cfg.Deliveries, cfg.Senders, seq, lat, &errs, 0); err != nil {
		return 0, fmt.Errorf("bench: ingest: %w", err)
	}
	el := time.Since(start)
	r.Ingest.Senders, r.Ingest.Deliveries, r.Ingest.Errors = cfg.Senders, cfg.Deliveries, errs.n.Load()
	r.Ingest.PerSec = float64(cfg.Deliveries-int(errs.n.Load())) / el.Seconds()
	r.Ingest.Latency = lat.Summary()
	progress("ingest: %.0f deliveries/s, p50 %.2f ms, p99 %.2f ms, %d errors", r.Ingest.PerSec, r.Ingest.Latency.P50,
		r.Ingest.Latency.P99, r.Ingest.Errors)
	if err := errs.tooMany(cfg.Deliveries); err != nil {
		return 0, fmt.Errorf("bench: ingest: %w", err)
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
		if err := sendAll(ctx, cfg.CallTimeout, hooks, t.urls(), cfg, n, cfg.Senders, seq, plat, &perrs,
			time.Duration(float64(time.Second)/half)); err != nil {
			return 0, fmt.Errorf("bench: ingest at half rate: %w", err)
		}
		r.Ingest.HalfRateError = perrs.n.Load()
		r.Ingest.HalfRatePerS = float64(int64(n)-r.Ingest.HalfRateError) / time.Since(start).Seconds()
		r.Ingest.HalfRateLat = plat.Summary()
		progress("ingest: at half rate p50 %.2f ms, p99 %.2f ms, %d errors", r.Ingest.HalfRateLat.P50,
			r.Ingest.HalfRateLat.P99, r.Ingest.HalfRateError)
		if err := perrs.tooMany(n); err != nil {
			return 0, fmt.Errorf("bench: ingest at half rate: %w", err)
		}
	}
	return int64(cfg.Deliveries+n) - errs.n.Load() - r.Ingest.HalfRateError, nil
}

// progressTo writes a line of progress to w, or nowhere when w is nil.
func progressTo(w io.Writer) func(format string, a ...any) {
	return func(format string, a ...any) {
		if w != nil {
			fmt.Fprintf(w, format+"\n", a...)
		}
	}
}

// measureFloor measures the disk's floor, raw durable commits, when cfg says how;
// the report keeps the higher of its runs.
func measureFloor(cfg Config, r *Report, progress func(string, ...any)) error {
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

// agentPhases runs the phases of the agents' side: the drain of what ingest
// queued, then the doorbell's latency to idle sessions, then a sweep.
func agentPhases(ctx context.Context, t Target, hooks []webhook, cfg Config, seq *atomic.Int64, queued int64, r *Report,
	progress func(string, ...any)) error {
	// 2. drain over MCP.
	progress("drain: %d agents over MCP, %s…", cfg.Agents, loopSteps(t.loop()))
	if err := drain(ctx, t, cfg.Agents, cfg.CallTimeout, queued, r); err != nil {
		return err
	}
	progress("drain: %.0f todos/s, claim_next p50 %.2f ms, complete p50 %.2f ms, %d errors", r.Drain.PerSec,
		r.Drain.ClaimNext.P50, r.Drain.Complete.P50, r.Drain.Errors)

	// 3. doorbell latency with agents idle on their GET streams.
	progress("doorbell: %d todos one at a time to %d idle sessions…", cfg.Doorbells, cfg.Agents)
	httpc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}, Timeout: cfg.CallTimeout}
	if err := doorbell(ctx, t, httpc, hooks[0], cfg, seq, r); err != nil {
		return err
	}
	progress("doorbell: p50 %.2f ms, p99 %.2f ms (the enqueue POST itself: p50 %.2f ms)", r.Doorbell.Latency.P50,
		r.Doorbell.Latency.P99, r.Doorbell.Answered.P50)
	r.SweepError = sweep(ctx, t, 2, cfg.CallTimeout, progress)
	return nil
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
	c, _, err := mcpclient.Dial(hctx, strings.TrimSuffix(t.URL, "/")+"/mcp", t.Credential, mcpclient.DialOptions{
		Listen: onNote != nil, OnNotification: onNote, ClientName: "switchboard-bench",
		HTTPClient: httpc, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if errors.Is(err, transport.ErrAuthorizationRequired) {
		return nil, fmt.Errorf("bench: the server refused the credential (401 at %s/mcp): is it a live endpoint credential of that server?",
			strings.TrimSuffix(t.URL, "/"))
	}
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
