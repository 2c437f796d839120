package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/switchboardhq/switchboard/agent"
	"github.com/switchboardhq/switchboard/ingest"
	"github.com/switchboardhq/switchboard/internal/httpbody"
	"github.com/switchboardhq/switchboard/internal/metrics"
	"github.com/switchboardhq/switchboard/modules"
	"github.com/switchboardhq/switchboard/reaper"
	"github.com/switchboardhq/switchboard/store"
	"github.com/switchboardhq/switchboard/web"
)

const serveSynopsis = `serve [--listen ADDR] [--db FILE] [--base-url URL] [--reaper-interval DURATION] [flags]`

// maxHeaderBytes bounds a request's line and headers (http.Server.MaxHeaderBytes).
const maxHeaderBytes = 64 << 10

// serveConfig is everything serve is told by flags and SWITCHBOARD_* variables
// (flags win over the environment, which wins over the defaults).
type serveConfig struct {
	Listen          string
	DB              string
	BaseURL         string
	Synchronous     string
	LogFormat       string
	ReaperInterval  time.Duration
	Retention       time.Duration
	EventRetention  time.Duration
	AuditRetention  time.Duration
	ShutdownTimeout time.Duration
	MetricsAllow    string
	AllowedOrigins  string
	MaxBody         int64    // webhook body bound in bytes
	MaxSessions     int      // live MCP sessions per endpoint
	SecretKeys      keyFiles // see keyFiles.load
	SecretKey       []byte   // resolved by runServe; nil = secrets stored as plaintext
	PreviousKeys    [][]byte // during a key rotation: keys that still open what they sealed

	ModulesDir        string
	EgressPolicy      string
	ModuleConcurrency int
	ModuleCallTimeout time.Duration

	envErrs []string // SWITCHBOARD_* settings that did not parse
	// tweakModules lets tests shorten the supervisor's backoff and watch it.
	tweakModules func(*modules.Options)
	TrustProxy   bool
}

func (c *serveConfig) register(fs interface {
	StringVar(*string, string, string, string)
	DurationVar(*time.Duration, string, time.Duration, string)
	IntVar(*int, string, int, string)
	Int64Var(*int64, string, int64, string)
	BoolVar(*bool, string, bool, string)
}, env *environ) {
	fs.StringVar(&c.Listen, "listen", envOr(env, "SWITCHBOARD_LISTEN", "127.0.0.1:8080"), "address to listen on (env SWITCHBOARD_LISTEN)")
	fs.StringVar(&c.DB, "db", defaultDB(env), "SQLite database file (env SWITCHBOARD_DB)")
	fs.StringVar(&c.BaseURL, "base-url", envOr(env, "SWITCHBOARD_BASE_URL", ""), "public URL used in ingest URLs (env SWITCHBOARD_BASE_URL; default http://<listen>)")
	fs.StringVar(&c.Synchronous, "synchronous", envOr(env, "SWITCHBOARD_SYNCHRONOUS", store.SyncFull),
		"FULL: every acknowledged write survives power loss; NORMAL: fewer fsyncs, may lose the last writes on power loss (env SWITCHBOARD_SYNCHRONOUS)")
	fs.StringVar(&c.LogFormat, "log-format", envOr(env, "SWITCHBOARD_LOG_FORMAT", "text"), "text or json (env SWITCHBOARD_LOG_FORMAT)")
	fs.DurationVar(&c.ReaperInterval, "reaper-interval", envDuration(env, "SWITCHBOARD_REAPER_INTERVAL", 30*time.Second, &c.envErrs), "how often expired leases are requeued (env SWITCHBOARD_REAPER_INTERVAL)")
	fs.DurationVar(&c.Retention, "retention", envDuration(env, "SWITCHBOARD_RETENTION", 30*24*time.Hour, &c.envErrs), "how long done todos are kept (env SWITCHBOARD_RETENTION)")
	fs.DurationVar(&c.EventRetention, "event-retention", envDuration(env, "SWITCHBOARD_EVENT_RETENTION", 90*24*time.Hour, &c.envErrs),
		"delete a webhook event no todo needs any more this long after it arrived; until then a redelivery is a duplicate; 0 keeps events (env SWITCHBOARD_EVENT_RETENTION)")
	fs.DurationVar(&c.AuditRetention, "audit-retention", envDuration(env, "SWITCHBOARD_AUDIT_RETENTION", 0, &c.envErrs),
		"delete audit rows older than this; 0 keeps the audit log whole (env SWITCHBOARD_AUDIT_RETENTION)")
	fs.StringVar(&c.MetricsAllow, "metrics-allow", envOr(env, "SWITCHBOARD_METRICS_ALLOW", "127.0.0.0/8,::1"),
		"comma-separated IPs/CIDRs allowed to read /metrics, which names queues (env SWITCHBOARD_METRICS_ALLOW)")
	fs.StringVar(&c.AllowedOrigins, "allowed-origins", envOr(env, "SWITCHBOARD_ALLOWED_ORIGINS", ""), "comma-separated browser origins allowed to call /mcp besides the base URL's (env SWITCHBOARD_ALLOWED_ORIGINS)")
	fs.StringVar(&c.ModulesDir, "modules-dir", envOr(env, "SWITCHBOARD_MODULES_DIR", ""), "directory of capability module manifests (*.json); empty: no modules (env SWITCHBOARD_MODULES_DIR)")
	fs.StringVar(&c.EgressPolicy, "egress-policy", envOr(env, "SWITCHBOARD_EGRESS_POLICY", ""), "global egress policy (JSON) passed to modules, which must then enforce it (env SWITCHBOARD_EGRESS_POLICY)")
	fs.IntVar(&c.ModuleConcurrency, "module-concurrency", 8, "module tool calls in flight per module; more are refused as rate_limited")
	fs.DurationVar(&c.ModuleCallTimeout, "module-call-timeout", envDuration(env, "SWITCHBOARD_MODULE_CALL_TIMEOUT", 5*time.Minute, &c.envErrs),
		"how long one module tool call may run before the agent is answered unavailable (env SWITCHBOARD_MODULE_CALL_TIMEOUT)")
	fs.BoolVar(&c.TrustProxy, "trust-proxy", envBool(env, "SWITCHBOARD_TRUST_PROXY", &c.envErrs),
		"a reverse proxy sets X-Forwarded-Proto/For: honour them for Secure cookies and login throttling (env SWITCHBOARD_TRUST_PROXY=1)")
	fs.DurationVar(&c.ShutdownTimeout, "shutdown-timeout", envDuration(env, "SWITCHBOARD_SHUTDOWN_TIMEOUT", 10*time.Second, &c.envErrs), "how long in-flight requests may take to finish on shutdown")
	fs.Int64Var(&c.MaxBody, "max-body", envInt64(env, "SWITCHBOARD_MAX_BODY", ingest.DefaultMaxBody, &c.envErrs), "largest webhook body accepted, in bytes; larger ones get 413 (env SWITCHBOARD_MAX_BODY)")
	fs.IntVar(&c.MaxSessions, "max-sessions-per-endpoint", int(envInt64(env, "SWITCHBOARD_MAX_SESSIONS_PER_ENDPOINT", 32, &c.envErrs)),
		"live MCP sessions one endpoint may hold; initializing one more ends its least recently used (env SWITCHBOARD_MAX_SESSIONS_PER_ENDPOINT)")
	secretKeyFlags(fs, env, &c.SecretKeys)
}

// envDuration reads a duration setting from the environment; a value that is
// not one is recorded in bad (serve then refuses to start) and def is used.
func envDuration(env *environ, name string, def time.Duration, bad *[]string) time.Duration {
	v := env.getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		*bad = append(*bad, fmt.Sprintf("%s=%q is not a duration (say 90s, 15m or 720h)", name, v))
		return def
	}
	return d
}

// listensEverywhere reports whether listen names no host (":8080") or the
// unspecified address (0.0.0.0, [::]): fine to bind, useless in a URL.
func listensEverywhere(listen string) bool {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return host == "" || (ip != nil && ip.IsUnspecified())
}

// envBool reads an on/off setting from the environment, as envDuration: 1, true,
// yes and on are on; 0, false, no, off and empty are off. Anything else is an
// error, not off: a proxy setting read as off would quietly drop Secure cookies.
func envBool(env *environ, name string, bad *[]string) bool {
	switch v := env.getenv(name); strings.ToLower(strings.TrimSpace(v)) {
	case "1", "true", "yes", "on":
		return true
	case "", "0", "false", "no", "off":
		return false
	default:
		*bad = append(*bad, fmt.Sprintf("%s=%q is not on or off (say 1 or 0)", name, v))
		return false
	}
}

// envInt64 reads a whole-number setting from the environment, as envDuration.
func envInt64(env *environ, name string, def int64, bad *[]string) int64 {
	v := env.getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		*bad = append(*bad, fmt.Sprintf("%s=%q is not a whole number", name, v))
		return def
	}
	return n
}

func (c *serveConfig) validate() error {
	if len(c.envErrs) > 0 {
		return usageErr("%s", strings.Join(c.envErrs, "; "))
	}
	if c.ReaperInterval <= 0 {
		return usageErr("--reaper-interval must be positive")
	}
	if c.Retention <= 0 || c.EventRetention < 0 || c.AuditRetention < 0 {
		return usageErr("--retention must be positive, and --event-retention and --audit-retention not negative")
	}
	if c.ModuleConcurrency <= 0 {
		return usageErr("--module-concurrency must be positive")
	}
	if c.ModuleCallTimeout <= 0 {
		return usageErr("--module-call-timeout must be positive")
	}
	if c.MaxBody <= 0 {
		return usageErr("--max-body must be positive")
	}
	if c.MaxSessions <= 0 {
		return usageErr("--max-sessions-per-endpoint must be positive")
	}
	if c.LogFormat != "text" && c.LogFormat != "json" {
		return usageErr("--log-format must be text or json")
	}
	return nil
}

// newLogger logs text (or JSON) to w. Under systemd, stderr goes to the journal,
// which stamps every line itself (systemd sets JOURNAL_STREAM for that stream), so
// text lines leave their own timestamp out.
func newLogger(w io.Writer, format string, underJournal bool) *slog.Logger {
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, nil))
	}
	opts := &slog.HandlerOptions{}
	if underJournal {
		opts.ReplaceAttr = func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		}
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// serveGCPercent is how far serve's heap grows past what is live before Go's
// collector runs again (Go's default is 100). Under load the collector took about
// 8% of serve's CPU; at 200 the ingest and the drain each did more in 4 of 4
// interleaved pairs of `switchboard bench`, for about 4 MB more at the peak (see
// the README's Performance section).
const serveGCPercent = 200

// setGCPercent sets the collector's target percentage, unless GOGC is set: then
// Go has already taken the operator's.
func setGCPercent(env *environ, percent int) {
	if env.getenv("GOGC") == "" {
		debug.SetGCPercent(percent)
	}
}

func runServe(ctx context.Context, env *environ, args []string) error {
	setGCPercent(env, serveGCPercent)
	fs := newFlags(env, "serve", serveSynopsis)
	var cfg serveConfig
	cfg.register(fs, env)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := cfg.validate(); err != nil {
		return err
	}
	var err error
	if cfg.SecretKey, cfg.PreviousKeys, err = cfg.SecretKeys.load(env); err != nil {
		return err
	}
	logger := newLogger(env.stderr, cfg.LogFormat, env.getenv("JOURNAL_STREAM") != "")
	// Libraries that log through slog's default (mcp-go's stdio transport does,
	// with no way to pass it a logger) then log in serve's format too.
	prev := slog.Default()
	slog.SetDefault(logger)
	defer slog.SetDefault(prev)
	// Under socket activation systemd holds the port and passes it in; otherwise
	// listen on --listen. First, so that a port already taken fails serve before
	// it creates or migrates a database.
	lns, err := activationListeners()
	if err != nil {
		return err
	}
	if len(lns) == 0 {
		ln, err := net.Listen("tcp", cfg.Listen)
		if errors.Is(err, syscall.EADDRINUSE) {
			return fmt.Errorf("listen on %s: another program (another serve?) listens there: stop it, "+
				"or choose another address with --listen or SWITCHBOARD_LISTEN", cfg.Listen)
		}
		if err != nil {
			return fmt.Errorf("listen on %s: %w", cfg.Listen, err)
		}
		lns = append(lns, ln)
	}
	srv, err := newServer(ctx, cfg, logger)
	if err != nil {
		for _, ln := range lns {
			ln.Close()
		}
		return err
	}
	for _, ln := range lns {
		fmt.Fprintln(env.stdout, banner(listenURL(ln.Addr()), cfg.DB))
	}
	hints, err := firstRunHints(ctx, srv.store, cfg.DB, invokedAs(env.arg0))
	if err != nil {
		logger.Warn("read what is set up", "err", err)
	}
	for _, h := range hints {
		fmt.Fprintln(env.stdout, h)
	}
	return srv.serve(ctx, lns...)
}

// firstRunHints says what a new installation still lacks to be of use: an
// operator to log in to the board, an endpoint for an agent. Nothing once both
// exist. self is the program as the user runs it (see invokedAs).
func firstRunHints(ctx context.Context, st *store.Store, db, self string) ([]string, error) {
	var hints []string
	humans, err := st.CountHumans(ctx)
	if err != nil {
		return nil, err
	}
	if humans == 0 {
		hints = append(hints, fmt.Sprintf("next: an operator to log in to the board: %s admin create --username NAME --db %s", self, db))
	}
	eps, err := st.ListEndpoints(ctx, false)
	if err != nil {
		return hints, err
	}
	if len(eps) == 0 {
		hints = append(hints, fmt.Sprintf("next: an endpoint for an agent: %s endpoint create --agent NAME --queues QUEUE --db %s", self, db))
	}
	return hints, nil
}

// listenURL is where serve can be reached on addr, as the banner says it: a
// wildcard address ([::]:8080) is every interface, not a URL to open.
func listenURL(addr net.Addr) string {
	tcp, ok := addr.(*net.TCPAddr)
	if !ok || !tcp.IP.IsUnspecified() {
		return "http://" + addr.String()
	}
	return fmt.Sprintf("every interface, port %d", tcp.Port)
}

// server is one running Switchboard: the store, the HTTP surface and the background
// jobs. Tests and `bench` build it the same way serve does.
type server struct {
	cfg     serveConfig
	log     *slog.Logger
	store   *store.Store
	unlock  func() // releases the one-serve-per-database lock
	http    *http.Server
	metrics *metrics.Metrics
	agent   *agent.Agent
	reaper  *reaper.Reaper
	charts  *store.ChartSampler
	modules *gateway // nil without --modules-dir

	bg     sync.WaitGroup
	bgCtx  context.Context
	cancel context.CancelFunc
}

func newServer(ctx context.Context, cfg serveConfig, logger *slog.Logger) (_ *server, err error) {
	// A bad manifest stops serve before anything is created on disk.
	mans, err := loadManifests(cfg)
	if err != nil {
		return nil, err
	}
	// One serve per database: a second one would run a second reaper and module
	// set against the same queue, and `restore` must not swap the file under us.
	unlock, err := store.LockForServe(cfg.DB)
	if errors.Is(err, store.ErrInUse) {
		return nil, fmt.Errorf("another switchboard serve is running on %s", cfg.DB)
	}
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			unlock()
		}
	}()
	st, err := store.Open(ctx, cfg.DB, store.Options{Synchronous: cfg.Synchronous, Logger: logger, SecretKey: cfg.SecretKey,
		PreviousSecretKeys: cfg.PreviousKeys})
	if err != nil {
		return nil, err
	}
	// Refuse to start rather than answer every delivery 401: sealed secrets need
	// the key they were sealed with.
	if err := st.CheckSecrets(ctx); err != nil {
		st.Close()
		return nil, err
	}
	warnIfShared(logger, cfg.DB)
	warnIfNoSecretKey(logger, cfg.SecretKey)
	if cfg.MetricsAllow == "" {
		cfg.MetricsAllow = "127.0.0.0/8,::1"
	}
	allow, err := metrics.ParseCIDRs(cfg.MetricsAllow)
	if err != nil {
		st.Close()
		return nil, err
	}
	s := &server{cfg: cfg, log: logger, store: st, unlock: unlock, metrics: metrics.New(st, allow)}
	if s.modules, err = startGateway(ctx, cfg, mans, st, s.metrics, logger); err != nil {
		st.Close()
		return nil, err
	}
	baseURL := cfg.BaseURL
	if baseURL == "" && cfg.Listen != "" {
		baseURL = "http://" + cfg.Listen
		if listensEverywhere(cfg.Listen) {
			logger.Warn("listening on every interface without a base URL: the ingest URLs agents get from create_webhook "+
				"and list_webhooks name "+baseURL+", which producers cannot reach; set --base-url (SWITCHBOARD_BASE_URL) "+
				"to the address they use", "listen", cfg.Listen)
		}
	}
	s.agent, err = agent.New(st, agent.Options{BaseURL: baseURL, AllowedOrigins: strings.Split(cfg.AllowedOrigins, ","),
		MaxSessionsPerEndpoint: cfg.MaxSessions,
		Version:                version, Logger: logger, ToolSources: s.modules.sources()})
	if err != nil {
		s.modules.close(ctx)
		st.Close()
		return nil, err
	}
	s.metrics.WatchAgent(s.agent)
	// A revocation or scope edit, from the board or the CLI, reaches live sessions
	// within the watch's half second (the watch sees this process's commits too).
	st.OnForeignCommit(s.agent.EndpointsMayHaveChanged)
	s.reaper = reaper.New(st, reaper.Options{Interval: cfg.ReaperInterval, Retention: cfg.Retention,
		EventRetention: cfg.EventRetention, KeepEvents: cfg.EventRetention == 0, AuditRetention: cfg.AuditRetention, Logger: logger})
	router := httprouter.New()
	router.HandlerFunc(http.MethodGet, "/healthz", s.healthz)
	router.HandlerFunc(http.MethodGet, "/readyz", s.readyz)
	router.Handler(http.MethodGet, "/metrics", s.metrics.Handler())
	s.agent.Mount(router, "/mcp")
	receiver := ingest.NewReceiver(st, ingest.ReceiverOptions{MaxBody: cfg.MaxBody, Logger: logger,
		Observe: s.metrics.ObserveDelivery})
	router.Handler(http.MethodPost, ingest.Route, receiver)
	s.charts, err = st.NewChartSampler(ctx, store.ChartOptions{Refused: func(id int64) int64 {
		n, _, _ := receiver.Failures(id)
		return n
	}})
	if err != nil {
		s.modules.close(ctx)
		st.Close()
		return nil, err
	}
	uiOpts := web.Options{BaseURL: cfg.BaseURL, TrustProxy: cfg.TrustProxy, Logger: logger, Failures: receiver,
		Agents: s.agent}
	if s.modules != nil {
		uiOpts.Modules = s.modules.sup
	}
	ui := web.New(st, uiOpts)
	ui.Register(router)
	s.http = &http.Server{
		Handler:           s.metrics.Instrument(httpbody.Bound(guardHosts(router, baseURL), httpbody.DefaultTimeout)),
		ReadHeaderTimeout: 10 * time.Second,
		// A request line and headers past this are refused (431): webhook
		// senders, agents and browsers send a few KiB; Go's default, 1 MiB,
		// let every connection hold that much before any check.
		MaxHeaderBytes: maxHeaderBytes,
		IdleTimeout:    2 * time.Minute,
		ErrorLog:       slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	// Open MCP streams would hold Shutdown until its timeout: end them first.
	s.http.RegisterOnShutdown(s.agent.CloseSessions)
	s.http.RegisterOnShutdown(ui.Close) // live-update streams never go idle on their own
	return s, nil
}

// startBackground starts the jobs that run beside the HTTP server.
func (s *server) startBackground(ctx context.Context) {
	ctx, s.cancel = context.WithCancel(ctx)
	s.bgCtx = ctx
	s.goBG(func() {
		if err := s.store.WatchForeign(ctx, 500*time.Millisecond); err != nil {
			s.log.Error("foreign commit watcher stopped", "err", err)
		}
	})
	s.goBG(func() { s.agent.Run(ctx) })
	s.goBG(func() {
		// Backoffs a restart left untimed still ring when they end.
		if n, err := s.store.LoadBackoffs(ctx); err != nil {
			s.log.Warn("load the backoffs of failed todos", "err", err)
		} else if n > 0 {
			s.log.Info("timing the backoffs of failed todos", "todos", n)
		}
	})
	s.goBG(func() { s.modules.run(ctx, s.agent) })
	s.goBG(func() { s.reaper.Run(ctx) })
	s.goBG(func() { s.charts.Run(ctx) })
	s.goBG(func() { s.maintain(ctx, 5*time.Minute) })
}

// maintain checkpoints the WAL and refreshes planner statistics periodically.
func (s *server) maintain(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := s.store.Maintain(ctx); err != nil && ctx.Err() == nil {
				s.log.Warn("database maintenance failed", "err", err)
			}
		}
	}
}

func (s *server) goBG(fn func()) {
	s.bg.Add(1)
	go func() { defer s.bg.Done(); fn() }()
}

// serve runs until ctx ends, then shuts down in order: stop accepting and let
// in-flight requests finish within the bound, stop background jobs, close the store.
// systemd hears READY=1 once the listeners are open and everything has started.
func (s *server) serve(ctx context.Context, lns ...net.Listener) error {
	// SIGHUP (systemctl reload) restarts the capability modules: a module's new
	// executable or definitions without a restart of serve and its sessions. It
	// is taken in hand before READY=1, after which systemd may send it at once
	// (a reload queued behind the start); its default action ends the process.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	s.startBackground(ctx)
	errc := make(chan error, len(lns))
	for _, ln := range lns {
		go func() { errc <- s.http.Serve(ln) }()
		s.log.Info("serving", "addr", ln.Addr().String(), "db", s.cfg.DB)
	}
	notify(s.log, "READY=1")
	notify(s.log, "STATUS="+s.statusLine(ctx))
	s.goBG(func() { superviseSystemd(s.bgCtx, s.log, 30*time.Second, s.statusLine, s.store.Ping) })
	s.goBG(func() {
		for {
			select {
			case <-s.bgCtx.Done():
				return
			case <-hup:
				s.log.Info("SIGHUP: restarting the capability modules")
				s.modules.restartAll()
			}
		}
	})
	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-errc:
	}
	notify(s.log, "STOPPING=1")
	s.log.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
	defer cancel()
	if err := s.http.Shutdown(sctx); err != nil {
		s.log.Warn("in-flight requests did not finish in time", "err", err)
		s.http.Close()
	}
	s.close()
	if serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		return fmt.Errorf("http: %w", serveErr)
	}
	return nil
}

func (s *server) close() {
	if s.cancel != nil {
		s.cancel()
	}
	s.bg.Wait()
	// Modules audit their shutdown, so they stop before the store closes.
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
	s.modules.close(ctx)
	cancel()
	if err := s.store.Close(); err != nil {
		s.log.Error("close store", "err", err)
	}
	s.unlock()
}

func (s *server) healthz(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	io.WriteString(w, "ok\n")
}

// readyz answers 200 when the database answers and every granted module is up,
// else 503, with a JSON body that says which part is not and how each module is.
// The detail (module names, pids, tool names, errors) goes only to the addresses
// that may read /metrics; anyone else (a load balancer's probe) gets the verdict.
func (s *server) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	status := map[string]any{"database": "ok"}
	code := http.StatusOK
	if err := s.store.Ping(ctx); err != nil {
		status["database"] = err.Error()
		code = http.StatusServiceUnavailable
	} else if t := s.store.WriteTrouble(); t != nil {
		status["database"] = t.String()
		code = http.StatusServiceUnavailable
	}
	views, modulesReady, err := s.modules.readiness(ctx, s.store)
	if views != nil {
		status["modules"] = views
	}
	if err != nil || !modulesReady {
		code = http.StatusServiceUnavailable
	}
	status["ready"] = code == http.StatusOK
	if !s.metrics.Allowed(r) {
		status = map[string]any{"ready": code == http.StatusOK, "detail": readyzWithheld}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(status)
}

// readyzWithheld is /readyz's answer in place of the detail to an address outside
// --metrics-allow.
const readyzWithheld = "database and module detail is served only to --metrics-allow addresses"

// statusLine is what `systemctl status` shows: the queue at a glance.
func (s *server) statusLine(ctx context.Context) string {
	counts, err := s.store.QueueCounts(ctx)
	if err != nil {
		return "database not answering: " + err.Error()
	}
	queues := map[string]bool{}
	byState := map[string]int64{}
	for _, c := range counts {
		queues[c.Queue] = true
		byState[c.State] += c.Count
	}
	line := fmt.Sprintf("%d queues, %d pending, %d claimed, %d failed",
		len(queues), byState[store.StatePending], byState[store.StateClaimed], byState[store.StateFailed])
	if s.modules != nil {
		up, all := 0, s.modules.sup.Status()
		for _, m := range all {
			if m.State == modules.StateUp {
				up++
			}
		}
		line += fmt.Sprintf(", modules %d/%d up", up, len(all))
	}
	if t := s.store.WriteTrouble(); t != nil {
		line = "WRITES FAILING since " + t.Since.Format(time.TimeOnly) + ": " + t.Err + "; " + line
	}
	return line
}

// warnIfShared warns when other users may read the database: a new one is its
// owner's alone, but one created by an earlier Switchboard under a umask of 022
// (outside the packaged unit, whose UMask is 0077) stays as it was made, and it
// holds the ingest tokens and, without a secret key, the webhook secrets.
func warnIfShared(logger *slog.Logger, db string) {
	fi, err := os.Stat(db)
	if err != nil || fi.Mode().Perm()&0o077 == 0 {
		return
	}
	logger.Warn(fmt.Sprintf("other users may read the database (mode %04o): it holds ingest tokens and, without a secret key, webhook secrets; run chmod 600 on it",
		fi.Mode().Perm()), "db", db)
}
