// Package web is the operator board: the server-rendered UI through which the humans
// behind the agents watch and steer the queues, manage agent endpoints and read the
// audit log. Assets and templates are embedded; there is no front-end build step.
//
// Every state-changing request is authenticated by a session cookie, carries a CSRF
// token checked here, and is audited as human:<id> by the store. This package never
// runs SQL (queries live in store/), never logs a credential, session token or
// payload, and never renders a credential except once, on the page that created it.
package web

import (
	"log/slog"
	"net/http"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/switchboardhq/switchboard/internal/httpbody"
	"github.com/switchboardhq/switchboard/oauth"
	"github.com/switchboardhq/switchboard/store"
)

// Options configure the board. The zero value is usable.
type Options struct {
	// BaseURL is the public URL of this Switchboard (used in the MCP client config and
	// ingest URLs). Empty: derived from each request's Host.
	BaseURL string
	// TrustProxy honours X-Forwarded-Proto (Secure cookies) and X-Forwarded-For
	// (login throttling per client) from a reverse proxy in front of Switchboard.
	// Leave it off when clients connect directly: they could forge the headers.
	TrustProxy bool
	// SessionTTL is how long a login lasts without being used (default 7 days);
	// every use within the second half of it extends it.
	SessionTTL time.Duration
	// PageSize is how many rows a listing shows per page (default 50).
	PageSize int
	// Modules reports capability modules for the Modules page; nil: the page says
	// none are configured.
	Modules Modules
	// Failures reports refused deliveries per webhook (from the ingest receiver);
	// nil: the Webhooks page says they are not tracked.
	Failures DeliveryFailures
	// Agents reports each endpoint's live sessions and latest request (from the
	// MCP endpoint); nil: the Endpoints page shows no activity.
	Agents AgentActivity
	// Heartbeat is how often serve processes write their heartbeat (default 30 s):
	// the Processes page takes one silent for three of these as gone.
	Heartbeat time.Duration
	// OAuth, when set, checks the authorization requests whose consent page
	// is /oauth/authorize and issues their codes; nil: OAuth is off.
	OAuth *oauth.Server
	// BodyTimeout bounds how long a form body may take to arrive (default 30 s),
	// so a client that sends one slowly, or never, does not hold a connection.
	BodyTimeout time.Duration
	// Now is the clock (default: the store's).
	Now func() time.Time
	// Logger receives diagnostics (default slog.Default()).
	Logger *slog.Logger
}

// UI is the operator board. Build it with New, mount it with Register.
type UI struct {
	store     *store.Store
	opts      Options
	log       *slog.Logger
	now       func() time.Time
	assets    *assets
	pages     *pages
	live      *broadcaster
	streams   sessionStreams // the open live streams of each session, for logout
	throttle  *throttle
	hashing   hashSlots     // password checks running at once
	devices   deviceKeys    // the device cookies' signing key
	once      onceResults   // forms that mint a secret act once per token
	operators operatorNames // operators' names, by id and by name

	sessionCheck time.Duration // how often a live stream checks its session

	closeOnce sync.Once
}

// New builds the board on st. It registers a todo-change hook on st for live
// updates, so call it at wiring time, before traffic starts.
func New(st *store.Store, opts Options) *UI {
	if opts.SessionTTL <= 0 {
		opts.SessionTTL = 7 * 24 * time.Hour
	}
	if opts.PageSize <= 0 {
		opts.PageSize = 50
	}
	if opts.BodyTimeout <= 0 {
		opts.BodyTimeout = httpbody.DefaultTimeout
	}
	if opts.Now == nil {
		opts.Now = st.Now
	}
	if opts.Heartbeat <= 0 {
		opts.Heartbeat = defaultHeartbeat
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	u := &UI{
		store:    st,
		opts:     opts,
		log:      opts.Logger,
		now:      opts.Now,
		assets:   loadAssets(),
		live:     newBroadcaster(),
		throttle: newThrottle(opts.Now),
		hashing:  newHashSlots(runtime.NumCPU() / 2),

		sessionCheck: sessionCheck,
	}
	if st.OnPostgres() {
		// Several serves may share the database: so do their counts of failed logins.
		u.throttle.shared, u.throttle.log = st, opts.Logger
	}
	u.pages = loadPages(u.funcs())
	st.OnTodoChange(u.live.publish)
	// Claims and completions in other processes on the same database come without
	// their todos: an event naming none, on which a page redraws what it shows.
	st.OnForeignTodoCommit(func() { u.live.publish(store.TodoChange{}) })
	return u
}

// Register mounts the board's routes under / on router.
func (u *UI) Register(r *httprouter.Router) {
	r.GET("/assets/*file", u.serveAsset)
	r.GET("/login", u.public(u.loginPage))
	r.POST("/login", u.public(u.login))
	r.POST("/logout", u.action(u.logout))
	r.POST("/logout/everywhere", u.action(u.logoutEverywhere))
	r.GET("/account", u.page(u.accountPage))
	r.POST("/account/password", u.action(u.changePassword))
	r.POST("/account/sessions/end-others", u.action(u.endOtherSessions))

	r.GET("/", u.page(u.board))
	r.GET("/glance", u.page(u.glance))
	r.GET("/live", u.page(u.stream))

	r.POST("/todos", u.action(u.addTodo))
	r.GET("/todos/:id", u.page(u.todoPage))
	r.POST("/todos/:id/release", u.action(u.releaseTodo))
	r.POST("/todos/:id/retry", u.action(u.retryTodo))
	r.POST("/todos/:id/cancel", u.action(u.cancelTodo))
	r.POST("/todos/:id/decide", u.action(u.decideTodo))
	r.POST("/queue/pause", u.action(u.pauseQueue))
	r.POST("/queue/resume", u.action(u.resumeQueue))
	r.POST("/dead-letters/retry", u.action(u.retryDeadLetters))

	r.GET("/endpoints", u.page(u.endpointList))
	r.POST("/endpoints", u.action(u.createEndpoint))
	r.GET("/endpoints/:id", u.page(u.endpointPage)) // "new" is the creation form
	r.POST("/endpoints/:id", u.action(u.updateEndpoint))
	r.POST("/endpoints/:id/revoke", u.action(u.revokeEndpoint))

	// Webhook pages live under /webhook/:id, not /webhooks/:id, which would clash
	// with the ingest route /webhooks/w/:token in httprouter.
	r.GET("/webhooks", u.page(u.webhookList))
	r.POST("/webhooks", u.action(u.createWebhook))
	r.GET("/webhook/:id", u.page(u.webhookPage))
	// Every other page of one thing is under its list's plural (/todos/7,
	// /endpoints/7): a webhook's answers there too.
	r.GET("/webhooks/:id", func(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
		http.Redirect(w, r, "/webhook/"+url.PathEscape(p.ByName("id")), http.StatusMovedPermanently)
	})
	r.POST("/webhook/:id/rotate", u.action(u.rotateWebhook))
	r.POST("/webhook/:id/delete", u.action(u.deleteWebhook))
	r.POST("/webhook/:id/rules", u.action(u.setWebhookRules))
	r.GET("/events/:id", u.page(u.eventPage))
	r.POST("/events/:id/replay", u.action(u.replayEvent))

	r.GET("/audit", u.page(u.auditPage))
	u.registerOAuth(r)

	r.GET("/modules", u.page(u.modulesPage))
	r.GET("/processes", u.page(u.processesPage))
	r.POST("/modules/:module/approve", u.action(u.approveTool))
	r.POST("/modules/:module/restart", u.action(u.restartModule))

	// A refused form is answered at its action's address, where the browser then
	// stays: a GET of it (Enter in the address bar, a history entry) goes to the
	// page the form was on rather than to a bare 405.
	for action, page := range actionPages {
		r.GET(action, pageOf(page))
	}
}

// actionPages maps each action's address to the page its form is on; a :name in
// both is the same parameter.
var actionPages = map[string]string{
	"/todos":                       "/",
	"/logout":                      "/",
	"/logout/everywhere":           "/",
	"/account/password":            "/account",
	"/account/sessions/end-others": "/account",
	"/todos/:id/release":           "/todos/:id",
	"/todos/:id/retry":             "/todos/:id",
	"/todos/:id/cancel":            "/todos/:id",
	"/todos/:id/decide":            "/todos/:id",
	"/queue/pause":                 "/",
	"/queue/resume":                "/",
	"/dead-letters/retry":          "/?state=failed",
	"/endpoints/:id/revoke":        "/endpoints/:id",
	"/webhook/:id/rotate":          "/webhook/:id",
	"/webhook/:id/delete":          "/webhook/:id",
	"/webhook/:id/rules":           "/webhook/:id",
	"/events/:id/replay":           "/events/:id",
	"/modules/:module/approve":     "/modules",
	"/modules/:module/restart":     "/modules",
}

// pageOf redirects to page, its parameters filled in from the request's.
func pageOf(page string) httprouter.Handle {
	return func(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
		to := page
		for _, param := range p {
			to = strings.ReplaceAll(to, ":"+param.Key, url.PathEscape(param.Value))
		}
		http.Redirect(w, r, to, http.StatusSeeOther)
	}
}

// Close ends the live-update streams so that an HTTP server shutdown does not wait
// for them. Wire it with http.Server.RegisterOnShutdown.
func (u *UI) Close() {
	u.closeOnce.Do(u.live.close)
}

// Handler returns the board on its own router, for tests and for mounting elsewhere.
func (u *UI) Handler() http.Handler {
	r := httprouter.New()
	u.Register(r)
	return r
}
