package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/switchboardhq/switchboard/agent"
	"github.com/switchboardhq/switchboard/ingest"
	"github.com/switchboardhq/switchboard/internal/cfaccess"
	"github.com/switchboardhq/switchboard/internal/server"
	"github.com/switchboardhq/switchboard/store"
)

const serveSynopsis = `serve [--listen ADDR] [--db FILE] [--base-url URL] [--reaper-interval DURATION] [flags]`

// serveConfig is everything serve is told by flags and SWITCHBOARD_* variables
// (flags win over the environment, which wins over the defaults): the server's
// Config, and what serve itself makes of the rest.
type serveConfig struct {
	server.Config
	LogFormat  string
	SecretKeys keyFiles // see keyFiles.load
	envErrs    []string // SWITCHBOARD_* settings that did not parse
}

func (c *serveConfig) register(fs interface {
	StringVar(*string, string, string, string)
	DurationVar(*time.Duration, string, time.Duration, string)
	IntVar(*int, string, int, string)
	Int64Var(*int64, string, int64, string)
	BoolVar(*bool, string, bool, string)
}, env *environ) {
	fs.StringVar(&c.Listen, "listen", envOr(env, "SWITCHBOARD_LISTEN", "127.0.0.1:8080"), "address to listen on (env SWITCHBOARD_LISTEN)")
	fs.StringVar(&c.DB, "db", defaultDB(env), dbUsage)
	fs.StringVar(&c.BaseURL, "base-url", envOr(env, "SWITCHBOARD_BASE_URL", ""), "public URL used in ingest URLs (env SWITCHBOARD_BASE_URL; default http://<listen>)")
	fs.StringVar(&c.Synchronous, "synchronous", envOr(env, "SWITCHBOARD_SYNCHRONOUS", store.SyncFull),
		"FULL: every acknowledged write survives power loss; NORMAL: fewer fsyncs, may lose the last writes on power loss; SQLite only (env SWITCHBOARD_SYNCHRONOUS)")
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
	fs.IntVar(&c.AddTodoCap, "add-todo-cap", int(envInt64(env, "SWITCHBOARD_ADD_TODO_CAP", store.MaxAddedPending, &c.envErrs)),
		"pending todos one agent may have added with add_todo; past it add_todo answers ceiling_exceeded (env SWITCHBOARD_ADD_TODO_CAP)")
	fs.StringVar(&c.CFAccessTeamDomain, "cf-access-team-domain", envOr(env, "SWITCHBOARD_CF_ACCESS_TEAM_DOMAIN", ""),
		"Cloudflare Access team domain (myteam.cloudflareaccess.com): /mcp accepts its verified assertions, with --cf-access-aud (env SWITCHBOARD_CF_ACCESS_TEAM_DOMAIN)")
	fs.StringVar(&c.CFAccessAUD, "cf-access-aud", envOr(env, "SWITCHBOARD_CF_ACCESS_AUD", ""),
		"the Cloudflare Access application's audience (AUD) tag (env SWITCHBOARD_CF_ACCESS_AUD)")
	fs.BoolVar(&c.OAuth, "oauth", envBoolOr(env, "SWITCHBOARD_OAUTH", true, &c.envErrs),
		"be the OAuth authorization server of /mcp, for hosted agents that cannot send a bearer; consent on the board (env SWITCHBOARD_OAUTH)")
	fs.BoolVar(&c.OAuthRegistration, "oauth-registration", envBoolOr(env, "SWITCHBOARD_OAUTH_REGISTRATION", true, &c.envErrs),
		"let OAuth clients register themselves (RFC 7591) at /oauth/register (env SWITCHBOARD_OAUTH_REGISTRATION)")
	fs.StringVar(&c.SessionRoute, "session-route", envOr(env, "SWITCHBOARD_SESSION_ROUTE", ""),
		"in a fleet behind a load balancer: a name for this process that its MCP session ids carry, so the balancer "+
			"sends a session to the process holding it (env SWITCHBOARD_SESSION_ROUTE; see docs/fleet.md)")
	secretKeyFlags(fs, env, &c.SecretKeys)
}

// envBoolOr is envBool with a default for an unset variable.
func envBoolOr(env *environ, name string, def bool, bad *[]string) bool {
	if strings.TrimSpace(env.getenv(name)) == "" {
		return def
	}
	return envBool(env, name, bad)
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
	// PostgreSQL's durability is the server's synchronous_commit, not ours to weaken.
	if store.IsPostgres(c.DB) && !strings.EqualFold(c.Synchronous, store.SyncFull) {
		return usageErr("--synchronous (SWITCHBOARD_SYNCHRONOUS) is SQLite only: on PostgreSQL set synchronous_commit on the server")
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
	if c.AddTodoCap <= 0 {
		return usageErr("--add-todo-cap must be positive")
	}
	if (c.CFAccessTeamDomain == "") != (c.CFAccessAUD == "") {
		return usageErr("--cf-access-team-domain and --cf-access-aud go together: give both, or neither")
	}
	if _, err := cfaccess.TeamHost(c.CFAccessTeamDomain); c.CFAccessTeamDomain != "" && err != nil {
		return usageErr("--cf-access-team-domain: %v", err)
	}
	if err := agent.CheckSessionRoute(c.SessionRoute); err != nil {
		return usageErr("--session-route: %v", err)
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
	fs := newFlags(env, "serve", serveSynopsis)
	var cfg serveConfig
	cfg.register(fs, env)
	hideDBPassword(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	setGCPercent(env, serveGCPercent)
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
	lns, err := server.ActivationListeners()
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
	cfg.Version, cfg.Logger = env.buildVersion(), logger
	srv, err := server.New(ctx, cfg.Config)
	if err != nil {
		for _, ln := range lns {
			ln.Close()
		}
		return err
	}
	for _, ln := range lns {
		fmt.Fprintln(env.stdout, banner(listenURL(ln.Addr()), srv.Store().Path(), env.buildVersion()))
	}
	hints, err := firstRunHints(ctx, srv.Store(), invokedAs(env.arg0))
	if err != nil {
		logger.Warn("read what is set up", "err", err)
	}
	for _, h := range hints {
		fmt.Fprintln(env.stdout, h)
	}
	return srv.Run(ctx, lns...)
}

// firstRunHints says what a new installation still lacks to be of use: an
// operator to log in to the board, an endpoint for an agent. Nothing once both
// exist. self is the program as the user runs it (see invokedAs). The commands
// name the database as it may be pasted (store.PasteableDB): a PostgreSQL URL
// without its password.
func firstRunHints(ctx context.Context, st *store.Store, self string) ([]string, error) {
	var hints []string
	db, withoutPassword := st.PasteableDB()
	if withoutPassword {
		db += store.PasswordElsewhere
	}
	humans, err := st.CountOperators(ctx)
	if err != nil {
		return nil, err
	}
	if humans == 0 {
		hints = append(hints, fmt.Sprintf("next: an operator to log in to the board: %s operator create --username NAME --db %s", self, db))
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
