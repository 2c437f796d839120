package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/switchboardhq/switchboard/agent"
	"github.com/switchboardhq/switchboard/bench"
	"github.com/switchboardhq/switchboard/store"
)

const benchSynopsis = `bench [--url URL ... --credential-env VAR [--queue Q]] [--db POSTGRES-URL [--processes N,...]] [--deliveries N]
                   [--senders C] [--agents A] [--protocol VERSION] [--loop two-call|one-call] [--doorbells N] [--duration D] [--json]`

func runBench(ctx context.Context, env *environ, args []string) error {
	fs := newFlags(env, "bench", benchSynopsis)
	var urls urlList
	fs.Var(&urls, "url", "the base `url` of a running Switchboard to bench (default: start one on a temporary database); "+
		"its endpoint needs the queue, --max-webhooks 2 and --webhook-sources generic,github (see docs/performance.md); "+
		"repeat it (or give a comma list) for the processes of a fleet on one database: agents and senders spread over them")
	credEnv := fs.String("credential-env", "", "with --url: the environment variable holding an endpoint credential (never argv)")
	queue := fs.String("queue", "bench", "with --url: the queue the bench's webhooks feed (must be in the endpoint's scope and webhook ceiling)")
	deliveries := fs.Int("deliveries", 20000, "signed deliveries in the ingest phase")
	senders := fs.Int("senders", 32, "concurrent webhook senders")
	agents := fs.Int("agents", 8, "concurrent agents draining over MCP")
	protocol := fs.String("protocol", agent.SessionProtocolVersion, "the MCP revision the drain's agents speak: "+
		strings.Join(agent.SupportedProtocolVersions, ", ")+" (2026-07-28: stateless requests, no session)")
	loop := fs.String("loop", bench.LoopTwoCall, "the drain's agent loop: two-call (claim_next, then complete, as the "+
		"lease contract tells workers) or one-call (complete with claim_next: true claims the next todo)")
	doorbells := fs.Int("doorbells", 300, "todos enqueued one at a time to measure the doorbell")
	duration := fs.Duration("duration", 3*time.Second, "how long the half-rate ingest run and the floor measurement last")
	db := fs.String("db", "", "a postgres:// URL: without --url, run the server on a fresh schema of that database "+
		"(dropped after); with --url, the database that server uses; either way the floor is measured there")
	processes := fs.String("processes", "1", "with --db and no --url: how many serve processes share the schema; "+
		"a comma list (1,2,3) runs once per count, each on a fresh schema, and compares them to the first")
	sync := fs.String("synchronous", store.SyncFull, "in-process server: FULL or NORMAL")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	// The bench's own process is the load generator, on the machine it measures:
	// its collector runs less often, to leave the CPU to the server.
	setGCPercent(env, 400)
	for _, u := range urls {
		if u := strings.TrimSuffix(u, "/"); strings.HasSuffix(u, "/mcp") {
			return usageErr("--url is the server's base URL: drop the /mcp (bench adds it), as in --url %s",
				strings.TrimSuffix(u, "/mcp"))
		}
	}
	if !slices.Contains(agent.SupportedProtocolVersions, *protocol) {
		return usageErr("--protocol %q: want one of %s", *protocol, strings.Join(agent.SupportedProtocolVersions, ", "))
	}
	if !slices.Contains(bench.Loops, *loop) {
		return usageErr("--loop %q: want one of %s", *loop, strings.Join(bench.Loops, ", "))
	}
	if *deliveries < 1 || *senders < 1 || *agents < 1 || *doorbells < 1 || *duration <= 0 {
		return usageErr("--deliveries, --senders, --agents, --doorbells and --duration must be positive")
	}
	if *db != "" && !store.IsPostgres(*db) {
		return usageErr("--db takes a postgres:// or postgresql:// URL; on SQLite bench uses a temporary file of its own")
	}
	counts, err := processCounts(*processes, *db != "" && len(urls) == 0)
	if err != nil {
		return err
	}
	p := benchPlan{env: env, urls: urls, queue: *queue, db: *db, sync: *sync, protocol: *protocol, loop: *loop,
		cfg: bench.Config{Deliveries: *deliveries, Senders: *senders, Agents: *agents, Doorbells: *doorbells,
			PacedFor: *duration, Progress: env.stderr}}
	if len(urls) > 0 {
		if *credEnv == "" || env.getenv(*credEnv) == "" {
			return usageErr("--url needs --credential-env naming a set environment variable with an endpoint credential")
		}
		p.cred = env.getenv(*credEnv)
	}
	var runs []benchRun
	for _, n := range counts {
		run, err := p.run(ctx, n)
		if err != nil {
			return err
		}
		runs = append(runs, run)
	}
	if err := printBenchRuns(env, runs, *asJSON); err != nil {
		return err
	}
	for _, run := range runs {
		if err := leftOnServer(run.Report); err != nil {
			return err
		}
	}
	return nil
}

// benchPlan is what one bench command asked for; run runs it once.
type benchPlan struct {
	env                             *environ
	urls                            []string
	cred, queue, db, sync, protocol string
	loop                            string
	cfg                             bench.Config
}

// benchRun is one run's figures and what they were measured on.
type benchRun struct {
	Machine string `json:"machine"`
	Backend string `json:"backend"`
	*bench.Report
}

// run runs the bench once: against the --url processes, or against processes
// serve processes it starts on a fresh database.
func (p benchPlan) run(ctx context.Context, processes int) (benchRun, error) {
	dir, err := os.MkdirTemp("", "switchboard-bench-")
	if err != nil {
		return benchRun{}, err
	}
	defer os.RemoveAll(dir)
	floorAt := filepath.Join(dir, "floor.db")
	serverDB := filepath.Join(dir, "bench.db")
	backend := "SQLite, synchronous=" + strings.ToUpper(p.sync)
	if p.db != "" {
		pg, err := inspectBenchPostgres(ctx, p.db, len(p.urls) == 0)
		if err != nil {
			return benchRun{}, err
		}
		defer pg.drop()
		floorAt, serverDB, backend = p.db, pg.url, pg.backend
	}
	cfg := p.cfg
	cfg.Floor = func() (float64, error) {
		return store.MeasureFloor(ctx, floorAt, store.Options{Synchronous: p.sync}, cfg.PacedFor)
	}

	var target bench.Target
	machine := fmt.Sprintf("%s/%s, %d CPUs", runtime.GOOS, runtime.GOARCH, runtime.NumCPU())
	if len(p.urls) > 0 {
		target = bench.Target{URL: p.urls[0], More: p.urls[1:], Credential: p.cred, Queue: p.queue}
		if p.db == "" {
			machine += " (client side; the floor is this machine's temp disk)"
			backend = "the server's (unknown to bench: name it with --db to measure the floor there)"
		} else {
			machine += " (client side; the floor is the --db server's)"
		}
	} else {
		stop, t, err := startBenchServers(ctx, p.env, serverDB, p.sync, cfg.Agents, processes)
		if err != nil {
			return benchRun{}, err
		}
		defer stop()
		target = t
		if p.db == "" {
			machine += ", temporary database in " + dir + ", synchronous=" + strings.ToUpper(p.sync)
		}
	}
	target.Protocol, target.Loop = p.protocol, p.loop
	report, err := bench.Run(ctx, target, cfg)
	if err != nil {
		return benchRun{}, errors.New(strings.TrimPrefix(err.Error(), "bench: ")) // the command names itself
	}
	return benchRun{machine, backend, report}, nil
}

// leftOnServer is the error a run that printed its figures still ends with when
// it left todos or webhooks on the server: a script must be able to tell.
func leftOnServer(r *bench.Report) error {
	var left []string
	for _, e := range []string{r.SweepError, r.CleanupError} {
		if e != "" {
			left = append(left, e)
		}
	}
	if len(left) == 0 {
		return nil
	}
	return fmt.Errorf("the figures stand, but the run left things on the server: %s", strings.Join(left, "; "))
}

// startBenchServers creates an endpoint on a fresh database (a file, or an empty
// PostgreSQL schema) and starts n `switchboard serve` processes on it as child
// processes: the same code path as serve, real HTTP on loopback, and processes
// of their own whose memory and CPU can be read. Several share one PostgreSQL.
func startBenchServers(ctx context.Context, env *environ, db, sync string, agents, n int) (stop func(), t bench.Target, err error) {
	st, err := openStore(ctx, env, db)
	if err != nil {
		return nil, t, err
	}
	all := store.AllVerbs()
	queues := []string{"bench"}
	sources := []string{"generic", "github"}
	four := 4
	// The server's default rate limit, as an endpoint made by hand has it: the
	// queue verbs the drain makes are not held to it.
	_, cred, err := st.CreateEndpoint(ctx, "bench", store.EndpointSpec{Verbs: &all, Queues: &queues,
		MaxWebhooks: &four, WebhookSources: &sources, WebhookQueues: &queues}, "system")
	st.Close()
	if err != nil {
		return nil, t, err
	}
	var stops []func()
	stop = func() {
		for _, s := range stops {
			s()
		}
	}
	t = bench.Target{Credential: cred, Queue: "bench"}
	for i := range n {
		s, base, pid, err := startServe(ctx, db, sync, agents)
		if err != nil {
			stop()
			return nil, t, err
		}
		stops = append(stops, s)
		if i == 0 {
			t.URL, t.PID = base, pid
		} else {
			t.More = append(t.More, base)
		}
	}
	if n > 1 {
		t.PID = 0 // one process's memory and CPU would say little of the fleet's
	}
	return stop, t, nil
}

// startServe starts one `switchboard serve` on db, on a free loopback port, and
// returns its base URL and process id once it listens.
func startServe(ctx context.Context, db, sync string, agents int) (stop func(), base string, pid int, err error) {
	// Pick a free port so the base URL in ingest URLs is right from the start.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", 0, err
	}
	addr := ln.Addr().String()
	ln.Close()
	exe, err := os.Executable()
	if err != nil {
		return nil, "", 0, err
	}
	// Every agent is a session of the one bench endpoint, plus the doorbell's
	// enqueuer: more agents than serve's per-endpoint cap would evict each other.
	cmd := exec.CommandContext(ctx, exe, "serve", "--listen", addr, "--base-url", "http://"+addr,
		"--synchronous", sync, "--max-sessions-per-endpoint", strconv.Itoa(max(32, 2*agents+2)))
	// The database goes in the environment: a PostgreSQL URL may hold a password,
	// and argv is anyone's to read.
	cmd.Env = append(os.Environ(), "SWITCHBOARD_DB="+db)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, "", 0, err
	}
	// nil is /dev/null: an io.Writer here would make this process copy every log
	// line the server writes, in the middle of what is being measured.
	cmd.Stderr = nil
	if err := cmd.Start(); err != nil {
		return nil, "", 0, fmt.Errorf("start serve: %w", err)
	}
	stop = func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	}
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(out)
		ok := false
		for sc.Scan() {
			if !ok && strings.Contains(sc.Text(), "listening on") {
				ok = true
				ready <- true
			}
		}
		if !ok {
			ready <- false
		}
	}()
	select {
	case ok := <-ready:
		if !ok {
			stop()
			return nil, "", 0, fmt.Errorf("serve exited before listening")
		}
	case <-time.After(30 * time.Second):
		stop()
		return nil, "", 0, fmt.Errorf("serve did not start listening within 30s")
	}
	return stop, "http://" + addr, cmd.Process.Pid, nil
}

func printBench(w io.Writer, machine, backend string, r *bench.Report) {
	fmt.Fprintf(w, "switchboard bench — %s\ndatabase: %s\n", machine, backend)
	bell := fmt.Sprintf("doorbell, %d sessions", r.Doorbell.Sessions)
	if r.Processes > 1 {
		fmt.Fprintf(w, "processes: %d on that database; agents and senders spread over them\n", r.Processes)
		bell += " on the other processes"
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	ratio := func(v float64) string {
		if r.FloorCommitsPerSec == 0 {
			return "-"
		}
		return fmt.Sprintf("%.2f×", v/r.FloorCommitsPerSec)
	}
	fmt.Fprintln(tw, "phase\trate/s\t× floor\tp50 ms\tp99 ms\tmax ms\terrors\t")
	fmt.Fprintf(tw, "floor (durable 1-row commits)\t%.0f\t1.00×\t\t\t\t\t\n", r.FloorCommitsPerSec)
	if len(r.FloorRuns) == 2 {
		fmt.Fprintf(tw, "  the higher of: before, after\t%.0f, %.0f\t\t\t\t\t\t\n", r.FloorRuns[0], r.FloorRuns[1])
	}
	fmt.Fprintf(tw, "ingest, %d senders\t%.0f\t%s\t%.2f\t%.2f\t%.2f\t%d\t\n", r.Ingest.Senders, r.Ingest.PerSec,
		ratio(r.Ingest.PerSec), r.Ingest.Latency.P50, r.Ingest.Latency.P99, r.Ingest.Latency.Max, r.Ingest.Errors)
	fmt.Fprintf(tw, "ingest at half rate\t%.0f\t%s\t%.2f\t%.2f\t%.2f\t%d\t\n", r.Ingest.HalfRatePerS,
		ratio(r.Ingest.HalfRatePerS), r.Ingest.HalfRateLat.P50, r.Ingest.HalfRateLat.P99, r.Ingest.HalfRateLat.Max,
		r.Ingest.HalfRateError)
	fmt.Fprintf(tw, "drain, %d agents, MCP %s, %s loop (todos)\t%.0f\t%s\t\t\t\t%d\t\n", r.Drain.Agents, r.Drain.Protocol,
		r.Drain.Loop, r.Drain.PerSec, ratio(r.Drain.PerSec), r.Drain.Errors)
	complete := "  complete"
	if r.Drain.Loop == bench.LoopOneCall {
		complete += " (claim_next: true)"
	}
	fmt.Fprintf(tw, "  claim_next\t\t\t%.2f\t%.2f\t%.2f\t\t\n", r.Drain.ClaimNext.P50, r.Drain.ClaimNext.P99, r.Drain.ClaimNext.Max)
	fmt.Fprintf(tw, "%s\t\t\t%.2f\t%.2f\t%.2f\t\t\n", complete, r.Drain.Complete.P50, r.Drain.Complete.P99, r.Drain.Complete.Max)
	fmt.Fprintf(tw, "%s\t\t\t%.2f\t%.2f\t%.2f\t%d missed\t\n", bell,
		r.Doorbell.Latency.P50, r.Doorbell.Latency.P99, r.Doorbell.Latency.Max, r.Doorbell.Missed)
	fmt.Fprintf(tw, "  its enqueue POST, answered\t\t\t%.2f\t%.2f\t%.2f\t%d\t\n",
		r.Doorbell.Answered.P50, r.Doorbell.Answered.P99, r.Doorbell.Answered.Max, r.Doorbell.Errors)
	tw.Flush()
	if p := r.Process; p != nil {
		fmt.Fprintf(w, "\nserver process: idle RSS %.1f MB, RSS peak during ingest %.1f MB, peak RSS %.1f MB, CPU %.1f s\n",
			p.IdleRSSMB, p.IngestRSSMB, p.PeakRSSMB, p.CPUSeconds)
		if c := r.Drain.ServerCPUPerTodoMS; c > 0 {
			fmt.Fprintf(w, "server CPU per todo drained: %.3f ms\n", c)
		}
	}
}
