package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sort"

	"github.com/sluicelab/sluice/internal/admin"
	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/config"
	"github.com/sluicelab/sluice/internal/proxy"
	"github.com/sluicelab/sluice/internal/session"
	"github.com/sluicelab/sluice/internal/wire"
	"github.com/sluicelab/sluice/internal/wlm"
	"github.com/sluicelab/sluice/internal/wlm/ddl"
)

// app is a running `sluice serve`: proxy, workload manager and consoles.
type app struct {
	log     *slog.Logger
	srv     *proxy.Server
	mgr     *wlm.Manager
	cancel  context.CancelFunc
	closers []func()
}

// policy adapts the workload manager to the proxy's Policy.
type policy struct{ m *wlm.Manager }

func (p policy) Bind(route, user string) proxy.Binding {
	return proxy.Binding(p.m.Bind(route, user))
}

func (p policy) Version() uint64 { return p.m.Version() }

// forwarder is data-port forwarding for one route: the statements of
// the configured users are split by the workload manager in the route's
// dialect.
type forwarder struct {
	mgr     *wlm.Manager
	users   map[string]bool
	dialect ddl.Dialect
}

func (f forwarder) Forwards(user string) bool { return f.users[user] }

func (f forwarder) Forward(ctx context.Context, sql string) (string, bool, error) {
	rest, took, err := f.mgr.ForwardUser(ctx, sql, f.dialect)
	var e *ddl.Error
	if errors.As(err, &e) {
		err = &wire.Refusal{Code: e.Code, Message: e.Message}
	}
	return rest, took, err
}

// forwarders makes each route's forwarder for the configured users; with
// none, forwarding is off and every forwarder is nil.
type forwarders struct {
	mgr   *wlm.Manager
	users map[string]bool
}

func newForwarders(mgr *wlm.Manager, users []string) forwarders {
	fs := forwarders{mgr: mgr}
	if len(users) > 0 {
		fs.users = make(map[string]bool, len(users))
		for _, u := range users {
			fs.users[u] = true
		}
	}
	return fs
}

// forwarder returns the forwarder of a route speaking d, or nil when
// forwarding is off.
func (fs forwarders) forwarder(d ddl.Dialect) wire.Forwarder {
	if fs.users == nil {
		return nil
	}
	return forwarder{mgr: fs.mgr, users: fs.users, dialect: d}
}

func newApp(ctx context.Context, cfg *config.Config, log *slog.Logger, clk clock.Clock, reg *session.Registry) (*app, error) {
	mgr, err := wlm.NewManager(wlm.ManagerOptions{Clock: clk, Logger: log, Registry: reg, CatalogPath: cfg.Catalog})
	if err != nil {
		return nil, &exitError{code: 1, err: err}
	}
	if err := applyCatalogConfig(ctx, mgr, cfg); err != nil {
		return nil, usageErr(err)
	}
	actx, cancel := context.WithCancel(context.Background())
	a := &app{log: log, mgr: mgr, cancel: cancel}
	a.srv = proxy.New(proxy.Options{Logger: log, Clock: clk, Registry: reg, Policy: policy{mgr}})
	fwd := newForwarders(mgr, cfg.Admin.ForwardUsers)
	for _, r := range cfg.Routes {
		fe, err := frontend(r, log, clk, reg, fwd)
		if err != nil {
			a.close()
			return nil, usageErr(err)
		}
		canCancel := r.Protocol == "postgres" || (r.Protocol == "mysql" && r.KillUser != "")
		if err := mgr.SetRoute(r.Name, wlm.Route{Link: r.Link, Protocol: r.Protocol, Emulation: r.Emulation, CanCancel: canCancel}); err != nil {
			a.close()
			return nil, usageErr(fmt.Errorf("route %s: %w", r.Name, err))
		}
		if _, err := a.srv.AddRoute(proxy.Route{
			Name: r.Name, Listen: r.Listen, Upstream: r.Upstream, Protocol: r.Protocol, Link: r.Link,
			Frontend: fe, DialTimeout: r.DialTimeout, NotSentLowat: r.NotSentLowat,
		}); err != nil {
			a.close()
			return nil, &exitError{code: 1, err: err}
		}
	}
	go func() {
		if err := mgr.Run(actx); err != nil && !errors.Is(err, context.Canceled) {
			log.Error("workload manager stopped", "err", err)
		}
	}()
	if cfg.Admin.Listen != "" {
		if err := a.startAdmin(actx, cfg, clk); err != nil {
			a.close()
			return nil, err
		}
	}
	if cfg.HTTP.Listen != "" {
		if err := a.startHTTP(actx, cfg, clk); err != nil {
			a.close()
			return nil, err
		}
	}
	return a, nil
}

func (a *app) startAdmin(ctx context.Context, cfg *config.Config, clk clock.Clock) error {
	users := map[string]string{}
	for u, p := range cfg.Admin.Users {
		users[u] = p
	}
	pw := os.Getenv("SLUICE_ADMIN_PASSWORD")
	if pw == "" {
		pw = cfg.Admin.Password
	}
	if pw != "" {
		users["admin"] = pw
	}
	noPassword := len(users) == 0
	if noPassword && !isLoopback(cfg.Admin.Listen) {
		return usageErr(fmt.Errorf("admin console on non-loopback address %s needs a password (SLUICE_ADMIN_PASSWORD or admin.password)", cfg.Admin.Listen))
	}
	ln, err := net.Listen("tcp", cfg.Admin.Listen)
	if err != nil {
		return &exitError{code: 1, err: fmt.Errorf("admin console: %w", err)}
	}
	console, err := admin.New(admin.Options{Manager: a.mgr, Logger: a.log.With("component", "admin"), Clock: clk, Users: users, AllowNoPassword: noPassword})
	if err != nil {
		ln.Close()
		return usageErr(fmt.Errorf("admin console: %w", err))
	}
	a.closers = append(a.closers, func() { console.Close() })
	a.log.Info("admin console listening", "listen", ln.Addr().String(), "auth", map[bool]string{true: "trust (loopback)", false: "scram-sha-256"}[noPassword])
	go func() {
		if err := console.Serve(ctx, ln); err != nil && !errors.Is(err, admin.ErrServerClosed) && !errors.Is(err, context.Canceled) {
			a.log.Error("admin console stopped", "err", err)
		}
	}()
	return nil
}

// applyCatalogConfig creates or alters the config file's links and
// applies its settings, with the same validation as the console's
// statements.
func applyCatalogConfig(ctx context.Context, mgr *wlm.Manager, cfg *config.Config) error {
	for _, l := range cfg.Links {
		if err := mgr.DefineLink(ctx, l.Name, l.Options); err != nil {
			return fmt.Errorf("config %s: links.%s: %w", cfg.Source, l.Name, err)
		}
	}
	keys := make([]string, 0, len(cfg.Settings))
	for k := range cfg.Settings {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if err := mgr.Set(ctx, k, cfg.Settings[k]); err != nil {
			return fmt.Errorf("config %s: settings.%s: bad value %q: %w", cfg.Source, k, cfg.Settings[k], err)
		}
	}
	return nil
}

func (a *app) close() {
	a.cancel()
	for _, c := range a.closers {
		c()
	}
	if a.srv != nil {
		a.srv.Close()
	}
	a.mgr.Close()
}
