package netem

import (
	"math"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/sluicelab/sluice/internal/limit"
)

// Path is the pure model of one flow direction: given when a chunk of
// bytes arrives, it says when the chunk leaves the emulated path. It reads
// no clock; time is passed in.
//
// A Path is safe for concurrent use: SetParams may be called from any
// goroutine while another calls Release.
type Path struct {
	flowSeed int64 // the per-flow seed given to NewPath

	mu sync.Mutex
	// The fields below are guarded by mu.
	params    Params  // as given
	eff       Params  // params.WithDefaults()
	rho       float64 // AR(1) coefficient on normal scores, corrCoef(eff.Correlation)
	delaySrc  rand.PCG
	delayRand *rand.Rand // draws delay samples
	lossSrc   rand.PCG
	lossRand  *rand.Rand         // draws losses; separate so losses do not depend on jitter
	z         float64            // last normal score of the delay process
	haveZ     bool               // z holds a sample
	bucket    *limit.TokenBucket // shapes to Rate with Burst; has its own lock
	arrival   time.Time          // latest arrival shaped by bucket
	shaped    bool               // bucket has seen an arrival
	last      time.Time          // last release time returned
	loss      lossState
}

// NewPath returns a Path applying p. The random generators are seeded from
// p.Seed and seed together: p.Seed names the run, seed tells apart the
// flows of a run (for example a connection number times two plus the
// direction), so that two flows do not draw the same delays.
func NewPath(p Params, seed int64) *Path {
	path := &Path{flowSeed: seed}
	path.delayRand = rand.New(&path.delaySrc)
	path.lossRand = rand.New(&path.lossSrc)
	path.loss.reset()
	path.setLocked(p, true)
	return path
}

// Params returns the parameters as last given to NewPath or SetParams.
func (p *Path) Params() Params {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.params
}

// SetParams changes the parameters of a live path; the next Release uses
// them. Release times stay monotone across the change: a chunk never
// overtakes one released under the old parameters. The delay process keeps
// its state (so the correlation carries over), the token bucket keeps its
// debt in bytes (limit.TokenBucket's SetRate and SetBurst, taken at the
// latest arrival), the loss process restarts when its settings change, and a new
// Seed reseeds both generators.
func (p *Path) SetParams(np Params) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.setLocked(np, false)
}

func (p *Path) setLocked(np Params, first bool) {
	old := p.eff
	eff := np.WithDefaults()
	p.params = np
	p.eff = eff
	p.rho = corrCoef(eff.Correlation)
	switch {
	case first || !p.shaped:
		p.bucket = limit.NewTokenBucket(eff.Rate, int(eff.Burst))
	case old.Rate != eff.Rate || old.Burst != eff.Burst:
		p.bucket.SetRate(p.arrival, eff.Rate)
		p.bucket.SetBurst(int(eff.Burst))
	}
	if first || old.Seed != eff.Seed {
		s := uint64(eff.Seed)
		f := uint64(p.flowSeed)
		p.delaySrc.Seed(splitmix(s), splitmix(f^0x9e3779b97f4a7c15))
		p.lossSrc.Seed(splitmix(s^0x5851f42d4c957f2d), splitmix(f^0x2545f4914f6cdd1d))
		p.haveZ = false
		p.loss.reset()
	}
	if old.Loss != eff.Loss || old.LossModel != eff.LossModel {
		p.loss.reset()
	}
}

// Release returns when the n bytes that arrived at arrival leave the
// emulated path:
//
//	release = max(previous release, shaped + delay + stall)
//
// where shaped is when the token bucket has let the last of the n bytes
// through (arrival itself when the bucket holds n tokens), delay is a fresh
// sample of the delay distribution and stall is RTO times the number of
// the chunk's ceil(n/MSS) segments the loss model loses. Release times
// never decrease, so bytes are never reordered. Calls are expected in
// arrival order; an arrival earlier than the previous one is served as if
// it came in order. n <= 0 draws nothing and returns max(previous release,
// arrival + Delay).
func (p *Path) Release(arrival time.Time, n int) time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	e := &p.eff
	if n <= 0 {
		return p.monotoneLocked(arrival.Add(e.Delay))
	}
	t := arrival
	if e.Rate > 0 {
		t = p.shapeLocked(arrival, int64(n))
	}
	t = t.Add(p.delayLocked())
	segs := (int64(n) + MSS - 1) / MSS
	if lost := p.loss.lost(p.lossRand, e, segs); lost > 0 {
		t = t.Add(satMul(e.RTO, lost))
	}
	return p.monotoneLocked(t)
}

func (p *Path) monotoneLocked(t time.Time) time.Time {
	if t.Before(p.last) {
		t = p.last
	}
	p.last = t
	return t
}

// shapeLocked runs the chunk through the token bucket and returns when its
// last byte has passed: at arrival when the bucket holds n tokens, else
// when the missing ones have accrued. A chunk above the burst is reserved
// in two parts, so its last Burst bytes pass when they are paid for rather
// than when the bucket is full.
func (p *Path) shapeLocked(arrival time.Time, n int64) time.Time {
	if arrival.After(p.arrival) || !p.shaped {
		p.arrival, p.shaped = arrival, true
	}
	if head := n - p.eff.Burst; head > 0 {
		p.bucket.Reserve(arrival, int(head))
		n = p.eff.Burst
	}
	return p.bucket.Reserve(arrival, int(n))
}

// delayLocked draws one delay: Delay + Jitter·q(u), clamped at 0. The
// normal score behind u follows an AR(1) process, z' = ρ·z + √(1-ρ²)·ε,
// which keeps z standard normal (so u exactly uniform) at any correlation.
func (p *Path) delayLocked() time.Duration {
	e := &p.eff
	if e.Jitter <= 0 {
		return e.Delay
	}
	eps := p.delayRand.NormFloat64()
	if p.haveZ && p.rho > 0 {
		p.z = p.rho*p.z + math.Sqrt(1-p.rho*p.rho)*eps
	} else {
		p.z = eps
	}
	p.haveZ = true
	d := float64(e.Delay) + float64(e.Jitter)*quantile(e.Distribution, p.z)
	if d <= 0 {
		return 0
	}
	if d >= math.MaxInt64 {
		return math.MaxInt64
	}
	return time.Duration(math.Round(d))
}

func satMul(d time.Duration, k int64) time.Duration {
	if d <= 0 || k <= 0 {
		return 0
	}
	if k > math.MaxInt64/int64(d) {
		return math.MaxInt64
	}
	return d * time.Duration(k)
}

// splitmix is SplitMix64's output function; it spreads nearby seeds apart.
func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}
