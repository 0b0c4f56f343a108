package metrics

import (
	"cmp"
	"errors"
	"maps"
	"net/http"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sluicelab/sluice/internal/admission"
	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/link"
	"github.com/sluicelab/sluice/internal/netem"
	"github.com/sluicelab/sluice/internal/session"
	"github.com/sluicelab/sluice/internal/wlm"
	"github.com/sluicelab/sluice/internal/wlm/views"
)

// Catalog is the catalog service: the catalog, its revision, since when
// its store is unreachable, and the audit log's counts.
type Catalog interface {
	Catalog() *wlm.Catalog
	AppliedRevision() uint64
	StaleSince() time.Time
	AuditCounts() map[wlm.AuditCount]uint64
}

// Runtime is the binding runtime: the links, the sessions, the routes.
type Runtime interface {
	Link(name string) *link.Link
	Registry() *session.Registry
	Routes() map[string]wlm.Route
}

// Rules is the exception-rule evaluator's counters.
type Rules interface{ Stats() wlm.Stats }

// Admission is the pools' admission counts and block times.
type Admission interface {
	AdmissionStats() map[string]admission.PoolStats
	BlockTimes() map[string]wlm.BlockHistogram
}

// Unsent reports, per route, the bytes written to client sockets that the
// kernel has not sent yet. proxy.Server implements it.
type Unsent interface {
	UnsentBytes() map[string]int64
}

// Lateness reports how late the routes' delay lines release, as
// histograms per route, direction and kind of wait. proxy.Server
// implements it.
type Lateness interface {
	ReleaseLateness(f func(route, direction, wait string, h netem.LatenessSnapshot))
}

// StoreResets reports how many times the shared catalog store lost its
// history (etcd's revisions went back or its cluster changed) and the
// catalog was reloaded whole.
type StoreResets interface {
	Resets() uint64
}

// Panics reports, per route, the sessions that ended because one of their
// goroutines panicked. proxy.Server implements it.
type Panics interface {
	SessionPanics() map[string]uint64
}

// Loops reports how many sessions the event loops have relayed and how
// many of those they handed to goroutines of their own. proxy.Server
// implements it.
type Loops interface {
	LoopSessions() (taken, handed uint64)
}

// FastPath reports the kernel fast path's session events: sessions
// paired in the kernel, and pairs resumed (the kernel relays) and paused
// (back to user space). proxy.Server implements it.
type FastPath interface {
	FastPathEvents() (paired, resumed, paused uint64)
	FastPathBytes() uint64
}

// Options configure Metrics.
type Options struct {
	// Catalog, Runtime, Rules and Admission are the workload manager's
	// roles (*wlm.Service, *wlm.Runtime, *wlm.Rules, *wlm.Admission).
	// Required.
	Catalog   Catalog
	Runtime   Runtime
	Rules     Rules
	Admission Admission
	// Budget is the fleet's shared budget, false while there is none;
	// without one (nil, or false) the sluice_budget_* gauges are left
	// out.
	Budget func() (views.BudgetState, bool)
	// WhatIf is the what-if table; nil leaves the sluice_whatif_* gauges
	// out.
	WhatIf views.WhatIfSnapshotter
	// Network is the network controller's estimates (SHOW NETWORK); nil
	// leaves the sluice_network_* gauges out.
	Network func() []views.NetworkRow
	// Unsent provides the kernel's unsent bytes per route; nil leaves
	// sluice_route_unsent_bytes out.
	Unsent Unsent
	// Lateness provides the delay lines' release lateness; nil leaves
	// sluice_emulation_release_lateness_seconds out.
	Lateness Lateness
	// Panics provides the recovered session panics; nil leaves
	// sluice_session_panics_total out.
	Panics Panics
	// Loops provides the event loops' session counts; nil leaves
	// sluice_event_loop_sessions_total out.
	Loops Loops
	// FastPath provides the kernel fast path's events; nil leaves
	// sluice_fast_path_events_total out.
	FastPath FastPath
	// StoreResets provides the catalog store's resets; nil (a file
	// store) leaves sluice_catalog_store_resets_total out.
	StoreResets StoreResets
	// NoProcess leaves out the Go runtime and process collectors (tests
	// that compare whole expositions).
	NoProcess bool
	// Clock times how long sessions have sat idle in a transaction
	// (sluice_pool_idle_in_transaction_max_seconds); nil is clock.Real.
	Clock clock.Clock
}

// durationBuckets are the upper bounds of sluice_statement_duration_seconds,
// in seconds: 0.5ms to 30 min.
var durationBuckets = []float64{
	0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
	1, 2.5, 5, 10, 30, 60, 300, 1800,
}

// Metrics is sluice's Prometheus registry. Build it with New, serve
// Handler, and Close it to stop watching the session registry. It is
// safe for concurrent use.
type Metrics struct {
	reg     *prometheus.Registry
	cat     Catalog
	unwatch func()
	users   *userLabels
	bytes   *routeBytes

	routeStatements, poolStatements *prometheus.CounterVec
	ended                           *prometheus.CounterVec
	duration                        *prometheus.HistogramVec
	penalized                       *prometheus.CounterVec
}

// New returns the metrics of o.Manager, registered in a registry of their
// own, and starts watching the session registry for ended and penalised
// statements.
func New(o Options) (*Metrics, error) {
	if o.Catalog == nil || o.Runtime == nil || o.Rules == nil || o.Admission == nil {
		return nil, errors.New("metrics: Options.Catalog, Runtime, Rules and Admission are required")
	}
	m := &Metrics{reg: prometheus.NewRegistry(), cat: o.Catalog, users: &userLabels{}, bytes: newRouteBytes()}
	labels := []string{"route", "user", "pool"}
	m.routeStatements = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_route_statements_total",
		Help: "Statements ended, by route and outcome (ok, error, cancelled).",
	}, []string{"route", "outcome"})
	m.poolStatements = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_pool_statements_total",
		Help: "Statements ended, by resource pool (\"\" for none) and outcome (ok, error, cancelled).",
	}, []string{"pool", "outcome"})
	m.ended = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_statements_total",
		Help: "Statements ended, by route, user, pool and outcome (ok, error, cancelled).",
	}, append(labels, "outcome"))
	m.duration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "sluice_statement_duration_seconds",
		Help:    "Duration of ended statements, from their first byte to the server's final answer.",
		Buckets: durationBuckets,
	}, labels)
	m.penalized = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_statements_penalized_total",
		Help: "Statements moved to the low network class by a penalty rule.",
	}, labels)
	col := newCollector(o)
	col.users, col.bytes = m.users, m.bytes
	cs := []prometheus.Collector{m.ended, m.duration, m.penalized, m.routeStatements, m.poolStatements, col}
	if !o.NoProcess {
		cs = append(cs, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	for _, c := range cs {
		if err := m.reg.Register(c); err != nil {
			return nil, err
		}
	}
	m.unwatch = o.Runtime.Registry().Watch(session.WatcherFunc(m.observe))
	for _, s := range o.Runtime.Registry().Sessions() {
		m.bytes.opened(s)
	}
	return m, nil
}

// user returns the label of user under the catalog's
// metrics_user_labels.
func (m *Metrics) user(user string) string {
	return m.users.label(user, m.cat.Catalog().Settings.MetricsUserLabels)
}

// observe counts statement events. It runs in the goroutine that caused
// the event and does not block.
func (m *Metrics) observe(e session.Event) {
	switch e.Kind {
	case session.SessionOpened:
		m.bytes.opened(e.Session)
	case session.SessionClosed:
		m.bytes.closedSession(e.Session)
	case session.StatementEnded:
		s := e.Statement.Snapshot()
		user, outcome := m.user(s.User), s.Outcome.String()
		m.ended.WithLabelValues(s.Route, user, s.Pool, outcome).Inc()
		m.routeStatements.WithLabelValues(s.Route, outcome).Inc()
		m.poolStatements.WithLabelValues(s.Pool, outcome).Inc()
		if d := s.Ended.Sub(s.Started); d >= 0 {
			m.duration.WithLabelValues(s.Route, user, s.Pool).Observe(d.Seconds())
		}
	case session.StatementPenalized:
		st := e.Statement
		m.penalized.WithLabelValues(st.Session.Info.Route, m.user(st.Session.User()), st.Session.Pool()).Inc()
	}
}

// Registry returns the Prometheus registry, for gathering.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the exposition (text or protobuf, as negotiated).
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// Close stops watching the session registry. Safe to call twice.
func (m *Metrics) Close() error {
	if m.unwatch != nil {
		m.unwatch()
		m.unwatch = nil
	}
	return nil
}

// collector converts the state of links, sessions, rules and routes into
// metrics at scrape time.
type collector struct {
	cat     Catalog
	rt      Runtime
	rules   Rules
	adm     Admission
	budget  func() (views.BudgetState, bool)
	network func() []views.NetworkRow
	whatIf  views.WhatIfSnapshotter
	clk     clock.Clock
	unsent  Unsent
	late    Lateness
	panics  Panics
	loops   Loops
	fast    FastPath
	resets  StoreResets
	users   *userLabels // the Metrics' own
	bytes   *routeBytes // the Metrics' own

	linkBytes, poolBytes, queueDelay, waiting, queued      *prometheus.Desc
	capacity, delay, jitter, rate, sessions, running, pens *prometheus.Desc
	sessionsByKind                                         *prometheus.Desc
	firings, checks, cancelFailures, unsentBytes           *prometheus.Desc
	releaseLateness, sessionPanics, loopSessions           *prometheus.Desc
	fastPathEvents, fastPathBytes                          *prometheus.Desc
	routeBytes, poolTotalBytes, catalogChanges             *prometheus.Desc
	catalogRevision, catalogStale, storeResets             *prometheus.Desc
	admRunning, admWaiting, admLimit, blockTime            *prometheus.Desc
	idleHolders, idleOldest, idleEnded                     *prometheus.Desc
	budgetGrant, budgetDemand, budgetAllocator, budgetMode *prometheus.Desc
	whatIfRoundTrips, whatIfNetworkShare                   *prometheus.Desc
	netBottleneck, netBaseRTT, netQueueDelay, netLowRate   *prometheus.Desc
}

func newCollector(o Options) *collector {
	ldc := []string{"link", "direction", "class"}
	srp := []string{"route", "user", "pool"}
	return &collector{
		cat: o.Catalog, rt: o.Runtime, rules: o.Rules, adm: o.Admission, budget: o.Budget, network: o.Network, whatIf: o.WhatIf, clk: cmp.Or[clock.Clock](o.Clock, clock.Real{}), unsent: o.Unsent, late: o.Lateness, panics: o.Panics, loops: o.Loops, fast: o.FastPath, resets: o.StoreResets,
		storeResets: prometheus.NewDesc("sluice_catalog_store_resets_total",
			"Times etcd lost the catalog's history (its revisions went back or its cluster ID changed) and the catalog was reloaded whole.", nil, nil),
		linkBytes: prometheus.NewDesc("sluice_link_bytes_total",
			"Bytes admitted by a link, by direction (up: client to server) and class.", ldc, nil),
		poolBytes: prometheus.NewDesc("sluice_link_pool_bytes_total",
			"Bytes admitted by a link, by direction, resource pool (\"\" for none) and class.",
			[]string{"link", "direction", "pool", "class"}, nil),
		queueDelay: prometheus.NewDesc("sluice_link_queue_delay_seconds",
			"Queue delay of a link's sends, from the request to send to the departure of the last byte.", ldc, nil),
		waiting: prometheus.NewDesc("sluice_link_waiting_bytes",
			"Bytes waiting to enter a link, by direction and class.", ldc, nil),
		queued: prometheus.NewDesc("sluice_link_device_queue_bytes",
			"Bytes in a link's emulated device queue (admitted, not yet departed), by direction and class.", ldc, nil),
		capacity: prometheus.NewDesc("sluice_link_capacity_bytes_per_second",
			"A link's capacity in each direction; 0 is unlimited.", []string{"link"}, nil),
		delay: prometheus.NewDesc("sluice_link_delay_seconds",
			"A link's emulated one-way delay.", []string{"link"}, nil),
		jitter: prometheus.NewDesc("sluice_link_jitter_seconds",
			"A link's emulated delay jitter.", []string{"link"}, nil),
		rate: prometheus.NewDesc("sluice_link_rate_bytes_per_second",
			"A link's emulated per-flow rate; 0 is unlimited.", []string{"link"}, nil),
		sessions: prometheus.NewDesc("sluice_sessions",
			"Open sessions, by route, user and pool.", srp, nil),
		sessionsByKind: prometheus.NewDesc("sluice_sessions_by_kind",
			"Open sessions by kind: client, or traffic between database nodes (replication, basebackup, logical).",
			[]string{"kind"}, nil),
		running: prometheus.NewDesc("sluice_statements_running",
			"Running statements, by route, user and pool.", srp, nil),
		pens: prometheus.NewDesc("sluice_statements_penalized",
			"Running statements that a penalty rule moved to the low class.", srp, nil),
		firings: prometheus.NewDesc("sluice_rule_firings_total",
			"Exception rule firings, by rule and action.", []string{"rule", "action"}, nil),
		checks: prometheus.NewDesc("sluice_rule_checks_total",
			"Evaluations of one exception rule for one statement.", nil, nil),
		cancelFailures: prometheus.NewDesc("sluice_rule_cancel_failures_total",
			"Abort firings whose cancel request failed.", nil, nil),
		unsentBytes: prometheus.NewDesc("sluice_route_unsent_bytes",
			"Bytes written to a route's client sockets that the kernel has not sent yet.", []string{"route"}, nil),
		releaseLateness: prometheus.NewDesc("sluice_emulation_release_lateness_seconds",
			"How late delay lines hand chunks to the socket after their emulated release time (negative: early), "+
				"by route, direction and wait (precise: a lone request or response; timer: the rest of a stream).",
			[]string{"route", "direction", "wait"}, nil),
		sessionPanics: prometheus.NewDesc("sluice_session_panics_total",
			"Sessions ended because one of their goroutines panicked, by route; each panic ends only its own session.",
			[]string{"route"}, nil),
		loopSessions: prometheus.NewDesc("sluice_event_loop_sessions_total",
			"Sessions the event loops took (event=taken) and, of those, handed to goroutines of their own "+
				"for emulation, a waiting link, an admission wait, a terminate or a failure (event=handed).",
			[]string{"event"}, nil),
		fastPathEvents: prometheus.NewDesc("sluice_fast_path_events_total",
			"Kernel fast path: sessions paired in the kernel (event=paired), pairs resumed so the kernel relays their bytes (event=resumed) "+
				"and paused back to user space for a policy, a penalty, a terminate or the session's end (event=paused).",
			[]string{"event"}, nil),
		fastPathBytes: prometheus.NewDesc("sluice_fast_path_bytes_total",
			"Bytes the kernel fast path relayed, both directions; the rest went through user space.", nil, nil),
		routeBytes: prometheus.NewDesc("sluice_route_bytes_total",
			"Bytes of a route's sessions, open and closed, by direction (up: client to server).",
			[]string{"route", "direction"}, nil),
		poolTotalBytes: prometheus.NewDesc("sluice_pool_bytes_total",
			"Bytes admitted by every link for a resource pool (\"\" for none), by direction.",
			[]string{"pool", "direction"}, nil),
		admRunning: prometheus.NewDesc("sluice_pool_admission_running",
			"Statements holding a slot of a resource pool's active_statements (\"\" for those of no pool held by a link's max_active_statements).",
			[]string{"pool"}, nil),
		admWaiting: prometheus.NewDesc("sluice_pool_admission_waiting",
			"Statements held by sluice, waiting for a slot of their resource pool (or link).", []string{"pool"}, nil),
		admLimit: prometheus.NewDesc("sluice_pool_active_statements",
			"A resource pool's active_statements; 0 is unlimited.", []string{"pool"}, nil),
		idleHolders: prometheus.NewDesc("sluice_pool_idle_in_transaction_sessions",
			"Sessions sitting idle inside a transaction while they hold a slot of a resource pool's active_statements.",
			[]string{"pool"}, nil),
		idleOldest: prometheus.NewDesc("sluice_pool_idle_in_transaction_max_seconds",
			"The longest a session has now sat idle inside a transaction holding a slot of a resource pool (0: none).",
			[]string{"pool"}, nil),
		idleEnded: prometheus.NewDesc("sluice_pool_idle_in_transaction_ended_total",
			"Sessions ended for sitting idle inside a transaction, holding a slot, past their resource pool's idle_in_transaction.",
			[]string{"pool"}, nil),
		blockTime: prometheus.NewDesc("sluice_pool_block_seconds",
			"Time statements of a resource pool were held waiting for admission (only those that waited).",
			[]string{"pool"}, nil),
		catalogChanges: prometheus.NewDesc("sluice_catalog_changes_total",
			"Catalog and setting changes, by surface (console, http, forward, config) and outcome (ok, error).",
			[]string{"surface", "outcome"}, nil),
		catalogRevision: prometheus.NewDesc("sluice_catalog_revision",
			"The store's revision of the catalog in force: the etcd revision that wrote it with an etcd catalog, the count of saves since start with a file.", nil, nil),
		catalogStale: prometheus.NewDesc("sluice_catalog_stale_since_seconds",
			"Since when (unix seconds) the catalog's etcd cluster has not answered, so the catalog is read-only; 0 while it answers, and always with a file catalog.", nil, nil),
		budgetGrant: prometheus.NewDesc("sluice_budget_rate_bytes_per_second",
			"The rate this instance's Low class runs at under the fleet's shared budget (its grant, or the fallback share).", nil, nil),
		budgetDemand: prometheus.NewDesc("sluice_budget_demand_bytes_per_second",
			"This instance's Low-class demand as reported to the fleet's allocator.", nil, nil),
		budgetAllocator: prometheus.NewDesc("sluice_budget_allocator",
			"1 while this instance is the fleet's elected budget allocator.", nil, nil),
		netBottleneck: prometheus.NewDesc("sluice_network_bottleneck_bytes_per_second",
			"The estimated rate of the bottleneck on the path beyond a link, per direction: the highest rate its sockets delivered lately; 0 before any delivery.", netLabels, nil),
		netBaseRTT: prometheus.NewDesc("sluice_network_base_rtt_seconds",
			"The lowest round trip of a link direction's sockets (tcpi_min_rtt).", netLabels, nil),
		netQueueDelay: prometheus.NewDesc("sluice_network_queue_delay_seconds",
			"The standing queue the Low class keeps on the path beyond a link direction, as its sockets' round trips show it.", netLabels, nil),
		netLowRate: prometheus.NewDesc("sluice_network_low_rate_bytes_per_second",
			"The rate the network controller holds a link direction's Low class to; 0 while it does not hold it.", netLabels, nil),
		whatIfRoundTrips: prometheus.NewDesc("sluice_whatif_round_trips_per_transaction",
			"Mean round trips per transaction of an application over the what-if window (SHOW WHATIF).",
			whatIfLabels, nil),
		whatIfNetworkShare: prometheus.NewDesc("sluice_whatif_network_share",
			"Share (0..1) of an application's transaction latency spent on the network's round trips as measured (the sockets' tcpi_min_rtt), over the what-if window.",
			whatIfLabels, nil),
		budgetMode: prometheus.NewDesc("sluice_budget_mode",
			"1 for the mode this instance's share is in (off, waiting, grant, fallback); fallback means the grant expired, etcd_unreachable that etcd does not answer.",
			[]string{"mode"}, nil),
	}
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{
		c.linkBytes, c.poolBytes, c.queueDelay, c.waiting, c.queued,
		c.capacity, c.delay, c.jitter, c.rate, c.sessions, c.sessionsByKind, c.running, c.pens,
		c.firings, c.checks, c.cancelFailures, c.unsentBytes, c.releaseLateness, c.sessionPanics, c.loopSessions, c.fastPathEvents, c.fastPathBytes,
		c.routeBytes, c.poolTotalBytes, c.catalogChanges, c.catalogRevision, c.catalogStale, c.storeResets,
		c.admRunning, c.admWaiting, c.admLimit, c.blockTime,
		c.idleHolders, c.idleOldest, c.idleEnded,
		c.budgetGrant, c.budgetDemand, c.budgetAllocator, c.budgetMode,
		c.whatIfRoundTrips, c.whatIfNetworkShare,
		c.netBottleneck, c.netBaseRTT, c.netQueueDelay, c.netLowRate,
	} {
		ch <- d
	}
}

var classes = [link.NumClasses]link.Class{link.High, link.Normal, link.Low}

// histogram converts a link histogram to Prometheus's cumulative buckets.
func histogram(h link.Histogram) (count uint64, sum float64, buckets map[float64]uint64) {
	buckets = make(map[float64]uint64, link.NumDelayBuckets-1)
	var cum uint64
	for i := 0; i < link.NumDelayBuckets-1; i++ {
		cum += uint64(max(h.Counts[i], 0))
		buckets[link.DelayBound(i).Seconds()] = cum
	}
	cum += uint64(max(h.Counts[link.NumDelayBuckets-1], 0))
	return cum, h.Sum.Seconds(), buckets
}

// collectBudget adds the shared budget's gauges, when the instance is
// part of a fleet.
func (c *collector) collectBudget(ch chan<- prometheus.Metric) {
	if c.budget == nil {
		return
	}
	st, ok := c.budget()
	if !ok {
		return
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	for _, r := range st.Rows {
		if !r.Self {
			continue
		}
		gauge(c.budgetGrant, float64(r.Rate))
		gauge(c.budgetDemand, float64(r.Want))
		gauge(c.budgetAllocator, b2f(r.Allocator))
		for _, m := range []string{"off", "waiting", "grant", "fallback"} {
			gauge(c.budgetMode, b2f(r.Mode == m), m)
		}
	}
	gauge(c.budgetMode, b2f(st.Unreachable), "etcd_unreachable")
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// whatIfLabels label the what-if gauges: one series per application of
// the what-if table, whose size is bounded (whatif.Options.MaxApps).
var whatIfLabels = []string{"protocol", "user", "database", "application"}

// collectWhatIf adds the what-if gauges of every application with a
// transaction in the window.
func (c *collector) collectWhatIf(ch chan<- prometheus.Metric) {
	if c.whatIf == nil {
		return
	}
	for _, a := range c.whatIf.Snapshot(c.clk.Now()) {
		ch <- prometheus.MustNewConstMetric(c.whatIfRoundTrips, prometheus.GaugeValue, a.RoundTrips, a.Protocol, a.User, a.Database, a.Application)
		ch <- prometheus.MustNewConstMetric(c.whatIfNetworkShare, prometheus.GaugeValue, a.NetworkShare, a.Protocol, a.User, a.Database, a.Application)
	}
}

// netLabels label the network controller's gauges: a series per link,
// direction and side (send: the path beyond sluice; receive: the path
// before it).
var netLabels = []string{"link", "direction", "side"}

// collectNetwork adds the network controller's gauges.
func (c *collector) collectNetwork(ch chan<- prometheus.Metric) {
	if c.network == nil {
		return
	}
	for _, r := range c.network() {
		for d, v := range map[*prometheus.Desc]float64{
			c.netBottleneck: float64(r.Bottleneck), c.netBaseRTT: r.BaseRTT.Seconds(),
			c.netQueueDelay: r.QueueDelay.Seconds(), c.netLowRate: float64(r.LowRate),
		} {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, r.Link, r.Direction, r.Side)
		}
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	c.collectBudget(ch)
	c.collectWhatIf(ch)
	c.collectNetwork(ch)
	cat := c.cat.Catalog()
	ch <- prometheus.MustNewConstMetric(c.catalogRevision, prometheus.GaugeValue, float64(c.cat.AppliedRevision()))
	stale := 0.0
	if t := c.cat.StaleSince(); !t.IsZero() {
		stale = float64(t.UnixNano()) / 1e9
	}
	ch <- prometheus.MustNewConstMetric(c.catalogStale, prometheus.GaugeValue, stale)
	names := slices.Sorted(maps.Keys(cat.Links))
	type poolDir struct {
		pool string
		dir  string
	}
	poolBytes := map[poolDir]int64{}
	for _, name := range names {
		def := cat.Links[name]
		p := def.Emulation.Params()
		ch <- prometheus.MustNewConstMetric(c.capacity, prometheus.GaugeValue, float64(def.Capacity), name)
		ch <- prometheus.MustNewConstMetric(c.delay, prometheus.GaugeValue, p.Delay.Seconds(), name)
		ch <- prometheus.MustNewConstMetric(c.jitter, prometheus.GaugeValue, p.Jitter.Seconds(), name)
		ch <- prometheus.MustNewConstMetric(c.rate, prometheus.GaugeValue, float64(p.Rate), name)
		l := c.rt.Link(name)
		if l == nil {
			continue
		}
		st := l.Stats()
		for d, ds := range st.Directions {
			dir := link.Direction(d).String()
			for _, cl := range classes {
				cs := ds.Classes[cl]
				cn := cl.String()
				ch <- prometheus.MustNewConstMetric(c.linkBytes, prometheus.CounterValue, float64(cs.Bytes), name, dir, cn)
				ch <- prometheus.MustNewConstMetric(c.waiting, prometheus.GaugeValue, float64(cs.Waiting), name, dir, cn)
				ch <- prometheus.MustNewConstMetric(c.queued, prometheus.GaugeValue, float64(ds.Queue[cl]), name, dir, cn)
				n, sum, b := histogram(cs.Delay)
				ch <- prometheus.MustNewConstHistogram(c.queueDelay, n, sum, b, name, dir, cn)
			}
			for _, ps := range ds.Pools {
				for _, cl := range classes {
					if b := ps.Classes[cl].Bytes; b > 0 {
						poolBytes[poolDir{ps.Pool, dir}] += b
						ch <- prometheus.MustNewConstMetric(c.poolBytes, prometheus.CounterValue, float64(b), name, dir, ps.Pool, cl.String())
					}
				}
			}
		}
	}

	for k, b := range poolBytes {
		ch <- prometheus.MustNewConstMetric(c.poolTotalBytes, prometheus.CounterValue, float64(b), k.pool, k.dir)
	}
	for route, t := range c.bytes.totals() {
		ch <- prometheus.MustNewConstMetric(c.routeBytes, prometheus.CounterValue, float64(t[0]), route, link.Up.String())
		ch <- prometheus.MustNewConstMetric(c.routeBytes, prometheus.CounterValue, float64(t[1]), route, link.Down.String())
	}
	for k, n := range c.cat.AuditCounts() {
		ch <- prometheus.MustNewConstMetric(c.catalogChanges, prometheus.CounterValue, float64(n), k.Surface, k.Outcome)
	}

	limit := cat.Settings.MetricsUserLabels
	user := func(u string) string { return c.users.label(u, limit) }
	type key struct{ route, user, pool string }
	sessions := map[key]int{}
	reg := c.rt.Registry()
	var kinds [session.KindLogical + 1]int
	for _, s := range reg.Sessions() {
		sessions[key{s.Info.Route, user(s.User()), s.Pool()}]++
		if k := s.Kind(); int(k) < len(kinds) {
			kinds[k]++
		}
	}
	for k, n := range sessions {
		ch <- prometheus.MustNewConstMetric(c.sessions, prometheus.GaugeValue, float64(n), k.route, k.user, k.pool)
	}
	for k, n := range kinds {
		ch <- prometheus.MustNewConstMetric(c.sessionsByKind, prometheus.GaugeValue, float64(n), session.Kind(k).String())
	}
	running, pens := map[key]int{}, map[key]int{}
	for _, st := range reg.Active() {
		s := st.Snapshot()
		if s.Waiting {
			continue // held for admission: counted by pool below
		}
		k := key{s.Route, user(s.User), s.Pool}
		running[k]++
		if s.Penalized {
			pens[k]++
		}
	}
	for k, n := range running {
		ch <- prometheus.MustNewConstMetric(c.running, prometheus.GaugeValue, float64(n), k.route, k.user, k.pool)
		ch <- prometheus.MustNewConstMetric(c.pens, prometheus.GaugeValue, float64(pens[k]), k.route, k.user, k.pool)
	}

	c.collectAdmission(ch, cat)

	stats := c.rules.Stats()
	for k, n := range stats.Firings {
		ch <- prometheus.MustNewConstMetric(c.firings, prometheus.CounterValue, float64(n), k.Rule, string(k.Action))
	}
	ch <- prometheus.MustNewConstMetric(c.checks, prometheus.CounterValue, float64(stats.Checks))
	ch <- prometheus.MustNewConstMetric(c.cancelFailures, prometheus.CounterValue, float64(stats.CancelFailures))

	if c.unsent != nil {
		routes := map[string]int64{}
		for name := range c.rt.Routes() {
			routes[name] = 0
		}
		for name, n := range c.unsent.UnsentBytes() {
			routes[name] = n
		}
		for name, n := range routes {
			ch <- prometheus.MustNewConstMetric(c.unsentBytes, prometheus.GaugeValue, float64(n), name)
		}
	}

	if c.resets != nil {
		ch <- prometheus.MustNewConstMetric(c.storeResets, prometheus.CounterValue, float64(c.resets.Resets()))
	}

	if c.panics != nil {
		for route, n := range c.panics.SessionPanics() {
			ch <- prometheus.MustNewConstMetric(c.sessionPanics, prometheus.CounterValue, float64(n), route)
		}
	}

	if c.loops != nil {
		taken, handed := c.loops.LoopSessions()
		ch <- prometheus.MustNewConstMetric(c.loopSessions, prometheus.CounterValue, float64(taken), "taken")
		ch <- prometheus.MustNewConstMetric(c.loopSessions, prometheus.CounterValue, float64(handed), "handed")
	}

	if c.fast != nil {
		paired, resumed, paused := c.fast.FastPathEvents()
		ch <- prometheus.MustNewConstMetric(c.fastPathEvents, prometheus.CounterValue, float64(paired), "paired")
		ch <- prometheus.MustNewConstMetric(c.fastPathEvents, prometheus.CounterValue, float64(resumed), "resumed")
		ch <- prometheus.MustNewConstMetric(c.fastPathEvents, prometheus.CounterValue, float64(paused), "paused")
		ch <- prometheus.MustNewConstMetric(c.fastPathBytes, prometheus.CounterValue, float64(c.fast.FastPathBytes()))
	}

	if c.late != nil {
		c.late.ReleaseLateness(func(route, dir, wait string, h netem.LatenessSnapshot) {
			if h.Count == 0 {
				return
			}
			buckets := make(map[float64]uint64, len(h.Buckets))
			for i, b := range h.Bounds() {
				buckets[b.Seconds()] = h.Buckets[i]
			}
			ch <- prometheus.MustNewConstHistogram(c.releaseLateness, h.Count, h.Sum.Seconds(), buckets, route, dir, wait)
		})
	}
}

// collectAdmission writes the admission gauges and block-time histograms
// of the catalog's pools (and "" for statements of no pool held by a
// link), so their labels are bounded by the catalog.
func (c *collector) collectAdmission(ch chan<- prometheus.Metric, cat *wlm.Catalog) {
	known := func(pool string) bool { return pool == "" || cat.Pools[pool] != nil }
	adm := c.adm.AdmissionStats()
	for pool, p := range cat.Pools {
		ch <- prometheus.MustNewConstMetric(c.admLimit, prometheus.GaugeValue, float64(max(p.ActiveStatements, 0)), pool)
		if _, ok := adm[pool]; !ok && p.ActiveStatements > 0 {
			adm[pool] = admission.PoolStats{}
		}
	}
	for pool, a := range adm {
		if !known(pool) {
			continue
		}
		ch <- prometheus.MustNewConstMetric(c.admRunning, prometheus.GaugeValue, float64(a.Running), pool)
		ch <- prometheus.MustNewConstMetric(c.admWaiting, prometheus.GaugeValue, float64(a.Waiting), pool)
	}
	holders, oldest := map[string]int{}, map[string]float64{}
	now := c.clk.Now()
	for pool, p := range cat.Pools {
		if p.ActiveStatements > 0 {
			holders[pool], oldest[pool] = 0, 0
		}
	}
	for _, s := range c.rt.Registry().Sessions() {
		sl := s.Slot()
		if d, ok := sl.IdleInTransaction(now); ok && known(sl.Pool) {
			holders[sl.Pool]++
			oldest[sl.Pool] = max(oldest[sl.Pool], d.Seconds())
		}
	}
	for pool, n := range holders {
		ch <- prometheus.MustNewConstMetric(c.idleHolders, prometheus.GaugeValue, float64(n), pool)
		ch <- prometheus.MustNewConstMetric(c.idleOldest, prometheus.GaugeValue, oldest[pool], pool)
	}
	for pool, n := range c.rules.Stats().IdleInTransactionEnded {
		if known(pool) {
			ch <- prometheus.MustNewConstMetric(c.idleEnded, prometheus.CounterValue, float64(n), pool)
		}
	}
	for pool, h := range c.adm.BlockTimes() {
		buckets := make(map[float64]uint64, len(wlm.BlockTimeBuckets))
		var cum uint64
		for i, b := range wlm.BlockTimeBuckets {
			cum += h.Counts[i]
			buckets[b] = cum
		}
		ch <- prometheus.MustNewConstHistogram(c.blockTime, h.Count, h.Sum, buckets, pool)
	}
}
