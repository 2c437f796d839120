// Package metrics builds switchboard's Prometheus collectors from the hooks and
// stats the other packages expose, so that only it depends on Prometheus.
// /metrics names queues and agents, so it must never answer a client outside
// --metrics-allow (loopback by default).
package metrics

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/switchboardhq/switchboard/agent"
	"github.com/switchboardhq/switchboard/internal/forwarded"
	"github.com/switchboardhq/switchboard/modules"
	"github.com/switchboardhq/switchboard/store"
)

// Metrics is one server's registry and the collectors the wiring feeds.
type Metrics struct {
	reg         *prometheus.Registry
	httpLatency *prometheus.HistogramVec
	transitions *prometheus.CounterVec
	deliveries  *prometheus.CounterVec
	allow       []*net.IPNet
}

// New registers the store's collectors; allow is who may read /metrics.
func New(st *store.Store, allow []*net.IPNet) *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry(), allow: allow}
	m.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.httpLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "switchboard_http_request_duration_seconds",
		Help:    "HTTP request latency by route family, method and status code.",
		Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 10},
	}, []string{"route", "method", "code"})
	m.transitions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "switchboard_todo_transitions_total",
		Help: "Todo transitions by queue and cause (add, claim, complete, release, retry, retry_backoff, dead_letter, lease_expired, cancel, resume, approval_asked, approval_decided; backoff_over: a retried todo became claimable).",
	}, []string{"queue", "cause"})
	m.deliveries = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "switchboard_webhook_deliveries_total",
		Help: "Webhook deliveries by source type and outcome (accepted, duplicate, bad signature, rate limited, …).",
	}, []string{"source", "outcome"})
	m.reg.MustRegister(m.httpLatency, m.transitions, m.deliveries, &todoCollector{st: st},
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "switchboard_store_commits_total",
			Help: "Group-commit transactions (each one fsync under synchronous=FULL).",
		}, func() float64 { return float64(st.WriterStats().Batches) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "switchboard_store_writer_busy_seconds_total",
			Help: "Time the single writer spent running transactions; near 1 s per second, writes queue.",
		}, func() float64 { return st.WriterStats().Busy.Seconds() }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "switchboard_store_writes_total",
			Help: "Write requests committed or refused; writes/commits is the mean group-commit batch.",
		}, func() float64 { return float64(st.WriterStats().Requests) }),
	)
	m.reg.MustRegister(&flowCollector{st: st})
	st.OnTodoChange(func(c store.TodoChange) {
		if c.Cause != "" {
			m.transitions.WithLabelValues(c.Queue, c.Cause).Inc()
		}
	})
	return m
}

// todoCollector reports todos by queue and state at scrape time.
type todoCollector struct{ st *store.Store }

var (
	todosDesc    = prometheus.NewDesc("switchboard_todos", "Todos by queue and state.", []string{"queue", "state"}, nil)
	headWaitDesc = prometheus.NewDesc("switchboard_queue_head_wait_seconds",
		"How long the todo claim_next takes next on the queue has been claimable; 0 when none is. "+
			"It grows while no agent claims from the queue.", []string{"queue"}, nil)
)

func (c *todoCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- todosDesc
	ch <- headWaitDesc
	ch <- pausedDesc
	ch <- awaitingDesc
}

func (c *todoCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	counts, err := c.st.QueueCounts(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(todosDesc, err)
		return
	}
	for _, q := range counts {
		ch <- prometheus.MustNewConstMetric(todosDesc, prometheus.GaugeValue, float64(q.Count), q.Queue, q.State)
	}
	heads, err := c.st.QueueHeads(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(headWaitDesc, err)
		return
	}
	waits := map[string]float64{}
	for _, h := range heads {
		waits[h.Queue] = max(c.st.Now().Sub(h.Since).Seconds(), 0)
	}
	// Every queue with a pending todo has a series: 0 while its todos all back off.
	for _, q := range counts {
		if q.State == store.StatePending {
			ch <- prometheus.MustNewConstMetric(headWaitDesc, prometheus.GaugeValue, waits[q.Queue], q.Queue)
		}
	}
	collectControl(ctx, c.st, counts, ch)
}

var (
	pausedDesc = prometheus.NewDesc("switchboard_queue_paused",
		"1 while a human has the queue paused: its todos are not claimable.", []string{"queue"}, nil)
	awaitingDesc = prometheus.NewDesc("switchboard_queue_awaiting_approval",
		"Todos on the queue whose worker waits for a human's approval.", []string{"queue"}, nil)
)

// collectControl reports, for every queue with todos or paused, whether it is
// paused and how many of its todos await approval.
func collectControl(ctx context.Context, st *store.Store, counts []store.QueueCount, ch chan<- prometheus.Metric) {
	paused, err := st.PausedQueues(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(pausedDesc, err)
		return
	}
	waits, err := st.QueueWaits(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(awaitingDesc, err)
		return
	}
	queues := map[string]float64{}
	for _, q := range counts {
		queues[q.Queue] = 0
	}
	for _, p := range paused {
		queues[p.Queue] = 1
	}
	for q, p := range queues {
		ch <- prometheus.MustNewConstMetric(pausedDesc, prometheus.GaugeValue, p, q)
		ch <- prometheus.MustNewConstMetric(awaitingDesc, prometheus.GaugeValue, float64(waits[q]), q)
	}
}

// Handler serves /metrics to allowed clients only.
func (m *Metrics) Handler() http.Handler {
	h := promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !m.Allowed(r) {
			http.Error(w, "metrics are not served to this address (see --metrics-allow)", http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
	})
}

func (m *Metrics) Allowed(r *http.Request) bool {
	// Behind a reverse proxy every peer looks local: a forwarded request is judged
	// by who it was forwarded for, and refused when that is not allowed either.
	addrs := []string{}
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		addrs = append(addrs, host)
	}
	addrs = append(addrs, forwarded.For(r.Header)...)
	for _, a := range addrs {
		ip := net.ParseIP(a)
		if ip == nil || !ipAllowed(ip, m.allow) {
			return false
		}
	}
	return len(addrs) > 0
}

func ipAllowed(ip net.IP, nets []*net.IPNet) bool {
	for _, n := range nets {
		if n.Contains(ip) {
			return true
		}
	}
	return false
}

// ParseCIDRs parses a comma-separated list of CIDRs or bare IPs.
func ParseCIDRs(list string) ([]*net.IPNet, error) {
	var out []*net.IPNet
	for _, p := range strings.Split(list, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		cidr := p
		if !strings.Contains(p, "/") {
			if ip := net.ParseIP(p); ip != nil && ip.To4() != nil {
				cidr += "/32"
			} else {
				cidr += "/128"
			}
		}
		_, n, err := net.ParseCIDR(cidr)
		if err != nil {
			return nil, fmt.Errorf("metrics allow list: %q is not an IP or CIDR", p)
		}
		out = append(out, n)
	}
	return out, nil
}

// Instrument wraps the whole HTTP surface to record latency by route family (not
// by full path: tokens and ids would explode the label set).
func (m *Metrics) Instrument(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w, code: 200}
		next.ServeHTTP(sw, r)
		m.httpLatency.WithLabelValues(routeFamily(r.URL.Path), methodLabel(r.Method), strconv.Itoa(sw.code)).Observe(time.Since(start).Seconds())
	})
}

// methodLabel is a request's method as a label value: one of the methods the
// server answers, else "other". A client may send any token as its method, and a
// label per token would grow the series (and every scrape) without bound.
func methodLabel(method string) string {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions:
		return method
	}
	return "other"
}

func routeFamily(path string) string {
	for _, p := range []string{"/mcp", "/webhooks/", "/metrics", "/healthz", "/readyz", "/assets/", "/events"} {
		if strings.HasPrefix(path, p) {
			return strings.TrimSuffix(p, "/")
		}
	}
	return "ui"
}

// statusWriter records the status code; it passes Flush through for SSE streams.
type statusWriter struct {
	http.ResponseWriter
	code        int
	wroteHeader bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wroteHeader {
		w.code, w.wroteHeader = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// WatchAgent exports the MCP endpoint's session and doorbell counters.
func (m *Metrics) WatchAgent(a *agent.Agent) {
	m.reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "switchboard_mcp_sessions", Help: "Live MCP sessions."},
			func() float64 { return float64(a.Stats().Sessions) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "switchboard_mcp_streams", Help: "MCP sessions with an open GET stream (doorbell listeners)."},
			func() float64 { return float64(a.Stats().Streams) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "switchboard_mcp_listeners", Help: "Open subscriptions/listen streams of MCP 2026-07-28 (doorbell listeners without a session)."},
			func() float64 { return float64(a.Stats().Listeners) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "switchboard_doorbell_rings_total", Help: "Doorbell notifications handed to sessions."},
			func() float64 { return float64(a.Stats().RingsSent) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "switchboard_doorbell_drops_total", Help: "Doorbell rings dropped (queue full or a session's buffer full); the todo stays queued."},
			func() float64 { st := a.Stats(); return float64(st.RingsDropped + st.RingsBlocked) }),
	)
}

// WatchProcess exports which process this is, for telling the processes of a
// fleet apart (and their versions during an upgrade) beside the scrape's own
// instance label, and whether it runs the reaper now.
func (m *Metrics) WatchProcess(id, host, version string, leads func() bool) {
	info := prometheus.NewGauge(prometheus.GaugeOpts{Name: "switchboard_process_info",
		Help: "1, labelled with this serve process's instance id (new at each start), host and version.",
		// A label value must be UTF-8 (MustRegister panics otherwise); a host name is bytes.
		ConstLabels: prometheus.Labels{"instance_id": strings.ToValidUTF8(id, "\uFFFD"),
			"host": strings.ToValidUTF8(host, "\uFFFD"), "version": strings.ToValidUTF8(version, "\uFFFD")}})
	info.Set(1)
	m.reg.MustRegister(info, prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "switchboard_reaper_leader",
		Help: "1 while this process holds the reaper's role (one process of a fleet at a time)."},
		func() float64 {
			if leads() {
				return 1
			}
			return 0
		}))
}

// ObserveDelivery counts one webhook delivery; the receiver calls it.
func (m *Metrics) ObserveDelivery(source, outcome string) {
	m.deliveries.WithLabelValues(source, outcome).Inc()
}

// ObserveModules registers the capability-module metrics and returns the hook the
// gateway reports each finished call to. Restarts and states are read from status
// at scrape time.
func (m *Metrics) ObserveModules(status func() []modules.ModuleStatus) func(agent.ModuleCall) {
	calls := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "switchboard_module_calls_total",
		Help: "Module tool calls by module, tool and outcome (ok, error, unavailable, forbidden, rate_limited, not_found).",
	}, []string{"module", "tool", "outcome"})
	latency := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "switchboard_module_call_duration_seconds",
		Help:    "Module tool call latency through the gateway, by module.",
		Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 10, 30},
	}, []string{"module"})
	m.reg.MustRegister(calls, latency, &moduleCollector{status: status})
	return func(c agent.ModuleCall) {
		calls.WithLabelValues(c.Module, c.Tool, c.Outcome).Inc()
		latency.WithLabelValues(c.Module).Observe(c.Duration.Seconds())
	}
}

var (
	moduleRestartsDesc = prometheus.NewDesc("switchboard_module_restarts_total", "Times a module was started again after it failed.", []string{"module"}, nil)
	moduleUpDesc       = prometheus.NewDesc("switchboard_module_up", "1 while the module is up and serving its tools.", []string{"module"}, nil)
)

// moduleCollector reports each module's restarts and whether it is up.
type moduleCollector struct{ status func() []modules.ModuleStatus }

func (c *moduleCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- moduleRestartsDesc
	ch <- moduleUpDesc
}

func (c *moduleCollector) Collect(ch chan<- prometheus.Metric) {
	for _, ms := range c.status() {
		up := 0.0
		if ms.State == modules.StateUp {
			up = 1
		}
		ch <- prometheus.MustNewConstMetric(moduleRestartsDesc, prometheus.CounterValue, float64(ms.Restarts), ms.Name)
		ch <- prometheus.MustNewConstMetric(moduleUpDesc, prometheus.GaugeValue, up, ms.Name)
	}
}
