package stack

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"slices"
	"strings"

	"github.com/sluicelab/sluice/internal/config"
	"github.com/sluicelab/sluice/internal/proxy"
	"github.com/sluicelab/sluice/internal/sqlstate"
	"github.com/sluicelab/sluice/internal/wire"
	"github.com/sluicelab/sluice/internal/wire/mysql"
	"github.com/sluicelab/sluice/internal/wire/pg"
	"github.com/sluicelab/sluice/internal/wlm"
	"github.com/sluicelab/sluice/internal/wlm/ddl"
)

// Route is a route to add: one of the configuration's, and the pool of
// the sessions whose user has no binding. Pool, when set, wins over the
// configuration's Route.Pool ("" for none: the lab sets it here).
type Route struct {
	config.Route
	Pool string
	// Listener, if set, is used instead of listening on Listen (a
	// listener opened inside a network namespace, say).
	Listener net.Listener
	// Dial, if set, connects to the upstream instead of the route's own
	// dialer (from inside a network namespace, say).
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// pool is the route's default pool: Pool, else the configuration's.
func (r Route) pool() string {
	if r.Pool != "" {
		return r.Pool
	}
	return r.Route.Pool
}

// AddRoute validates r as New validates the configuration's routes, then
// binds it and returns its address. A *ConfigError means nothing was
// bound; an error after that leaves the route's binding in the catalog
// (SetRoute again, or a new route of the name, replaces it).
func (s *Stack) AddRoute(r Route) (net.Addr, error) {
	pr, err := s.prepare(s.Config(), r)
	if err != nil {
		return nil, err
	}
	return s.srv.AddRoute(pr)
}

// prepare makes r's front end and gives r's binding to the workload
// manager; it binds nothing. Its errors are *ConfigError, naming where
// cfg gave r.
func (s *Stack) prepare(cfg *config.Config, r Route) (proxy.Route, error) {
	pr, err := s.proxyRoute(cfg, r)
	if err != nil {
		return proxy.Route{}, err
	}
	if err := setRoute(s.mgr, cfg, r); err != nil {
		return proxy.Route{}, err
	}
	return pr, nil
}

// proxyRoute makes r's proxy route with its front end (loading its TLS
// files); it binds nothing and changes nothing. Its errors are
// *ConfigError.
func (s *Stack) proxyRoute(cfg *config.Config, r Route) (proxy.Route, error) {
	fe, err := s.frontend(cfg, r.Route)
	if err != nil {
		return proxy.Route{}, configErr(err)
	}
	return proxy.Route{
		Name: r.Name, Listen: r.Listen, Listener: r.Listener, Dial: r.Dial, Upstream: r.Upstream, Protocol: r.Protocol, Link: r.Link,
		Frontend: fe, DialTimeout: r.DialTimeout, NotSentLowat: r.NotSentLowat,
	}, nil
}

// setRoute gives r's binding (link, default pool, emulation) to mgr,
// which live sessions of the route pick up at their next chunk. Its
// errors are *ConfigError naming where cfg gave r.
func setRoute(mgr *wlm.Manager, cfg *config.Config, r Route) error {
	pool := r.pool()
	if pool != "" && mgr.Service().Catalog().Pools[pool] == nil {
		file, key := cfg.RouteKey(r.Route, "pool")
		return configErr(&config.Error{File: file, Key: key, Value: pool, Msg: fmt.Sprintf("resource pool %q does not exist (CREATE RESOURCE POOL on the console first)", pool)})
	}
	canCancel := r.Protocol == "postgres" || (r.Protocol == "mysql" && r.KillUser != "")
	wr := wlm.Route{Link: r.Link, Protocol: r.Protocol, Pool: pool, Emulation: r.Emulation, CanCancel: canCancel}
	if err := mgr.Runtime().SetRoute(r.Name, wr); err != nil {
		return configErr(routeError(cfg, r.Route, err))
	}
	return nil
}

// frontend builds a route's protocol front end; nil for tcp.
func (s *Stack) frontend(cfg *config.Config, r config.Route) (proxy.Frontend, error) {
	bad := func(field, value, msg string) error {
		file, key := cfg.RouteKey(r, field)
		return &config.Error{File: file, Key: key, Value: value, Msg: msg}
	}
	var serverTLS, upTLS *tls.Config
	if r.TLS != nil {
		cert, err := tls.LoadX509KeyPair(r.TLS.Cert, r.TLS.Key)
		if err != nil {
			return nil, bad("tls", r.TLS.Cert, err.Error())
		}
		serverTLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	if r.UpstreamTLS != nil {
		upTLS = &tls.Config{ServerName: r.UpstreamTLS.ServerName, InsecureSkipVerify: r.UpstreamTLS.InsecureSkipVerify, MinVersion: tls.VersionTLS12}
		if upTLS.ServerName == "" {
			host, _, _ := net.SplitHostPort(r.Upstream)
			upTLS.ServerName = host
		}
		if r.UpstreamTLS.CA != "" {
			pem, err := os.ReadFile(r.UpstreamTLS.CA)
			if err != nil {
				return nil, bad("upstream_tls.ca", r.UpstreamTLS.CA, err.Error())
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, bad("upstream_tls.ca", r.UpstreamTLS.CA, "no PEM certificate found")
			}
			upTLS.RootCAs = pool
		}
	}
	rlog := s.log.With("route", r.Name)
	switch r.Protocol {
	case "postgres":
		return pg.New(pg.Options{Clock: s.clk, Logger: rlog, Upstream: r.Upstream, TLS: serverTLS, UpstreamTLS: upTLS, Keys: s.reg, Forward: s.fwd.forwarder(ddl.PostgreSQL), Admit: s.mgr.Admission(), Coordinators: s.mgr.Runtime(),
			StartupTimeout: r.StartupTimeout, WhatIf: s.wi}), nil
	case "mysql":
		return mysql.New(mysql.Options{Clock: s.clk, Logger: rlog, Upstream: r.Upstream, TLS: serverTLS, UpstreamTLS: upTLS, KillUser: r.KillUser, KillPassword: r.KillPassword, Forward: s.fwd.forwarder(ddl.MySQL), Admit: s.mgr.Admission(),
			StartupTimeout: r.StartupTimeout, ConnectTimeout: r.ConnectTimeout, WhatIf: s.wi}), nil
	}
	return nil, nil
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
	if e.Code == sqlstate.UndefinedObject {
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
	if sess := wire.SessionFrom(ctx); sess != nil {
		ctx = wlm.WithActor(ctx, wlm.Actor{Surface: wlm.SurfaceForward, User: sess.User(), Addr: sess.Info.Client})
	}
	rest, took, err := f.mgr.Service().ForwardUser(ctx, sql, f.dialect)
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
	users map[string]bool // nil: forwarding is off
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
