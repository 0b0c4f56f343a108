package lab

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/sluicelab/sluice/internal/admission"
	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/config"
	"github.com/sluicelab/sluice/internal/link"
	"github.com/sluicelab/sluice/internal/netem"
	"github.com/sluicelab/sluice/internal/session"
	"github.com/sluicelab/sluice/internal/stack"
	"github.com/sluicelab/sluice/internal/units"
	"github.com/sluicelab/sluice/internal/wlm"
)

// sluice is the stack of `sluice serve`, built in process with no
// consoles: routes to the target, the catalog, and the rule evaluator.
type sluice struct {
	db  *database
	log *slog.Logger
	st  *stack.Stack
	reg *session.Registry
	// The workload manager's roles, as the lab uses them.
	catalog interface {
		Exec(ctx context.Context, sql string) (wlm.Result, error)
	}
	links interface{ Link(name string) *link.Link }
	rules interface{ Stats() wlm.Stats }
	adm   interface {
		AdmissionStats() map[string]admission.PoolStats
	}
}

// lateness returns the release lateness of every delay line so far, all
// routes, directions and kinds of wait together.
func (s *sluice) lateness() netem.LatenessSnapshot {
	var sum netem.LatenessSnapshot
	s.st.Proxy().ReleaseLateness(func(_, _, _ string, h netem.LatenessSnapshot) {
		sum.Count += h.Count
		sum.Sum += h.Sum
	})
	return sum
}

// startSluice starts the proxy and the workload manager with no routes.
func startSluice(clk clock.Clock, log *slog.Logger, db *database) (*sluice, error) {
	st, err := stack.New(context.Background(), stack.Options{Clock: clk, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("sluice: %w", err)
	}
	return wrapStack(st, log, db), nil
}

// wrapStack is the lab's view of a running stack; its routes go to db.
func wrapStack(st *stack.Stack, log *slog.Logger, db *database) *sluice {
	return &sluice{db: db, log: log, st: st, reg: st.Registry(), catalog: st.Manager().Service(), links: st.Manager().Runtime(), rules: st.Manager().Rules(), adm: st.Manager().Admission()}
}

// addRoute adds a route to the target on a free loopback port and
// returns its address. Sessions of users without a binding go to pool
// ("" for none).
func (s *sluice) addRoute(name, pool string) (string, error) {
	return s.addRouteOn(name, pool, nil)
}

// addRouteOn is addRoute on the listener ln (opened inside a network
// namespace, say); nil listens on a free loopback port.
func (s *sluice) addRouteOn(name, pool string, ln net.Listener) (string, error) {
	db := s.db
	r := config.Route{Name: name, Listen: "127.0.0.1:0", Upstream: db.upstream, Protocol: db.protocol, UpstreamTLS: db.upstreamTLS}
	if ln != nil {
		r.Listen = ln.Addr().String()
	}
	if db.protocol == protoMySQL {
		r.KillUser, r.KillPassword = db.user, db.password
	}
	addr, err := s.st.AddRoute(stack.Route{Route: r, Pool: pool, Listener: ln})
	if err != nil {
		return "", fmt.Errorf("route %s: %w", name, err)
	}
	return addr.String(), nil
}

// exec runs console statements in order; the audit trail records them as
// the lab's.
func (s *sluice) exec(ctx context.Context, stmts ...string) error {
	ctx = wlm.WithActor(ctx, wlm.Actor{Surface: wlm.SurfaceLab})
	for _, q := range stmts {
		s.log.Debug("sluice", "statement", q)
		if _, err := s.catalog.Exec(ctx, q); err != nil {
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
// queuedBytes is the bytes waiting in the default link's queues, both
// directions.
func (s *sluice) queuedBytes() int64 {
	st := s.linkStats()
	return st.Directions[link.Down].QueueBytes() + st.Directions[link.Up].QueueBytes()
}

func (s *sluice) linkStats() link.Stats {
	if l := s.links.Link(wlm.DefaultLink); l != nil {
		return l.Stats()
	}
	return link.Stats{}
}

// admission returns the statements of pool holding an admission slot
// and those waiting for one (SHOW POOLS' running and waiting); 0, 0 for a
// pool admission does not count.
func (s *sluice) admission(pool string) (running, waiting int) {
	st := s.adm.AdmissionStats()[pool]
	return st.Running, st.Waiting
}

func (s *sluice) close() { s.st.Close() }

// linkCounts are bytes that left the default link, server to client.
type linkCounts struct{ total, low int64 }

// linkBytes returns the bytes that have left the default link's device
// queue, server to client (admitted minus still queued), in all and in
// the low class.
func (s *sluice) linkBytes() linkCounts {
	d := s.linkStats().Directions[link.Down]
	var in int64
	for _, c := range d.Classes {
		in += c.Bytes
	}
	return linkCounts{total: in - d.QueueBytes(), low: d.Classes[link.Low].Bytes - d.Queue[link.Low]}
}

// rate is n bytes over d in bytes/s; 0 for no time.
func rate(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// releasedSince returns how many chunks the delay lines released since
// before, a lateness snapshot, and how late they left after their
// emulated release times on average, in µs (negative: early; 0 for no
// chunk).
func (s *sluice) releasedSince(before netem.LatenessSnapshot) (chunks uint64, lateUs float64) {
	late := s.lateness()
	chunks = late.Count - before.Count
	if chunks > 0 {
		lateUs = float64(late.Sum-before.Sum) / float64(chunks) / float64(time.Microsecond)
	}
	return chunks, lateUs
}

// statements counts the running statements that match picks out and how
// many of them are penalised.
func (s *sluice) statements(match func(*session.Snapshot) bool) (running, penalised int) {
	for _, st := range s.reg.Active() {
		snap := st.Snapshot()
		if match(&snap) {
			running++
			if snap.Penalized {
				penalised++
			}
		}
	}
	return running, penalised
}

// queueSamples sum what sampleQueue saw.
type queueSamples struct {
	n int64 // samples
	// queueSum and queueMax are the default link's device queue, server
	// to client, in bytes, summed over the samples and at most.
	queueSum, queueMax int64
	// runningMax is the most statements of the pool holding an
	// admission slot; waitingSum the statements waiting for one, summed.
	runningMax int
	waitingSum int64
}

// sampleQueue samples the default link's device queue (server to
// client) and pool's admission every period of clk until the returned
// stop is called, which returns what the samples saw.
func (s *sluice) sampleQueue(ctx context.Context, clk clock.Clock, period time.Duration, pool string) (stop func() queueSamples) {
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan queueSamples, 1)
	go func() {
		var q queueSamples
		for clock.Sleep(sctx, clk, period) == nil {
			b := s.linkStats().Directions[link.Down].QueueBytes()
			running, waiting := s.admission(pool)
			q.n++
			q.queueSum += b
			q.queueMax = max(q.queueMax, b)
			q.runningMax = max(q.runningMax, running)
			q.waitingSum += int64(waiting)
		}
		done <- q
	}()
	return func() queueSamples {
		cancel()
		return <-done
	}
}
