package httpapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/fleet"
	"github.com/sluicelab/sluice/internal/httpapi/dashboard"
	"github.com/sluicelab/sluice/internal/httpapi/metrics"
	"github.com/sluicelab/sluice/internal/httpapi/toxics"
	"github.com/sluicelab/sluice/internal/proxy"
	"github.com/sluicelab/sluice/internal/whatif"
	"github.com/sluicelab/sluice/internal/wlm"
	"github.com/sluicelab/sluice/internal/wlm/ddl"
	"github.com/sluicelab/sluice/internal/wlm/views"
)

// MaxBody is the largest request body read, in bytes.
const MaxBody = 1 << 20

// Catalog is the workload manager's catalog service as the API uses it:
// the catalog, its statements and what /metrics and the dashboard read.
type Catalog interface {
	metrics.Catalog
	toxics.Catalog
	ExecStatement(ctx context.Context, st ddl.Statement) (wlm.Result, error)
}

// Runtime is the binding runtime as the API uses it: sessions, links,
// routes, and cancelling or ending a session.
type Runtime interface {
	metrics.Runtime
	dashboard.Runtime
	toxics.Routes
	RoutesByLink() map[string][]string
	CancelSession(ctx context.Context, id uint64) (done bool, err error)
	TerminateSession(ctx context.Context, id uint64) (done bool)
}

// Rules is the exception-rule evaluator's counters.
type Rules interface{ Stats() wlm.Stats }

// WhatIf is the live what-if table (*whatif.Table): its applications
// over its window. It must be safe for concurrent use.
type WhatIf interface {
	Snapshot(now time.Time) []whatif.App
	Window() time.Duration
}

// RegistrySyncer brings the session registry up to what the relays'
// clients have received (*proxy.Server: the kernel fast path's journal
// drained). SyncRegistry returns ctx's error if ctx ends first. It must
// be safe for concurrent use.
type RegistrySyncer interface {
	SyncRegistry(ctx context.Context) error
}

// Options configure a Server.
type Options struct {
	// Catalog, Runtime, Rules, Admission and Views are the workload
	// manager's roles (*wlm.Service, *wlm.Runtime, *wlm.Rules,
	// *wlm.Admission, *wlm.Views). Required.
	Catalog   Catalog
	Runtime   Runtime
	Rules     Rules
	Admission metrics.Admission
	Views     dashboard.Tables
	// Budget is the fleet's shared budget for /metrics, false while
	// there is none; nil without a fleet.
	Budget func() (views.BudgetState, bool)
	// Network is the network controller's estimates for /metrics; nil
	// leaves them out.
	Network func() []views.NetworkRow
	// WhatIf is the what-if table of GET /api/whatif and /metrics; nil
	// answers with no applications.
	WhatIf WhatIf
	// Proxy runs the routes: it reports the kernel's unsent bytes, runs
	// the Toxiproxy-compatible proxies and brings the registry up to
	// date before each request (RegistrySyncer), so that what a request
	// reads holds every byte a client has received. nil leaves all three
	// out.
	Proxy *proxy.Server
	// Reloader serves GET /api/config and POST /api/reload; nil answers
	// both with 501.
	Reloader Reloader
	// Clock times the dashboard's samples and the toxics; nil means
	// clock.Real.
	Clock clock.Clock
	// Logger receives API changes; nil discards them.
	Logger *slog.Logger
	// Token, if not empty, is required on every request (see the package
	// documentation). Compare CheckExposure.
	Token string
	// FleetToken, if not empty, is accepted as well as Token: the bearer
	// token the fleet's instances send each other (fleet_token). Without
	// Token it is the API's token. A secret: never logged.
	FleetToken string
	// Fleet answers GET /api/instances and the cluster-wide views and
	// forwards session commands to other instances; nil answers for this
	// instance alone (no /api/instances, no forwarding).
	Fleet fleet.View
	// Version is the sluice version shown by the page and /version; ""
	// means "dev".
	Version string
	// NoProcessMetrics leaves the Go runtime and process collectors out
	// of /metrics.
	NoProcessMetrics bool
	// StoreResets counts the shared catalog store's resets for /metrics;
	// nil for a file store.
	StoreResets metrics.StoreResets
	// Audit, if not nil, records the changes made through the
	// Toxiproxy-compatible API (toxics.Options.Audit): the Manager's
	// audit log (wlm.ManagerOptions.Audit), so they show in SHOW AUDIT
	// beside the console's.
	Audit toxics.Auditor
}

// Server is sluice's HTTP API: metrics, the catalog and session API, the
// Toxiproxy-compatible API and the dashboard. It is an http.Handler and
// safe for concurrent use.
type Server struct {
	cat         Catalog
	rt          Runtime
	ruleStats   Rules
	adm         metrics.Admission
	views       dashboard.Tables
	whatIfTable WhatIf         // nil without a table
	sync        RegistrySyncer // nil: nothing to catch up
	clk         clock.Clock
	log         *slog.Logger
	token       string     // the API's token; "" without one (loopback only)
	fleetToken  string     // also accepted; "" for none
	fleet       fleet.View // nil without a fleet
	mux         *http.ServeMux
	metrics     *metrics.Metrics
	dash        *dashboard.Dashboard
	toxics      *toxics.Service // nil without Options.Proxy
	// reloader is nil without Options.Reloader.
	reloader Reloader
}

// New returns a Server. Call Run to sample the dashboard's series, and
// Close when done.
func New(o Options) (*Server, error) {
	if o.Catalog == nil || o.Runtime == nil || o.Rules == nil || o.Admission == nil || o.Views == nil {
		return nil, errors.New("httpapi: Options.Catalog, Runtime, Rules, Admission and Views are required")
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Version == "" {
		o.Version = "dev"
	}
	s := &Server{cat: o.Catalog, rt: o.Runtime, ruleStats: o.Rules, adm: o.Admission, views: o.Views, whatIfTable: o.WhatIf, clk: o.Clock, log: o.Logger, token: o.Token, fleetToken: o.FleetToken, fleet: o.Fleet, mux: http.NewServeMux(), reloader: o.Reloader}
	if s.token == "" {
		s.token = o.FleetToken
	}
	mo := metrics.Options{Catalog: o.Catalog, Runtime: o.Runtime, Rules: o.Rules, Admission: o.Admission, Budget: o.Budget, Network: o.Network, Clock: o.Clock, NoProcess: o.NoProcessMetrics, StoreResets: o.StoreResets}
	if o.WhatIf != nil {
		mo.WhatIf = o.WhatIf
	}
	if o.Proxy != nil {
		s.sync = o.Proxy
		mo.Unsent, mo.Lateness, mo.Panics, mo.Loops, mo.FastPath = o.Proxy, o.Proxy, o.Proxy, o.Proxy, o.Proxy
	}
	var err error
	if s.metrics, err = metrics.New(mo); err != nil {
		return nil, fmt.Errorf("httpapi: %w", err)
	}
	if s.dash, err = dashboard.New(dashboard.Options{Catalog: o.Catalog, Runtime: o.Runtime, Views: o.Views, Clock: o.Clock, Version: o.Version}); err != nil {
		s.metrics.Close()
		return nil, fmt.Errorf("httpapi: %w", err)
	}
	if o.Proxy != nil {
		to := toxics.Options{Server: o.Proxy, Catalog: o.Catalog, Routes: o.Runtime, Clock: o.Clock, Logger: o.Logger.With("component", "toxics"), Version: o.Version, Audit: o.Audit}
		if o.Token == "" {
			to.CheckListen = loopbackListen
		}
		s.toxics, err = toxics.New(to)
		if err != nil {
			s.metrics.Close()
			return nil, fmt.Errorf("httpapi: %w", err)
		}
		s.toxics.Register(s.mux)
	}
	s.mux.Handle("GET /metrics", s.metrics.Handler())
	s.mux.HandleFunc("GET /api/snapshot", s.dash.ServeSnapshot)
	s.registerCatalog(s.mux)
	s.registerLive(s.mux)
	s.registerConfig(s.mux)
	s.registerFleet(s.mux)
	s.registerWhatIf(s.mux)
	page := s.dash.Page()
	s.mux.Handle("GET /{$}", page)
	s.mux.Handle("GET /static/", page)
	return s, nil
}

// Toxics returns the Toxiproxy-compatible service, nil without
// Options.Proxy.
func (s *Server) Toxics() *toxics.Service { return s.toxics }

// Dashboard returns the dashboard, to step its sampler by hand.
func (s *Server) Dashboard() *dashboard.Dashboard { return s.dash }

// Run samples the dashboard's series until ctx ends, then returns
// ctx.Err().
func (s *Server) Run(ctx context.Context) error { return s.dash.Run(ctx) }

// Close stops the metrics' registry watcher and deletes the Toxiproxy
// proxies (their routes, connections and links). Safe to call twice.
func (s *Server) Close() error {
	s.metrics.Close()
	if s.toxics != nil {
		s.toxics.Close()
	}
	return nil
}

// ServeHTTP authenticates the request and routes it.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if e := s.authorize(w, r); e != nil {
		if e != errHandled {
			writeError(w, e)
		}
		return
	}
	if s.sync != nil {
		if err := s.sync.SyncRegistry(r.Context()); err != nil {
			return // the client has gone
		}
	}
	r = r.WithContext(wlm.WithActor(r.Context(), s.actor(r)))
	if _, pattern := s.mux.Handler(r); pattern == "" {
		w = &muxErrors{ResponseWriter: w, r: r}
	}
	s.mux.ServeHTTP(w, r)
}

func readBody(w http.ResponseWriter, r *http.Request) ([]byte, *Error) {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBody))
	if err != nil {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			return nil, &Error{Status: http.StatusRequestEntityTooLarge, Message: fmt.Sprintf("request body is larger than %d bytes", MaxBody)}
		}
		return nil, &Error{Status: http.StatusBadRequest, Message: "reading the request body: " + err.Error()}
	}
	return b, nil
}

// readObject reads the request body as a JSON object.
func readObject(w http.ResponseWriter, r *http.Request) (body, *Error) {
	raw, e := readBody(w, r)
	if e != nil {
		return nil, e
	}
	return decodeBody(raw)
}
