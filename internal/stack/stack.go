package stack

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sluicelab/sluice/internal/admin"
	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/config"
	"github.com/sluicelab/sluice/internal/etcd"
	"github.com/sluicelab/sluice/internal/fastpath"
	"github.com/sluicelab/sluice/internal/fleet"
	"github.com/sluicelab/sluice/internal/fleet/budget"
	"github.com/sluicelab/sluice/internal/httpapi"
	"github.com/sluicelab/sluice/internal/httpapi/metrics"
	"github.com/sluicelab/sluice/internal/netctl"
	"github.com/sluicelab/sluice/internal/proxy"
	"github.com/sluicelab/sluice/internal/session"
	"github.com/sluicelab/sluice/internal/whatif"
	"github.com/sluicelab/sluice/internal/wlm"
	"github.com/sluicelab/sluice/internal/wlm/ddl"
	"github.com/sluicelab/sluice/internal/wlm/store"
	"github.com/sluicelab/sluice/internal/wlm/views"
)

// httpGrace is how long Close lets the HTTP API's requests in flight
// finish before it closes their connections.
const httpGrace = 2 * time.Second

// Options configures New.
type Options struct {
	// Config is what to build; nil is the empty configuration: no
	// routes, no consoles, an in-memory catalog.
	Config *config.Config
	// Clock drives the workload manager, the proxy and the consoles; nil
	// means clock.Real.
	Clock clock.Clock
	// Logger receives every piece's log, with a component or route
	// attribute; nil discards it.
	Logger *slog.Logger
	// Registry holds the sessions and statements; nil makes a new one.
	Registry *session.Registry
	// Version is the sluice version the HTTP API reports; "" means "dev".
	Version string
	// Load re-reads the configuration for ReloadConfig (the console's
	// RELOAD, the HTTP API's POST /api/reload, SIGHUP in sluice serve):
	// the same file, flags and environment the stack was built from. nil
	// makes ReloadConfig refuse.
	Load func() (*config.Config, error)
	// Loops is the proxy's event loops (proxy.Options.Loops): 0 means
	// one, a negative number none.
	Loops int
}

// ConfigError is a configuration that New or AddRoute refused before
// binding anything. Its text is the underlying error's (often a
// *config.Error naming the file, key and value).
type ConfigError struct{ Err error }

func (e *ConfigError) Error() string { return e.Err.Error() }
func (e *ConfigError) Unwrap() error { return e.Err }

func configErr(err error) error { return &ConfigError{Err: err} }

// Stack is a running sluice. Its methods are safe for concurrent use.
type Stack struct {
	clk clock.Clock
	log *slog.Logger
	reg *session.Registry
	mgr *wlm.Manager
	srv *proxy.Server
	fwd forwarders
	wi  *whatif.Table // every route's sessions' round trips (SHOW WHATIF, /api/whatif)
	// net watches the sockets each link direction sends on and holds the
	// Low class below a bottleneck beyond the link (SHOW NETWORK).
	net *netctl.Watcher
	// kernel relays sessions in the kernel (fast_path); nil when off or
	// unavailable. Closed after the proxy.
	kernel *fastpath.Kernel
	// budget is the fleet's shared low-priority budget once it has
	// started; nil before, and without a fleet.
	budget atomic.Pointer[budget.Budget]
	// firings is the exception rules' firing history, in a file beside a
	// catalog file; closed by Close after the Manager.
	firings *wlm.FiringLog

	console   *admin.Server // nil without an admin console
	adminAddr net.Addr      // nil until the console is bound
	api       *httpapi.Server
	hs        *http.Server // nil without an HTTP API
	httpAddr  net.Addr     // nil until the HTTP API is bound

	etcd     *clientv3.Client // nil without an etcd catalog; closed by Close after the loops
	catStore *store.Etcd      // the catalog in etcd; nil without one

	cancel context.CancelFunc // ends the background loops
	lctx   context.Context    // the background loops' context; drains end with it
	loops  sync.WaitGroup     // the goroutines the stack started
	load   func() (*config.Config, error)

	reloadMu sync.Mutex // serialises reloads and the end of their drains; taken before cfgMu

	cfgMu    sync.Mutex
	cfg      *config.Config // guarded by cfgMu; the configuration in force, never modified
	loadedAt time.Time      // guarded by cfgMu; when cfg took effect
	revision int            // guarded by cfgMu; reloads applied since New

	// The fleet (fleet.go): set by New before it returns.
	cluster *fleet.Cluster    // always set
	members *fleet.Membership // nil without etcd
	id      identity
	version string
	started time.Time

	closeOnce sync.Once
	closeErr  error // set once by the first Close
}

// New validates o.Config as a whole, then binds and starts everything it
// names (see the package documentation for the order). A *ConfigError
// means nothing was bound; any error means everything made so far is
// closed again. ctx bounds only the work of New itself; the stack runs
// until Close.
func New(ctx context.Context, o Options) (*Stack, error) {
	cfg := o.Config
	if cfg == nil {
		cfg = &config.Config{}
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Registry == nil {
		o.Registry = session.NewRegistry(session.Options{})
	}
	log := o.Logger
	cli, catStore, err := dialCatalog(ctx, cfg, log)
	if err != nil {
		return nil, err
	}
	// One audit log for the console's changes and the Toxiproxy API's.
	audit := wlm.NewAuditLog(0)
	// The rule firings' history, kept beside a catalog file across
	// restarts (in memory with a catalog in etcd or none). A file that
	// cannot be read or written does not stop sluice: the history is
	// kept in memory, with a WARN, and the file is left as it is.
	firingsPath := ""
	if catStore == nil && cfg.Catalog != "" {
		firingsPath = cfg.Catalog + ".firings"
	}
	firings, err := wlm.NewFiringLog(0, firingsPath, log)
	if err != nil {
		log.Warn("the firing history is kept in memory only", "file", firingsPath, "err", err)
		firings, _ = wlm.NewFiringLog(0, "", log) // in memory: no error
	}
	mopts := wlm.ManagerOptions{Clock: o.Clock, Logger: log, Registry: o.Registry, CatalogPath: cfg.Catalog, Audit: audit, Firings: firings}
	if catStore != nil {
		mopts.Store = catStore
	}
	mgr, err := wlm.NewManager(mopts)
	if err != nil {
		firings.Close()
		if cli != nil {
			cli.Close()
		}
		return nil, err
	}
	lctx, cancel := context.WithCancel(context.Background())
	s := &Stack{cfg: cfg, clk: o.Clock, log: log, reg: o.Registry, mgr: mgr, cancel: cancel, lctx: lctx,
		fwd: newForwarders(mgr, cfg.Admin.ForwardUsers), load: o.Load, loadedAt: o.Clock.Now(), started: o.Clock.Now(),
		etcd: cli, catStore: catStore, wi: whatif.New(whatif.Options{}), firings: firings,
		net: netctl.NewWatcher(netctl.WatcherOptions{Clock: o.Clock, Logger: log})}
	mgr.Views().Register("whatif", views.WhatIfSource{Table: s.wi})
	mgr.Views().Register("network", views.NetworkSource(s.networkRows))
	fail := func(err error) (*Stack, error) {
		s.Close()
		return nil, err
	}
	s.startCatalogFollow()
	if err := s.newCluster(o); err != nil {
		return fail(err)
	}
	if err := applyCatalogConfig(ctx, mgr, cfg, wlm.SurfaceConfig); err != nil {
		return fail(configErr(err))
	}
	kernel, err := openFastPath(cfg.FastPathMode(), o.Loops, o.Clock, log)
	if err != nil {
		return fail(err)
	}
	s.kernel = kernel
	po := proxy.Options{Logger: log, Clock: o.Clock, Registry: o.Registry, Policy: mgr.Runtime(), Loops: o.Loops, Sockets: s.net}
	if kernel != nil {
		po.FastPath = kernel
	}
	s.srv = proxy.New(po)
	routes := make([]proxy.Route, 0, len(cfg.Routes))
	for _, r := range cfg.Routes {
		pr, err := s.prepare(cfg, Route{Route: r})
		if err != nil {
			return fail(err)
		}
		routes = append(routes, pr)
	}
	var adminAuth, httpAuth string
	if cfg.Admin.Listen != "" {
		if s.console, adminAuth, err = newAdmin(cfg, mgr, s.srv, s, s.cluster, o.Clock, log); err != nil {
			return fail(err)
		}
	}
	if cfg.HTTP.Listen != "" {
		var resets metrics.StoreResets
		if s.catStore != nil {
			resets = s.catStore
		}
		if s.api, s.hs, httpAuth, err = newHTTP(cfg, mgr, audit, s.srv, s, s.cluster, resets, s.BudgetState, s.networkRows, s.wi, o.Clock, log, o.Version); err != nil {
			return fail(err)
		}
	}

	for _, r := range routes {
		if _, err := s.srv.AddRoute(r); err != nil {
			return fail(err)
		}
	}
	s.goRun("workload manager", func() error { return mgr.Rules().Run(lctx) }, context.Canceled)
	s.goLoop(func() { s.net.Run(lctx) })
	if s.console != nil {
		if err := s.serveAdmin(lctx, cfg.Admin.Listen, adminAuth); err != nil {
			return fail(err)
		}
	}
	if s.hs != nil {
		if err := s.serveHTTP(lctx, cfg.HTTP.Listen, httpAuth); err != nil {
			return fail(err)
		}
	}
	s.setIdentity()
	if err := s.startMembership(ctx); err != nil {
		return fail(err)
	}
	if err := s.startFleetBudget(); err != nil {
		return fail(err)
	}
	return s, nil
}

// dialCatalog dials etcd when cfg keeps the catalog there (cfg.Etcd),
// and returns the one client the stack shares and the catalog's store;
// nil and nil for a file or in-memory catalog. A cluster that does not
// answer within the dial timeout is an error naming it.
func dialCatalog(ctx context.Context, cfg *config.Config, log *slog.Logger) (*clientv3.Client, *store.Etcd, error) {
	if cfg.Etcd == nil {
		return nil, nil, nil
	}
	cli, err := etcd.Dial(ctx, *cfg.Etcd)
	if err != nil {
		return nil, nil, err
	}
	st := store.NewEtcd(cli, cfg.Etcd.Key("catalog"))
	log.Info("catalog kept in etcd", "catalog", cfg.Etcd.String(), "key", st.Key(), "tls", cfg.Etcd.CAFile != "" || cfg.Etcd.CertFile != "", "user", cfg.Etcd.Username)
	return cli, st, nil
}

// startCatalogFollow follows the catalog in etcd, when there is one,
// until Close: every instance's changes are applied here, and the
// manager learns when etcd cannot be reached.
func (s *Stack) startCatalogFollow() {
	if s.catStore == nil {
		return
	}
	s.goLoop(func() {
		s.catStore.Follow(s.lctx, s.mgr.Service(), s.clk, s.log.With("component", "catalog"))
	})
}

// goLoop runs fn in a goroutine that Close waits for.
func (s *Stack) goLoop(fn func()) {
	s.loops.Add(1)
	go func() {
		defer s.loops.Done()
		fn()
	}()
}

// goRun runs run in a goroutine that Close waits for, and logs the
// error it ends with as "what stopped" unless it is nil or one of
// expected (matched with errors.Is).
func (s *Stack) goRun(what string, run func() error, expected ...error) {
	s.goLoop(func() {
		err := run()
		if err == nil || slices.ContainsFunc(expected, func(e error) bool { return errors.Is(err, e) }) {
			return
		}
		s.log.Error(what+" stopped", "err", err)
	})
}

// Manager is the workload manager: the catalog, the links, the rules.
func (s *Stack) Manager() *wlm.Manager { return s.mgr }

// Proxy is the proxy server running the routes.
func (s *Stack) Proxy() *proxy.Server { return s.srv }

// Registry holds the sessions and statements.
func (s *Stack) Registry() *session.Registry { return s.reg }

// HTTP is the HTTP API's handler; nil without an HTTP API.
func (s *Stack) HTTP() *httpapi.Server { return s.api }

// WhatIf returns the what-if table every route's sessions feed.
func (s *Stack) WhatIf() *whatif.Table { return s.wi }

// AdminAddr is the admin console's bound address; nil without one.
func (s *Stack) AdminAddr() net.Addr { return s.adminAddr }

// HTTPAddr is the HTTP API's bound address; nil without one.
func (s *Stack) HTTPAddr() net.Addr { return s.httpAddr }

// Shutdown stops accepting sessions and waits for the open ones to end,
// until ctx ends; then it closes those left and returns ctx's error. It
// leaves the rest running: Close after it.
func (s *Stack) Shutdown(ctx context.Context) error { return s.srv.Shutdown(ctx) }

// Close stops everything, in the order of the package documentation, and
// returns the first error. It is safe to call more than once; later calls
// return the first call's result.
func (s *Stack) Close() error {
	s.closeOnce.Do(func() {
		var errs []error
		s.cancel()
		if s.console != nil {
			errs = append(errs, s.console.Close())
		}
		if s.hs != nil {
			sctx, cancel := context.WithTimeout(context.Background(), httpGrace)
			if err := s.hs.Shutdown(sctx); err != nil {
				s.hs.Close()
			}
			cancel()
		}
		if s.api != nil {
			errs = append(errs, s.api.Close())
		}
		if s.srv != nil {
			errs = append(errs, s.srv.Close())
		}
		if s.kernel != nil {
			errs = append(errs, s.kernel.Close())
		}
		s.loops.Wait()
		errs = append(errs, s.mgr.Close())
		errs = append(errs, s.firings.Close())
		if s.etcd != nil {
			s.etcd.Close()
		}
		for _, err := range errs {
			if err != nil {
				s.closeErr = err
				break
			}
		}
	})
	return s.closeErr
}

// applyCatalogConfig creates or alters the config file's links and
// applies its settings, with the same validation as the console's
// statements. The audit trail records them as surface (wlm.SurfaceConfig
// at start, wlm.SurfaceReload on reload, naming who asked for it).
func applyCatalogConfig(ctx context.Context, mgr *wlm.Manager, cfg *config.Config, surface string) error {
	ctx = wlm.WithActor(ctx, configActor(ctx, cfg, surface))
	for _, l := range cfg.Links {
		if err := mgr.Service().DefineLink(ctx, l.Name, l.Options); err != nil {
			return &config.Error{File: cfg.Source, Msg: fmt.Sprintf("%s (link %s): %s", l.Key, l.Name, catalogMessage(err))}
		}
	}
	keys := slices.Sorted(maps.Keys(cfg.Settings))
	for _, k := range keys {
		if err := mgr.Service().Set(ctx, k, cfg.Settings[k]); err != nil {
			return &config.Error{File: cfg.Source, Key: "settings." + k, Value: cfg.Settings[k], Msg: catalogMessage(err)}
		}
	}
	return nil
}

// configActor is the audit trail's actor for cfg's changes: the file at
// start; on reload, whoever asked for it (the actor ctx carries), or a
// signal.
func configActor(ctx context.Context, cfg *config.Config, surface string) wlm.Actor {
	a := wlm.Actor{Surface: surface, Addr: cfg.Source}
	if surface != wlm.SurfaceReload {
		return a
	}
	a.User = "signal"
	if t, ok := wlm.ActorFrom(ctx); ok {
		a.User = t.Surface
		if t.User != "" {
			a.User += ":" + t.User
		}
		a.Addr = t.Addr
	}
	return a
}

// catalogMessage is err's text, without the SQLSTATE when it is a
// catalog error: its message, and its detail when there is one.
func catalogMessage(err error) string {
	var e *ddl.Error
	if !errors.As(err, &e) {
		return err.Error()
	}
	if e.Detail != "" {
		return e.Message + ": " + e.Detail
	}
	return e.Message
}

// newAdmin makes the admin console of cfg, refusing a console without a
// password on a non-loopback address, and names its authentication for
// the log. It binds nothing.
func newAdmin(cfg *config.Config, mgr *wlm.Manager, srv *proxy.Server, rl admin.Reloader, fl fleet.View, clk clock.Clock, log *slog.Logger) (*admin.Server, string, error) {
	users := maps.Clone(cfg.Admin.Users)
	if users == nil {
		users = map[string]string{}
	}
	if cfg.Admin.Password != "" {
		users[admin.DefaultUser] = cfg.Admin.Password
	}
	noPassword := len(users) == 0
	if noPassword && !isLoopback(cfg.Admin.Listen) {
		return nil, "", configErr(fmt.Errorf("admin console on non-loopback address %s needs a password (SLUICE_ADMIN_PASSWORD or admin.password)", cfg.Admin.Listen))
	}
	console, err := admin.New(admin.Options{Catalog: mgr.Service(), Views: mgr.Views(), Sessions: mgr.Runtime(), Sync: srv, Reloader: rl, Fleet: fl, Logger: log.With("component", "admin"), Clock: clk, Users: users, AllowNoPassword: noPassword})
	if err != nil {
		return nil, "", configErr(fmt.Errorf("admin console: %w", err))
	}
	if noPassword {
		return console, "trust (loopback)", nil
	}
	return console, "scram-sha-256", nil
}

// serveAdmin binds the admin console's address and serves it until ctx
// ends.
func (s *Stack) serveAdmin(ctx context.Context, addr, auth string) error {
	serve := func(ln net.Listener) error { return s.console.Serve(ctx, ln) }
	return s.serveConsole("admin console", addr, auth, &s.adminAddr, serve, admin.ErrServerClosed, context.Canceled)
}

// newHTTP makes the HTTP API of cfg; without a token only a loopback
// address is accepted. It binds nothing.
func newHTTP(cfg *config.Config, mgr *wlm.Manager, audit *wlm.AuditLog, srv *proxy.Server, rl httpapi.Reloader, fl fleet.View, resets metrics.StoreResets, budget func() (views.BudgetState, bool), network func() []views.NetworkRow, wi httpapi.WhatIf, clk clock.Clock, log *slog.Logger, version string) (*httpapi.Server, *http.Server, string, error) {
	token := cfg.HTTP.Token
	if token == "" {
		token = cfg.Fleet.Token
	}
	if err := httpapi.CheckExposure(cfg.HTTP.Listen, token); err != nil {
		return nil, nil, "", configErr(err)
	}
	api, err := httpapi.New(httpapi.Options{
		Catalog: mgr.Service(), Runtime: mgr.Runtime(), Rules: mgr.Rules(), Admission: mgr.Admission(), Views: mgr.Views(),
		Budget: budget, Network: network, WhatIf: wi, Proxy: srv, Reloader: rl, Clock: clk, Logger: log.With("component", "http"),
		Token: cfg.HTTP.Token, FleetToken: cfg.Fleet.Token, Fleet: fl, Version: version, StoreResets: resets, Audit: audit,
	})
	if err != nil {
		return nil, nil, "", err
	}
	hs := &http.Server{
		Handler:           api,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
	}
	if token == "" {
		return api, hs, "none (loopback)", nil
	}
	return api, hs, "bearer token", nil
}

// serveHTTP binds the HTTP API's address and serves it, and runs the
// dashboard sampler, until ctx ends.
func (s *Stack) serveHTTP(ctx context.Context, addr, auth string) error {
	if err := s.serveConsole("HTTP API", addr, auth, &s.httpAddr, s.hs.Serve, http.ErrServerClosed); err != nil {
		return err
	}
	s.goRun("dashboard sampler", func() error { return s.api.Run(ctx) }, context.Canceled)
	return nil
}

// serveConsole binds addr for the console named what, logs where it
// listens and how it authenticates, sets *bound to the bound address and
// runs serve on the listener until it returns (see goRun for expected).
func (s *Stack) serveConsole(what, addr, auth string, bound *net.Addr, serve func(net.Listener) error, expected ...error) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	s.log.Info(what+" listening", "listen", ln.Addr().String(), "auth", auth)
	*bound = ln.Addr()
	s.goRun(what, func() error { return serve(ln) }, expected...)
	return nil
}

// isLoopback reports whether addr's host is a loopback address or name.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// networkRows is the network controller's estimates as the network view
// shows them.
func (s *Stack) networkRows() []views.NetworkRow {
	ests := s.net.Estimates()
	rows := make([]views.NetworkRow, len(ests))
	for i, e := range ests {
		rows[i] = views.NetworkRow{Link: e.Link, Direction: e.Direction.String(), Side: e.Side.String(), State: e.State.String(),
			Bottleneck: e.Bottleneck, BaseRTT: e.BaseRTT, QueueDelay: e.QueueDelay, LowRate: e.LowRate}
	}
	return rows
}
