package stack

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"time"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/config"
	"github.com/sluicelab/sluice/internal/proxy"
	"github.com/sluicelab/sluice/internal/wlm"
	"github.com/sluicelab/sluice/internal/wlm/catalog"
	"github.com/sluicelab/sluice/internal/wlm/store"
)

// errDrainOver is the cause of a drain's context when the grace ends.
var errDrainOver = errors.New("shutdown grace over")

// ErrNoLoader is ReloadConfig's error when the stack was given no
// Options.Load: nothing to re-read.
var ErrNoLoader = errors.New("reload: this sluice was started without a configuration to re-read")

// Config returns the configuration in force. The caller must not modify
// it.
func (s *Stack) Config() *config.Config {
	s.cfgMu.Lock()
	defer s.cfgMu.Unlock()
	return s.cfg
}

// ConfigView describes the configuration in force, when it took effect
// and how many reloads came before it, without its secrets.
func (s *Stack) ConfigView() config.View {
	s.cfgMu.Lock()
	defer s.cfgMu.Unlock()
	return config.NewView(s.cfg, s.loadedAt, s.revision)
}

// ReloadConfig re-reads the configuration with Options.Load and applies
// it with Reload. A configuration Load refuses (a *config.Error) is
// returned as a *ConfigError.
func (s *Stack) ReloadConfig(ctx context.Context) (config.Changes, error) {
	if s.load == nil {
		return config.Changes{}, ErrNoLoader
	}
	next, err := s.load()
	if err != nil {
		if errors.As(err, new(*config.Error)) {
			err = configErr(err)
		}
		s.log.Error("reload refused; configuration unchanged", refusal(err)...)
		return config.Changes{}, err
	}
	return s.Reload(ctx, next)
}

// Reload makes next the configuration in force, without dropping the
// sessions of routes that did not change; see the package
// documentation. next is validated whole first, as New validates, and a
// *ConfigError (or a bind error) means nothing changed. Reloads are
// serialised. next must not be modified afterwards.
func (s *Stack) Reload(ctx context.Context, next *config.Config) (config.Changes, error) {
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	cur := s.Config()
	ch, plan, err := s.planReload(ctx, cur, next)
	if err != nil {
		s.log.Error("reload refused; configuration unchanged", refusal(err)...)
		return config.Changes{}, err
	}
	if err := s.applyReload(ctx, next, ch, plan); err != nil {
		s.log.Error("reload failed part way; the configuration in force is the previous one with the steps applied so far", "file", next.Source, "err", err)
		return config.Changes{}, err
	}
	s.cfgMu.Lock()
	s.cfg, s.loadedAt = next, s.clk.Now()
	s.revision++
	rev := s.revision
	s.cfgMu.Unlock()
	s.log.Info("configuration reloaded", "file", next.Source, "revision", rev,
		"added", ch.Added, "removed", ch.Removed, "changed", ch.Changed, "unchanged", len(ch.Unchanged))
	return ch, nil
}

// reloadPlan is a validated reload: the proxy routes to add or replace,
// by name, with the new sockets already bound.
type reloadPlan struct {
	routes map[string]proxy.Route
	bound  []net.Listener // closed again if the reload is refused
}

// planReload validates next against cur without changing anything the
// stack runs: what cannot change without a restart, route names the
// stack does not own, the links, settings and route bindings (on a
// scratch workload manager holding a copy of the catalog), the front
// ends (TLS files); then it binds the new addresses. On error nothing is
// left bound.
func (s *Stack) planReload(ctx context.Context, cur, next *config.Config) (config.Changes, *reloadPlan, error) {
	if err := config.CheckReload(cur, next); err != nil {
		return config.Changes{}, nil, configErr(err)
	}
	ch := config.Compare(cur, next)
	running := map[string]bool{}
	for _, r := range s.srv.Routes() {
		running[r.Name] = true
	}
	for _, name := range ch.Added {
		if running[name] {
			r := routeNamed(next, name)
			file, key := next.RouteKey(r, "name")
			return ch, nil, configErr(&config.Error{File: file, Key: key, Value: name, Msg: "a route of this name was added at run time (the lab, a Toxiproxy proxy); pick another name"})
		}
	}
	scratch, err := scratchManager(s.mgr.Service().Catalog())
	if err != nil {
		return ch, nil, err
	}
	defer scratch.Close()
	if err := applyCatalogConfig(ctx, scratch, next, wlm.SurfaceReload); err != nil {
		return ch, nil, configErr(err)
	}
	plan := &reloadPlan{routes: map[string]proxy.Route{}}
	for _, r := range next.Routes {
		// Every route is checked, so a TLS file gone since the last
		// load is reported even on a route that did not change.
		pr, err := s.proxyRoute(next, Route{Route: r})
		if err == nil {
			err = setRoute(scratch, next, Route{Route: r})
		}
		if err != nil {
			return ch, nil, err
		}
		if !slices.Contains(ch.Unchanged, r.Name) {
			plan.routes[r.Name] = pr
		}
	}
	for _, name := range append(slices.Clone(ch.Added), ch.Relisten...) {
		pr := plan.routes[name]
		ln, err := net.Listen("tcp", pr.Listen)
		if err != nil {
			plan.close()
			return ch, nil, fmt.Errorf("route %s: listen: %w", name, err)
		}
		plan.bound = append(plan.bound, ln)
		pr.Listener = ln
		plan.routes[name] = pr
	}
	return ch, plan, nil
}

// close closes the sockets the plan bound.
func (p *reloadPlan) close() {
	for _, ln := range p.bound {
		ln.Close()
	}
}

// applyReload applies a validated plan: the links and settings, then
// the routes changed in place, moved, added and removed. A step that
// fails here (a console statement that changed the catalog since
// planReload validated it) stops the reload where it is and is
// returned; what was applied stays.
func (s *Stack) applyReload(ctx context.Context, next *config.Config, ch config.Changes, plan *reloadPlan) (err error) {
	defer func() {
		if err != nil {
			plan.close() // the sockets not yet handed to the proxy
		}
	}()
	if err := applyCatalogConfig(ctx, s.mgr, next, wlm.SurfaceReload); err != nil {
		return configErr(err)
	}
	for _, name := range ch.Changed {
		if err := setRoute(s.mgr, next, Route{Route: routeNamed(next, name)}); err != nil {
			return err
		}
		if slices.Contains(ch.Relisten, name) {
			continue
		}
		if err := s.srv.ReplaceRoute(plan.routes[name]); err != nil {
			return err
		}
	}
	for _, name := range ch.Relisten {
		s.drain(name, next.Grace)
		if err := s.addPlanned(plan, name); err != nil {
			return err
		}
	}
	for _, name := range ch.Added {
		if err := setRoute(s.mgr, next, Route{Route: routeNamed(next, name)}); err != nil {
			return err
		}
		if err := s.addPlanned(plan, name); err != nil {
			return err
		}
	}
	for _, name := range ch.Removed {
		s.drain(name, next.Grace)
	}
	return nil
}

// addPlanned adds the planned route name on the socket the plan bound
// for it; the plan no longer owns that socket.
func (s *Stack) addPlanned(plan *reloadPlan, name string) error {
	pr := plan.routes[name]
	plan.bound = slices.DeleteFunc(plan.bound, func(ln net.Listener) bool { return ln == pr.Listener })
	_, err := s.srv.AddRoute(pr)
	return err
}

// drain stops accepting on the route name and lets its sessions run for
// grace (on the stack's clock), then closes those left. Once they have
// all ended, its workload manager binding is removed, unless the
// configuration then in force has a route of that name again.
func (s *Stack) drain(name string, grace time.Duration) {
	ctx, cancel := clock.WithTimeout(s.lctx, s.clk, grace, errDrainOver)
	done, err := s.srv.DrainRoute(ctx, name)
	if err != nil {
		cancel()
		s.log.Warn("reload: route to drain is not running", "route", name, "err", err)
		return
	}
	s.log.Info("reload: route stopped accepting; draining its sessions", "route", name, "grace", grace.String())
	s.goLoop(func() {
		defer cancel()
		<-done
		if errors.Is(context.Cause(ctx), errDrainOver) {
			s.log.Info("reload: grace over; closed the route's remaining sessions", "route", name)
		}
		s.reloadMu.Lock()
		defer s.reloadMu.Unlock()
		if !slices.ContainsFunc(s.Config().Routes, func(r config.Route) bool { return r.Name == name }) {
			s.mgr.Runtime().RemoveRoute(name)
		}
	})
}

// refusal is the log attributes of a refused reload: the error, and
// the file, key and value it names when it is a *config.Error.
func refusal(err error) []any {
	attrs := []any{"err", err}
	var ce *config.Error
	if errors.As(err, &ce) {
		attrs = append(attrs, "file", ce.File, "key", ce.Key, "value", ce.Value)
	}
	return attrs
}

// routeNamed returns the route of cfg named name (the zero Route if
// none).
func routeNamed(cfg *config.Config, name string) config.Route {
	for _, r := range cfg.Routes {
		if r.Name == name {
			return r
		}
	}
	return config.Route{}
}

// scratchManager returns a workload manager with its own copy of cat in
// memory and no runtime effect, to validate a configuration on.
func scratchManager(cat *catalog.Catalog) (*wlm.Manager, error) {
	return wlm.NewManager(wlm.ManagerOptions{Store: &copyStore{cat: cat.Clone()}, Logger: slog.New(slog.DiscardHandler)})
}

// copyStore is a wlm.Store that starts with a catalog and keeps nothing
// it is given: the store of a scratch manager. Used by one manager.
type copyStore struct {
	cat *catalog.Catalog
}

func (c *copyStore) Load(context.Context) (*catalog.Catalog, store.Revision, error) {
	return c.cat, 1, nil
}

func (c *copyStore) Save(_ context.Context, _ *catalog.Catalog, expected store.Revision) (store.Revision, error) {
	return expected + 1, nil
}
