package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"os"
	"slices"
	"sort"
	"strings"

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

// newApp checks the whole configuration against the catalog (links,
// settings, each route's front end and binding, the consoles' exposure)
// before it binds anything, so a configuration error leaves no port
// taken; then it binds the routes, the admin console and the HTTP API.
func newApp(ctx context.Context, cfg *config.Config, log *slog.Logger, clk clock.Clock, reg *session.Registry) (*app, error) {
	mgr, err := wlm.NewManager(wlm.ManagerOptions{Clock: clk, Logger: log, Registry: reg, CatalogPath: cfg.Catalog})
	if err != nil {
		return nil, &exitError{code: 1, err: err}
	}
	actx, cancel := context.WithCancel(context.Background())
	a := &app{log: log, mgr: mgr, cancel: cancel}
	fail := func(err error) (*app, error) {
		a.close()
		return nil, err
	}
	if err := applyCatalogConfig(ctx, mgr, cfg); err != nil {
		return fail(usageErr(err))
	}
	a.srv = proxy.New(proxy.Options{Logger: log, Clock: clk, Registry: reg, Policy: mgr})
	fwd := newForwarders(mgr, cfg.Admin.ForwardUsers)
	routes := make([]proxy.Route, 0, len(cfg.Routes))
	for _, r := range cfg.Routes {
		fe, err := frontend(cfg, r, log, clk, reg, fwd)
		if err != nil {
			return fail(usageErr(err))
		}
		canCancel := r.Protocol == "postgres" || (r.Protocol == "mysql" && r.KillUser != "")
		if err := mgr.SetRoute(r.Name, wlm.Route{Link: r.Link, Protocol: r.Protocol, Emulation: r.Emulation, CanCancel: canCancel}); err != nil {
			return fail(usageErr(routeError(cfg, r, err)))
		}
		routes = append(routes, proxy.Route{
			Name: r.Name, Listen: r.Listen, Upstream: r.Upstream, Protocol: r.Protocol, Link: r.Link,
			Frontend: fe, DialTimeout: r.DialTimeout, NotSentLowat: r.NotSentLowat,
		})
	}
	var (
		console   *admin.Server
		adminAuth string
	)
	if cfg.Admin.Listen != "" {
		if console, adminAuth, err = a.newAdmin(cfg, clk); err != nil {
			return fail(err)
		}
		a.closers = append(a.closers, func() { console.Close() })
	}
	var api *httpAPI
	if cfg.HTTP.Listen != "" {
		if api, err = a.newHTTP(cfg, clk); err != nil {
			return fail(err)
		}
		a.closers = append(a.closers, api.close)
	}

	for _, r := range routes {
		if _, err := a.srv.AddRoute(r); err != nil {
			return fail(&exitError{code: 1, err: err})
		}
	}
	go func() {
		if err := mgr.Run(actx); err != nil && !errors.Is(err, context.Canceled) {
			log.Error("workload manager stopped", "err", err)
		}
	}()
	if console != nil {
		if err := a.serveAdmin(actx, console, adminAuth, cfg); err != nil {
			return fail(err)
		}
	}
	if api != nil {
		if err := a.serveHTTP(actx, api, cfg); err != nil {
			return fail(err)
		}
	}
	return a, nil
}

// routeError renders an error of the workload manager about route r
// (an unknown link, bad emulation options) as a configuration error
// naming where r was given, without the SQLSTATE.
func routeError(cfg *config.Config, r config.Route, err error) error {
	var e *ddl.Error
	if !errors.As(err, &e) {
		return fmt.Errorf("route %s: %w", r.Name, err)
	}
	field, value := "emulation", emulationString(r.Emulation)
	if e.Code == ddl.CodeUndefinedObject {
		field, value = "link", r.Link
		if value == "" {
			value = wlm.DefaultLink
		}
	}
	file, key := cfg.RouteKey(r, field)
	return &config.Error{File: file, Key: key, Value: value, Msg: strings.TrimPrefix(catalogMessage(e), "route "+r.Name+": ")}
}

// emulationString renders emulation options as k=v pairs in key order.
func emulationString(em map[string]string) string {
	keys := slices.Sorted(maps.Keys(em))
	for i, k := range keys {
		keys[i] = k + "=" + em[k]
	}
	return strings.Join(keys, ", ")
}

// newAdmin makes the admin console of cfg, refusing a console without a
// password on a non-loopback address, and names its authentication for
// the log. It binds nothing.
func (a *app) newAdmin(cfg *config.Config, clk clock.Clock) (*admin.Server, string, error) {
	users := map[string]string{}
	for u, p := range cfg.Admin.Users {
		users[u] = p
	}
	pw := os.Getenv("SLUICE_ADMIN_PASSWORD")
	if pw == "" {
		pw = cfg.Admin.Password
	}
	if pw != "" {
		users[admin.DefaultUser] = pw
	}
	noPassword := len(users) == 0
	if noPassword && !isLoopback(cfg.Admin.Listen) {
		return nil, "", usageErr(fmt.Errorf("admin console on non-loopback address %s needs a password (SLUICE_ADMIN_PASSWORD or admin.password)", cfg.Admin.Listen))
	}
	console, err := admin.New(admin.Options{Manager: a.mgr, Logger: a.log.With("component", "admin"), Clock: clk, Users: users, AllowNoPassword: noPassword})
	if err != nil {
		return nil, "", usageErr(fmt.Errorf("admin console: %w", err))
	}
	if noPassword {
		return console, "trust (loopback)", nil
	}
	return console, "scram-sha-256", nil
}

// serveAdmin binds the admin console's address and serves it until ctx
// ends.
func (a *app) serveAdmin(ctx context.Context, console *admin.Server, auth string, cfg *config.Config) error {
	ln, err := net.Listen("tcp", cfg.Admin.Listen)
	if err != nil {
		return &exitError{code: 1, err: fmt.Errorf("admin console: %w", err)}
	}
	a.log.Info("admin console listening", "listen", ln.Addr().String(), "auth", auth)
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
			return &config.Error{File: cfg.Source, Msg: fmt.Sprintf("%s (link %s): %s", l.Key, l.Name, catalogMessage(err))}
		}
	}
	keys := make([]string, 0, len(cfg.Settings))
	for k := range cfg.Settings {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if err := mgr.Set(ctx, k, cfg.Settings[k]); err != nil {
			return &config.Error{File: cfg.Source, Key: "settings." + k, Value: cfg.Settings[k], Msg: catalogMessage(err)}
		}
	}
	return nil
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
