package toxics

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/proxy"
	"github.com/sluicelab/sluice/internal/wlm"
)

// DefaultListen is the listen address of a proxy created without one.
const DefaultListen = "127.0.0.1:0"

// Catalog runs catalog statements: the workload manager's catalog
// service. It must be safe for concurrent use.
type Catalog interface {
	Exec(ctx context.Context, sql string) (wlm.Result, error)
}

// Routes holds the proxy routes the workload manager binds: the binding
// runtime. It must be safe for concurrent use.
type Routes interface {
	Routes() map[string]wlm.Route
	SetRoute(name string, r wlm.Route) error
	RemoveRoute(name string)
}

// Options configure a Service.
type Options struct {
	// Server runs the proxies' routes. Required.
	Server *proxy.Server
	// Catalog creates and drops the proxies' links (*wlm.Service).
	// Required.
	Catalog Catalog
	// Routes holds the proxies' routes (*wlm.Runtime). Required.
	Routes Routes
	// Clock times the toxics; nil means clock.Real.
	Clock clock.Clock
	// Logger receives proxy and toxic changes; nil discards them.
	Logger *slog.Logger
	// Version is what GET /version answers; "" means "dev".
	Version string
	// Rand draws the toxicity of a toxic for a connection, uniform in
	// [0, 1); nil means math/rand/v2's Float64. It must be safe for
	// concurrent use.
	Rand func() float64
	// CheckListen, if not nil, is asked about every listen address a
	// request gives, before a proxy listens on it (create, populate, an
	// update that changes the address; the default address included). An
	// error refuses the request with 403 and its message. It is called
	// with the Service's lock held and must not call back into the
	// Service.
	CheckListen func(listen string) error
	// Audit, if not nil, records every change made through the Service
	// (create, update, delete and populate of proxies, add, update and
	// removal of toxics, reset), successful or not, with the Actor of the
	// request's context: the audit trail of the console's changes.
	Audit Auditor
}

// Service runs Toxiproxy-style proxies: tcp routes of a proxy.Server, each
// with its own link, whose writes pass through toxics. It is safe for
// concurrent use.
type Service struct {
	srv     *proxy.Server
	cat     Catalog
	routes  Routes
	clk     clock.Clock
	log     *slog.Logger
	version string
	draw    func() float64
	check   func(listen string) error // nil allows every address
	aud     Auditor                   // nil records nothing

	mu      sync.Mutex
	proxies map[string]*proxyState // guarded by mu
	nextID  uint64                 // guarded by mu; toxic ids and generations
	chains  uint64                 // guarded by mu; chain versions
}

// proxyState is one proxy.
type proxyState struct {
	svc   *Service
	name  string
	chain atomic.Pointer[chain]

	// The fields below are guarded by Service.mu.
	listen   string // the bound address once started
	upstream string
	enabled  bool
	ownLink  bool // the proxy created its link and drops it when deleted

	connMu sync.Mutex
	conns  map[*conn]struct{} // guarded by connMu; live wrapped sockets
}

// New returns a Service with no proxies.
func New(o Options) (*Service, error) {
	if o.Server == nil || o.Catalog == nil || o.Routes == nil {
		return nil, errors.New("toxics: Options.Server, Catalog and Routes are required")
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Rand == nil {
		o.Rand = rand.Float64
	}
	return &Service{
		srv: o.Server, cat: o.Catalog, routes: o.Routes, clk: o.Clock, log: o.Logger, version: cmp.Or(o.Version, "dev"), draw: o.Rand, check: o.CheckListen, aud: o.Audit,
		proxies: make(map[string]*proxyState),
	}, nil
}

// Proxy is a proxy as the Toxiproxy API shows it.
type Proxy struct {
	Name     string  `json:"name"`
	Listen   string  `json:"listen"`
	Upstream string  `json:"upstream"`
	Enabled  bool    `json:"enabled"`
	Toxics   []Toxic `json:"toxics"`
}

// Config is a proxy to create or the fields of a proxy to change; in an
// update nil fields keep their value.
type Config struct {
	Name     string  `json:"name"`
	Listen   *string `json:"listen"`
	Upstream *string `json:"upstream"`
	Enabled  *bool   `json:"enabled"`
}

// viewLocked returns the API form of px. Toxics are listed upstream
// first, then downstream, each in creation order, as Toxiproxy does.
func (px *proxyState) viewLocked() Proxy {
	p := Proxy{Name: px.name, Listen: px.listen, Upstream: px.upstream, Enabled: px.enabled, Toxics: []Toxic{}}
	ch := px.chain.Load()
	for _, s := range []string{Upstream, Downstream} {
		for _, t := range ch.toxics {
			if t.stream == s {
				p.Toxics = append(p.Toxics, t.view())
			}
		}
	}
	return p
}

// wrap returns the proxy.Route hook that applies stream's toxics to a
// session's socket.
func (px *proxyState) wrap(stream string) func(net.Conn) net.Conn {
	return func(nc net.Conn) net.Conn {
		c := newConn(px, stream, nc, px.svc.clk, px.svc.draw)
		px.connMu.Lock()
		px.conns[c] = struct{}{}
		px.connMu.Unlock()
		c.refresh()
		return c
	}
}

func (px *proxyState) forget(c *conn) {
	px.connMu.Lock()
	delete(px.conns, c)
	px.connMu.Unlock()
}

// refreshAll makes every live connection apply the current chain.
func (px *proxyState) refreshAll() {
	px.connMu.Lock()
	cs := slices.Collect(maps.Keys(px.conns))
	px.connMu.Unlock()
	for _, c := range cs {
		c.refresh()
	}
}

// publishLocked replaces px's toxics and applies them to live
// connections.
func (s *Service) publishLocked(px *proxyState, ts []*toxic) {
	s.chains++
	px.chain.Store(&chain{version: s.chains, toxics: ts})
	px.refreshAll()
}

func (s *Service) nextIDLocked() uint64 {
	s.nextID++
	return s.nextID
}

func notFound(name string) *Error {
	return errorf(http.StatusNotFound, "", "proxy not found: %q", name)
}

// proxyLocked returns the named proxy, or the 404 error; s.mu is held.
func (s *Service) proxyLocked(name string) (*proxyState, error) {
	px := s.proxies[name]
	if px == nil {
		return nil, notFound(name)
	}
	return px, nil
}

// toxicLocked returns the named proxy, its toxics and the index of the
// named toxic among them, or the 404 error of the proxy or the toxic;
// s.mu is held.
func (s *Service) toxicLocked(proxyName, toxicName string) (*proxyState, []*toxic, int, error) {
	px, err := s.proxyLocked(proxyName)
	if err != nil {
		return nil, nil, 0, err
	}
	cur := px.chain.Load().toxics
	i := slices.IndexFunc(cur, func(t *toxic) bool { return t.name == toxicName })
	if i < 0 {
		return nil, nil, 0, errorf(http.StatusNotFound, "", "toxic not found: %q", toxicName)
	}
	return px, cur, i, nil
}

// quoteIdent quotes a name as an SQL identifier.
func quoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

// checkListen checks a proxy's listen address: its form, then the
// Options.CheckListen policy. field names it in errors.
func (s *Service) checkListen(field, listen string) error {
	if err := checkAddr(field, listen); err != nil {
		return err
	}
	if s.check == nil {
		return nil
	}
	if err := s.check(listen); err != nil {
		return errorf(http.StatusForbidden, field, "%s %q refused: %v", field, listen, err)
	}
	return nil
}

func checkAddr(field, addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return errorf(http.StatusBadRequest, field, "%s %q is invalid: want host:port", field, addr)
	}
	if port == "" {
		return errorf(http.StatusBadRequest, field, "%s %q is invalid: the port is missing", field, addr)
	}
	return nil
}

// listenOf returns the listen address of a proxy to create from c:
// c.Listen, or DefaultListen when it is absent or "".
func listenOf(c Config) string {
	if c.Listen != nil && *c.Listen != "" {
		return *c.Listen
	}
	return DefaultListen
}

// Proxies returns every proxy, sorted by name.
func (s *Service) Proxies() []Proxy {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Proxy, 0, len(s.proxies))
	for _, px := range s.proxies {
		out = append(out, px.viewLocked())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Proxy returns the named proxy.
func (s *Service) Proxy(name string) (Proxy, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	px, err := s.proxyLocked(name)
	if err != nil {
		return Proxy{}, err
	}
	return px.viewLocked(), nil
}

// CreateProxy creates a proxy: a tcp route named c.Name from c.Listen
// (default DefaultListen) to c.Upstream, attached to a link of the same
// name (created unless it exists), started unless c.Enabled is false.
func (s *Service) CreateProxy(ctx context.Context, c Config) (p Proxy, err error) {
	defer func() { s.audit(ctx, proxyText("CREATE", c.Name, c), err) }()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.createLocked(ctx, c)
}

func (s *Service) createLocked(ctx context.Context, c Config) (Proxy, error) {
	if err := checkName(c.Name, "name"); err != nil {
		return Proxy{}, err
	}
	if c.Upstream == nil || *c.Upstream == "" {
		return Proxy{}, errorf(http.StatusBadRequest, "upstream", "missing required field: upstream")
	}
	if err := checkAddr("upstream", *c.Upstream); err != nil {
		return Proxy{}, err
	}
	listen := listenOf(c)
	if err := s.checkListen("listen", listen); err != nil {
		return Proxy{}, err
	}
	if s.proxies[c.Name] != nil {
		return Proxy{}, errorf(http.StatusConflict, "name", "proxy already exists: %q", c.Name)
	}
	if _, ok := s.routes.Routes()[c.Name]; ok {
		return Proxy{}, errorf(http.StatusConflict, "name", "a route named %q already exists", c.Name)
	}
	for _, r := range s.srv.Routes() {
		if r.Name == c.Name {
			return Proxy{}, errorf(http.StatusConflict, "name", "a route named %q already exists", c.Name)
		}
	}
	res, err := s.cat.Exec(ctx, "CREATE LINK IF NOT EXISTS "+quoteIdent(c.Name))
	if err != nil {
		return Proxy{}, errorf(http.StatusInternalServerError, "", "proxy %s: create its link: %v", c.Name, err)
	}
	px := &proxyState{svc: s, name: c.Name, listen: listen, upstream: *c.Upstream, ownLink: len(res.Notices) == 0, conns: make(map[*conn]struct{})}
	px.chain.Store(&chain{})
	if err := s.routes.SetRoute(c.Name, wlm.Route{Link: c.Name, Protocol: "tcp"}); err != nil {
		s.dropLinkLocked(ctx, px)
		return Proxy{}, errorf(http.StatusInternalServerError, "", "proxy %s: %v", c.Name, err)
	}
	if c.Enabled == nil || *c.Enabled {
		if err := s.startLocked(px); err != nil {
			s.routes.RemoveRoute(c.Name)
			s.dropLinkLocked(ctx, px)
			return Proxy{}, err
		}
	}
	s.proxies[c.Name] = px
	s.log.Info("proxy created", "proxy", c.Name, "listen", px.listen, "upstream", px.upstream, "enabled", px.enabled)
	return px.viewLocked(), nil
}

func (s *Service) dropLinkLocked(ctx context.Context, px *proxyState) {
	if !px.ownLink {
		return
	}
	if _, err := s.cat.Exec(ctx, "DROP LINK IF EXISTS "+quoteIdent(px.name)); err != nil {
		s.log.Warn("proxy link not dropped", "proxy", px.name, "err", err)
	}
}

// startLocked starts listening for px.
func (s *Service) startLocked(px *proxyState) error {
	if px.enabled {
		return nil
	}
	addr, err := s.srv.AddRoute(proxy.Route{
		Name: px.name, Listen: px.listen, Upstream: px.upstream, Protocol: "tcp", Link: px.name,
		WrapClient: px.wrap(Downstream), WrapUpstream: px.wrap(Upstream),
	})
	if err != nil {
		status := http.StatusBadRequest
		if errors.Is(err, syscall.EADDRINUSE) {
			status = http.StatusConflict
		}
		return errorf(status, "listen", "proxy %s: %v", px.name, err)
	}
	px.listen = addr.String()
	px.enabled = true
	return nil
}

// stopLocked stops listening for px and closes its connections.
func (s *Service) stopLocked(px *proxyState) {
	if !px.enabled {
		return
	}
	if err := s.srv.RemoveRoute(px.name); err != nil {
		s.log.Warn("proxy route not removed", "proxy", px.name, "err", err)
	}
	px.enabled = false
}

// UpdateProxy changes a proxy as Toxiproxy does: a new listen or upstream
// address restarts it (closing its connections); enabled false stops it
// and closes its connections, true starts it.
func (s *Service) UpdateProxy(ctx context.Context, name string, c Config) (_ Proxy, err error) {
	defer func() { s.audit(ctx, proxyText("ALTER", name, c), err) }()
	s.mu.Lock()
	defer s.mu.Unlock()
	px, err := s.proxyLocked(name)
	if err != nil {
		return Proxy{}, err
	}
	listen, upstream := px.listen, px.upstream
	if c.Listen != nil && *c.Listen != px.listen {
		listen = *c.Listen
		if err := s.checkListen("listen", listen); err != nil {
			return Proxy{}, err
		}
	}
	if c.Upstream != nil {
		upstream = *c.Upstream
		if err := checkAddr("upstream", upstream); err != nil {
			return Proxy{}, err
		}
	}
	enabled := px.enabled
	if c.Enabled != nil {
		enabled = *c.Enabled
	}
	if listen != px.listen || upstream != px.upstream {
		s.stopLocked(px)
		px.listen, px.upstream = listen, upstream
	}
	if enabled != px.enabled {
		if enabled {
			if err := s.startLocked(px); err != nil {
				return Proxy{}, err
			}
		} else {
			s.stopLocked(px)
		}
	}
	s.log.Info("proxy updated", "proxy", name, "listen", px.listen, "upstream", px.upstream, "enabled", px.enabled)
	return px.viewLocked(), nil
}

// DeleteProxy stops a proxy, closes its connections and forgets it,
// dropping its link if it created it.
func (s *Service) DeleteProxy(ctx context.Context, name string) (err error) {
	defer func() { s.audit(ctx, "TOXIPROXY DROP PROXY "+quoteIdent(name), err) }()
	s.mu.Lock()
	defer s.mu.Unlock()
	px, err := s.proxyLocked(name)
	if err != nil {
		return err
	}
	s.deleteLocked(ctx, px)
	return nil
}

func (s *Service) deleteLocked(ctx context.Context, px *proxyState) {
	s.stopLocked(px)
	s.routes.RemoveRoute(px.name)
	s.dropLinkLocked(ctx, px)
	delete(s.proxies, px.name)
	s.log.Info("proxy deleted", "proxy", px.name)
}

// Populate creates or replaces proxies as Toxiproxy's /populate does: a
// proxy that exists with the same listen and upstream addresses is kept
// as it is (toxics included), another one of the same name is replaced.
// Every entry is checked before any is applied. It returns the proxies
// of the list, up to the first failure.
func (s *Service) Populate(ctx context.Context, cs []Config) (_ []Proxy, err error) {
	defer func() {
		names := make([]string, len(cs))
		for i, c := range cs {
			names[i] = proxyText("POPULATE", c.Name, c)
		}
		s.audit(ctx, strings.Join(names, "; "), err)
	}()
	for i, c := range cs {
		if c.Name == "" {
			return nil, errorf(http.StatusBadRequest, fmt.Sprintf("[%d].name", i), "missing required field: name at proxy %d", i+1)
		}
		if c.Upstream == nil || *c.Upstream == "" {
			return nil, errorf(http.StatusBadRequest, fmt.Sprintf("[%d].upstream", i), "missing required field: upstream at proxy %d", i+1)
		}
		if err := s.checkListen(fmt.Sprintf("[%d].listen", i), listenOf(c)); err != nil {
			return nil, err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Proxy, 0, len(cs))
	for _, c := range cs {
		if px := s.proxies[c.Name]; px != nil {
			if px.listen == listenOf(c) && px.upstream == *c.Upstream {
				out = append(out, px.viewLocked())
				continue
			}
			s.deleteLocked(ctx, px)
		}
		p, err := s.createLocked(ctx, c)
		if err != nil {
			return out, err
		}
		out = append(out, p)
	}
	return out, nil
}

// Reset enables every proxy and removes every toxic.
func (s *Service) Reset(ctx context.Context) (err error) {
	defer func() { s.audit(ctx, "TOXIPROXY RESET", err) }()
	s.mu.Lock()
	defer s.mu.Unlock()
	var first error
	for _, n := range slices.Sorted(maps.Keys(s.proxies)) {
		px := s.proxies[n]
		if err := s.startLocked(px); err != nil && first == nil {
			first = err
		}
		s.publishLocked(px, nil)
	}
	err = first
	return err
}

// Toxics returns the toxics of a proxy, upstream first.
func (s *Service) Toxics(proxyName string) ([]Toxic, error) {
	p, err := s.Proxy(proxyName)
	if err != nil {
		return nil, err
	}
	return p.Toxics, nil
}

// Toxic returns one toxic of a proxy.
func (s *Service) Toxic(proxyName, toxicName string) (Toxic, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, cur, i, err := s.toxicLocked(proxyName, toxicName)
	if err != nil {
		return Toxic{}, err
	}
	return cur[i].view(), nil
}

// AddToxic adds a toxic to a proxy; it applies to new connections and to
// the live ones. t.Stream defaults to downstream and t.Name to
// type_stream; t.Toxicity is used as given (0 never applies; the HTTP
// API defaults it to 1).
func (s *Service) AddToxic(ctx context.Context, proxyName string, t Toxic) (_ Toxic, err error) {
	defer func() { s.audit(ctx, toxicText("ADD", proxyName, t, &t.Toxicity), err) }()
	nt, err := newToxic(t)
	if err != nil {
		return Toxic{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	px, err := s.proxyLocked(proxyName)
	if err != nil {
		return Toxic{}, err
	}
	cur := px.chain.Load().toxics
	for _, x := range cur {
		if x.name == nt.name {
			return Toxic{}, errorf(http.StatusConflict, "name", "toxic already exists: %q", nt.name)
		}
	}
	nt.id = s.nextIDLocked()
	nt.gen = s.nextIDLocked()
	s.publishLocked(px, append(slices.Clone(cur), nt))
	s.log.Info("toxic added", "proxy", proxyName, "toxic", nt.name, "type", nt.kind, "stream", nt.stream, "toxicity", nt.toxicity, "attributes", nt.attrs)
	return nt.view(), nil
}

// UpdateToxic changes a toxic's attributes (those given; the others keep
// their value) and, if toxicity is not nil, its toxicity. Live
// connections draw the toxicity again, as in Toxiproxy.
func (s *Service) UpdateToxic(ctx context.Context, proxyName, toxicName string, toxicity *float64, attrs map[string]int64) (_ Toxic, err error) {
	defer func() {
		s.audit(ctx, toxicText("ALTER", proxyName, Toxic{Name: toxicName, Attributes: attrs}, toxicity), err)
	}()
	if toxicity != nil {
		if err := checkToxicity(*toxicity); err != nil {
			return Toxic{}, err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	px, cur, i, err := s.toxicLocked(proxyName, toxicName)
	if err != nil {
		return Toxic{}, err
	}
	nt := *cur[i]
	nt.attrs = make(map[string]int64, len(cur[i].attrs))
	for k, v := range cur[i].attrs {
		nt.attrs[k] = v
	}
	if err := nt.apply(attrs); err != nil {
		return Toxic{}, err
	}
	if toxicity != nil {
		nt.toxicity = *toxicity
	}
	nt.gen = s.nextIDLocked()
	next := slices.Clone(cur)
	next[i] = &nt
	s.publishLocked(px, next)
	s.log.Info("toxic updated", "proxy", proxyName, "toxic", nt.name, "toxicity", nt.toxicity, "attributes", nt.attrs)
	return nt.view(), nil
}

// RemoveToxic removes a toxic from a proxy and from its live connections.
func (s *Service) RemoveToxic(ctx context.Context, proxyName, toxicName string) (err error) {
	defer func() {
		s.audit(ctx, "TOXIPROXY REMOVE TOXIC "+quoteIdent(toxicName)+" ON "+quoteIdent(proxyName), err)
	}()
	s.mu.Lock()
	defer s.mu.Unlock()
	px, cur, i, err := s.toxicLocked(proxyName, toxicName)
	if err != nil {
		return err
	}
	s.publishLocked(px, slices.Delete(slices.Clone(cur), i, i+1))
	s.log.Info("toxic removed", "proxy", proxyName, "toxic", toxicName)
	return nil
}

// Close deletes every proxy: their routes stop, their connections close
// and the links they created are dropped.
func (s *Service) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, px := range s.proxies {
		s.deleteLocked(context.Background(), px)
	}
	return nil
}
