// Package server assembles one running Switchboard from its packages: the store,
// the MCP endpoint, the webhook receiver, the board, the reaper, the capability
// modules and the metrics, behind one HTTP server. `switchboard serve` and the
// end-to-end tests build it the same way: New, then Run until the context ends.
// It parses no flags and reads no environment; the CLI does that.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/switchboardhq/switchboard/agent"
	"github.com/switchboardhq/switchboard/ingest"
	"github.com/switchboardhq/switchboard/internal/egress"
	"github.com/switchboardhq/switchboard/internal/httpbody"
	"github.com/switchboardhq/switchboard/internal/metrics"
	"github.com/switchboardhq/switchboard/modules"
	"github.com/switchboardhq/switchboard/oauth"
	"github.com/switchboardhq/switchboard/reaper"
	"github.com/switchboardhq/switchboard/store"
	"github.com/switchboardhq/switchboard/web"
)

// maxHeaderBytes bounds a request's line and headers (http.Server.MaxHeaderBytes).
const maxHeaderBytes = 64 << 10

// SecretKeyCredential is the systemd credential the secret key is read from when
// no flag or variable names one.
const SecretKeyCredential = "secret-key"

// Config is everything a server is told: serve fills it from flags and
// SWITCHBOARD_* variables.
type Config struct {
	Listen          string
	DB              string
	BaseURL         string
	Synchronous     string
	ReaperInterval  time.Duration
	Retention       time.Duration
	EventRetention  time.Duration
	AuditRetention  time.Duration
	ShutdownTimeout time.Duration
	MetricsAllow    string
	AllowedOrigins  string
	MaxBody         int64    // webhook body bound in bytes
	MaxSessions     int      // live MCP sessions per endpoint
	AddTodoCap      int      // pending todos one agent may have added (store.Options)
	SessionRoute    string   // goes into this process's MCP session ids, for a load balancer (agent.Options)
	SecretKey       []byte   // nil = secrets stored as plaintext
	PreviousKeys    [][]byte // during a key rotation: keys that still open what they sealed

	ModulesDir        string
	EgressPolicy      string
	ModuleConcurrency int
	ModuleCallTimeout time.Duration
	TrustProxy        bool

	// Cloudflare Access (see cfAccess): the team domain and the application's
	// audience tag; both empty: off.
	CFAccessTeamDomain string
	CFAccessAUD        string
	OAuth              bool // be the OAuth authorization server of /mcp (package oauth)
	OAuthRegistration  bool // with OAuth: dynamic client registration

	Version string       // the build's, as agents and modules are told it
	Logger  *slog.Logger // nil: slog.Default()
	// TweakModules lets tests shorten the supervisor's backoff and watch it.
	TweakModules func(*modules.Options) `json:"-"`
}

// Server is one running Switchboard: the store, the HTTP surface and the background
// jobs.
type Server struct {
	cfg     Config
	log     *slog.Logger
	store   *store.Store
	unlock  func() // releases the one-serve-per-database lock
	http    *http.Server
	metrics *metrics.Metrics
	agent   *agent.Agent
	reaper  *reaper.Reaper
	charts  *store.ChartSampler
	modules *gateway // nil without ModulesDir
	fleet   *fleet
	oauth   *oauth.Server // nil without OAuth

	bg        sync.WaitGroup
	bgCtx     context.Context
	cancel    context.CancelFunc
	closeOnce sync.Once
}

// New opens the database (one server per file) and assembles everything on it;
// nothing runs until Run. A caller that does not Run it must Close it.
func New(ctx context.Context, cfg Config) (_ *Server, err error) {
	logger := cfg.Logger
	if logger == nil {
		logger = slog.Default()
	}
	// A bad manifest stops serve before anything is created on disk.
	mans, err := loadManifests(cfg)
	if err != nil {
		return nil, err
	}
	// One serve per SQLite file: `restore` must not swap the file under us, and
	// the file's one writer is this process's.
	unlock, err := lockForServe(cfg.DB)
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
	st, err := openStore(ctx, cfg, logger)
	if err != nil {
		return nil, err
	}
	s, err := assemble(ctx, cfg, mans, st, logger)
	if err != nil {
		st.Close()
		return nil, err
	}
	s.unlock = unlock
	return s, nil
}

// lockForServe takes the one-serve-per-database lock of a SQLite file. Several
// serves may share one PostgreSQL database (a fleet, see fleet.go).
func lockForServe(db string) (unlock func(), err error) {
	if store.IsPostgres(db) {
		return func() {}, nil
	}
	return store.LockForServe(db)
}

// openStore opens the database and refuses to start rather than answer every
// delivery 401: sealed secrets need the key they were sealed with.
func openStore(ctx context.Context, cfg Config, logger *slog.Logger) (*store.Store, error) {
	st, err := store.Open(ctx, cfg.DB, store.Options{Synchronous: cfg.Synchronous, Logger: logger, SecretKey: cfg.SecretKey,
		PreviousSecretKeys: cfg.PreviousKeys, AddTodoCap: cfg.AddTodoCap})
	if err != nil {
		return nil, err
	}
	if err := st.CheckSecrets(ctx); err != nil {
		st.Close()
		return nil, err
	}
	warnIfShared(logger, cfg.DB)
	warnIfNoSecretKey(logger, cfg.SecretKey)
	return st, nil
}

// assemble builds the parts on an open store: metrics, modules, the agent
// endpoint, the reaper, the charts and the HTTP surface.
func assemble(ctx context.Context, cfg Config, mans []modules.Manifest, st *store.Store, logger *slog.Logger) (_ *Server, err error) {
	if cfg.MetricsAllow == "" {
		cfg.MetricsAllow = "127.0.0.0/8,::1"
	}
	allow, err := metrics.ParseCIDRs(cfg.MetricsAllow)
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, log: logger, store: st, metrics: metrics.New(st, allow)}
	if s.modules, err = startGateway(ctx, cfg, mans, st, s.metrics, logger); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			s.modules.close(ctx)
		}
	}()
	baseURL := cfg.BaseURL
	if baseURL == "" && cfg.Listen != "" {
		baseURL = "http://" + cfg.Listen
		if ListensEverywhere(cfg.Listen) {
			logger.Warn("listening on every interface without a base URL: the ingest URLs agents get from create_webhook "+
				"and list_webhooks name "+baseURL+", which producers cannot reach; set --base-url (SWITCHBOARD_BASE_URL) "+
				"to the address they use", "listen", cfg.Listen)
		}
	}
	access, err := cfAccess(cfg, logger)
	if err != nil {
		return nil, err
	}
	resourceMetadata := ""
	if s.oauth, err = newOAuth(cfg, st, baseURL, logger); err != nil {
		return nil, err
	} else if s.oauth != nil {
		resourceMetadata = s.oauth.ResourceMetadataURL()
	}
	s.agent, err = agent.New(st, agent.Options{BaseURL: baseURL, AllowedOrigins: strings.Split(cfg.AllowedOrigins, ","),
		MaxSessionsPerEndpoint: cfg.MaxSessions, ResourceMetadata: resourceMetadata, SessionRoute: cfg.SessionRoute,
		Version: cfg.Version, Logger: logger, ToolSources: s.modules.sources(), CFAccess: access})
	if err != nil {
		return nil, err
	}
	s.metrics.WatchAgent(s.agent)
	// A revocation or scope edit, from the board or the CLI, reaches live sessions
	// within the watch's half second (the watch sees this process's commits too).
	st.OnForeignCommit(s.agent.EndpointsMayHaveChanged)
	s.fleet = newFleet(st, cfg.Version, logger)
	s.fleet.modules = s.modules.states
	s.reaper = reaper.New(st, reaper.Options{Interval: cfg.ReaperInterval, Retention: cfg.Retention,
		EventRetention: cfg.EventRetention, KeepEvents: cfg.EventRetention == 0, AuditRetention: cfg.AuditRetention, Logger: logger,
		Leads: s.fleet.Leads})
	s.fleet.onLead = s.reaper.Kick
	s.metrics.WatchProcess(s.fleet.self.ID, s.fleet.self.Host, cfg.Version, s.fleet.Leads)
	if err := s.routes(ctx, baseURL); err != nil {
		return nil, err
	}
	return s, nil
}

// routes mounts every route on one router behind the HTTP server.
func (s *Server) routes(ctx context.Context, baseURL string) error {
	router := httprouter.New()
	router.HandlerFunc(http.MethodGet, "/healthz", s.healthz)
	router.HandlerFunc(http.MethodGet, "/readyz", s.readyz)
	router.Handler(http.MethodGet, "/metrics", s.metrics.Handler())
	s.agent.Mount(router, "/mcp")
	receiver := ingest.NewReceiver(s.store, ingest.ReceiverOptions{MaxBody: s.cfg.MaxBody, Logger: s.log,
		Observe: s.metrics.ObserveDelivery})
	router.Handler(http.MethodPost, ingest.Route, receiver)
	var err error
	s.charts, err = s.store.NewChartSampler(ctx, store.ChartOptions{Refused: func(id int64) int64 {
		n, _, _ := receiver.Failures(id)
		return n
	}})
	if err != nil {
		return err
	}
	uiOpts := web.Options{BaseURL: s.cfg.BaseURL, TrustProxy: s.cfg.TrustProxy, Logger: s.log, Failures: receiver,
		Agents: s.agent, Heartbeat: s.fleet.every, OAuth: s.oauth}
	if s.oauth != nil {
		s.oauth.Mount(router)
	}
	if s.modules != nil {
		uiOpts.Modules = s.modules.sup
	}
	ui := web.New(s.store, uiOpts)
	ui.Register(router)
	s.http = &http.Server{
		Handler:           s.metrics.Instrument(httpbody.Bound(guardHosts(router, baseURL), httpbody.DefaultTimeout)),
		ReadHeaderTimeout: 10 * time.Second,
		// A request line and headers past this are refused (431): webhook
		// senders, agents and browsers send a few KiB; Go's default, 1 MiB,
		// let every connection hold that much before any check.
		MaxHeaderBytes: maxHeaderBytes,
		IdleTimeout:    2 * time.Minute,
		ErrorLog:       slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	// Open MCP streams would hold Shutdown until its timeout: end them first.
	s.http.RegisterOnShutdown(s.agent.CloseSessions)
	s.http.RegisterOnShutdown(ui.Close) // live-update streams never go idle on their own
	return nil
}

// Store is the server's database, for what the caller says about it (serve's
// first-run hints) and for tests.
func (s *Server) Store() *store.Store { return s.store }

// ListensEverywhere reports whether listen names no host (":8080") or the
// unspecified address (0.0.0.0, [::]): fine to bind, useless in a URL.
func ListensEverywhere(listen string) bool {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return host == "" || (ip != nil && ip.IsUnspecified())
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

// warnIfNoSecretKey says, once at serve's start, that without a key what the
// database holds is enough to sign deliveries and forge device cookies, and how
// to give it one.
func warnIfNoSecretKey(logger *slog.Logger, key []byte) {
	if key != nil {
		return
	}
	logger.Warn("no secret encryption key: webhook secrets and the device-cookie key are stored in the database as " +
		"plaintext; give a 32-byte key (openssl rand -base64 32) in --secret-key-file, SWITCHBOARD_SECRET_KEY_FILE, " +
		"SWITCHBOARD_SECRET_ENCRYPTION_KEY or the systemd credential " + SecretKeyCredential +
		", then run switchboard secrets reencrypt")
}

// newOAuth builds the authorization server when OAuth is on: its issuer is the
// public URL, and client metadata documents are fetched under the egress policy.
func newOAuth(cfg Config, st *store.Store, baseURL string, logger *slog.Logger) (*oauth.Server, error) {
	if !cfg.OAuth {
		return nil, nil
	}
	policy, err := egress.Parse(cfg.EgressPolicy)
	if err != nil {
		return nil, err
	}
	// Clients look for the metadata at the root of the host (RFC 9728, RFC
	// 8414), which a proxy that serves Switchboard under a path does not send here.
	if u, err := url.Parse(baseURL); err == nil && strings.Trim(u.Path, "/") != "" {
		logger.Warn("OAuth needs the base URL to be the root of its host: hosted agents look for "+
			u.Scheme+"://"+u.Host+oauth.ProtectedResourcePath+" and cannot connect; serve Switchboard at the root "+
			"of a host, or turn OAuth off with --oauth=false", "base_url", baseURL)
	}
	return oauth.New(st, oauth.Options{BaseURL: baseURL, Registration: cfg.OAuthRegistration,
		Metadata: oauth.MetadataClient(policy, nil), Logger: logger})
}
