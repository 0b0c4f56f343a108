package lab

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/link"
	"github.com/sluicelab/sluice/internal/netem"
	"github.com/sluicelab/sluice/internal/proxy"
	"github.com/sluicelab/sluice/internal/session"
	"github.com/sluicelab/sluice/internal/units"
	"github.com/sluicelab/sluice/internal/wire/mysql"
	"github.com/sluicelab/sluice/internal/wire/pg"
	"github.com/sluicelab/sluice/internal/wlm"
)

// sluice is the proxy and workload manager of `sluice serve`, wired in
// process: routes to the target, the catalog, and the rule evaluator.
type sluice struct {
	db     *database
	clk    clock.Clock
	log    *slog.Logger
	reg    *session.Registry
	mgr    *wlm.Manager
	srv    *proxy.Server
	cancel context.CancelFunc
	done   chan struct{} // closed when the evaluator has stopped
}

// lateness returns the release lateness of every delay line so far, all
// routes, directions and kinds of wait together.
func (s *sluice) lateness() netem.LatenessSnapshot {
	var sum netem.LatenessSnapshot
	s.srv.ReleaseLateness(func(_, _, _ string, h netem.LatenessSnapshot) {
		sum.Count += h.Count
		sum.Sum += h.Sum
	})
	return sum
}

// startSluice starts the proxy and the workload manager with no routes.
func startSluice(clk clock.Clock, log *slog.Logger, db *database) (*sluice, error) {
	reg := session.NewRegistry(session.Options{})
	mgr, err := wlm.NewManager(wlm.ManagerOptions{Clock: clk, Logger: log, Registry: reg})
	if err != nil {
		return nil, fmt.Errorf("workload manager: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &sluice{db: db, clk: clk, log: log, reg: reg, mgr: mgr, cancel: cancel, done: make(chan struct{})}
	s.srv = proxy.New(proxy.Options{Logger: log, Clock: clk, Registry: reg, Policy: mgr})
	go func() {
		defer close(s.done)
		if err := mgr.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
			log.Error("workload manager stopped", "err", err)
		}
	}()
	return s, nil
}

// addRoute adds a route to the target on a free loopback port and
// returns its address. Sessions of users without a binding go to pool
// ("" for none).
func (s *sluice) addRoute(name, pool string) (string, error) {
	db := s.db
	rlog := s.log.With("route", name)
	var fe proxy.Frontend
	canCancel := true
	switch db.protocol {
	case protoPostgres:
		fe = pg.New(pg.Options{Clock: s.clk, Logger: rlog, Upstream: db.upstream, UpstreamTLS: db.upstreamTLS, Keys: s.reg})
	case protoMySQL:
		fe = mysql.New(mysql.Options{Clock: s.clk, Logger: rlog, Upstream: db.upstream, UpstreamTLS: db.upstreamTLS,
			KillUser: db.user, KillPassword: db.password})
		canCancel = db.user != ""
	}
	if err := s.mgr.SetRoute(name, wlm.Route{Protocol: db.protocol, Pool: pool, CanCancel: canCancel}); err != nil {
		return "", fmt.Errorf("route %s: %w", name, err)
	}
	addr, err := s.srv.AddRoute(proxy.Route{Name: name, Listen: "127.0.0.1:0", Upstream: db.upstream, Protocol: db.protocol, Frontend: fe})
	if err != nil {
		return "", err
	}
	return addr.String(), nil
}

// exec runs console statements in order.
func (s *sluice) exec(ctx context.Context, stmts ...string) error {
	for _, q := range stmts {
		s.log.Debug("sluice", "statement", q)
		if _, err := s.mgr.Exec(ctx, q); err != nil {
			return fmt.Errorf("sluice: %s: %w", q, err)
		}
	}
	return nil
}

// setRTT makes the default link add rtt to every round trip: a one-way
// delay of rtt/2 in each direction. 0 removes the delay.
func (s *sluice) setRTT(ctx context.Context, rtt time.Duration) error {
	if rtt <= 0 {
		return s.exec(ctx, "ALTER LINK default WITH (delay=DEFAULT)")
	}
	return s.exec(ctx, fmt.Sprintf("ALTER LINK default WITH (delay='%dus')", (rtt/2).Microseconds()))
}

// setCapacity sets the default link's capacity in bytes/s; 0 removes it.
func (s *sluice) setCapacity(ctx context.Context, bps int64) error {
	if bps <= 0 {
		return s.exec(ctx, "ALTER LINK default WITH (capacity=DEFAULT)")
	}
	return s.exec(ctx, fmt.Sprintf("ALTER LINK default WITH (capacity='%s')", units.FormatRate(bps)))
}

// linkStats returns the default link's counters.
func (s *sluice) linkStats() link.Stats {
	if l := s.mgr.Link(wlm.DefaultLink); l != nil {
		return l.Stats()
	}
	return link.Stats{}
}

func (s *sluice) close() {
	s.cancel()
	s.srv.Close()
	<-s.done
	s.mgr.Close()
}
