package whatif

import (
	"cmp"
	"math"
	"math/bits"
	"slices"
	"sync"
	"time"
)

// Defaults for zero Options fields.
const (
	DefaultWindow  = 60 * time.Second
	DefaultMaxApps = 256
)

// Other is the user, database and application of the application that
// sessions beyond Options.MaxApps count for.
const Other = "(other)"

// Key names an application: protocol ("postgres", "mysql"), user,
// database and application (PostgreSQL application_name, MySQL
// program_name connection attribute).
type Key struct {
	Protocol, User, Database, Application string
}

// Options configure a Table. The zero value of each field is its default.
type Options struct {
	// Window is how far back Snapshot looks, rounded up to whole seconds;
	// 0 is 60 s.
	Window time.Duration
	// MaxApps bounds the applications kept; 0 is 256. Further ones count
	// for the (other) application of their protocol.
	MaxApps int
}

// Table aggregates the completed transactions of every application over
// a sliding window. It is safe for concurrent use.
type Table struct {
	window  int64 // seconds, >= 1
	maxApps int

	mu   sync.Mutex
	apps map[Key]*app // guarded by mu
}

// New returns an empty Table.
func New(o Options) *Table {
	w := int64((cmp.Or(o.Window, DefaultWindow) + time.Second - 1) / time.Second)
	return &Table{window: max(w, 1), maxApps: cmp.Or(max(o.MaxApps, 0), DefaultMaxApps), apps: map[Key]*app{}}
}

// Window returns the span Snapshot covers.
func (t *Table) Window() time.Duration { return time.Duration(t.window) * time.Second }

// app is one application's aggregation; all of it is guarded by
// Table.mu.
type app struct {
	key     Key
	first   time.Time          // when it was first seen
	conns   map[*Conn]struct{} // open sessions
	closed  []int64            // unix second of the last transaction of each closed session, in closing order
	buckets []bucket           // ring indexed by unix second mod window
}

// histBins is the size of the round-trips histogram: counts 0..31 exact,
// then one bin per power of two up to 2^51.
const histBins = 52

// bucket sums one second of completed transactions. Durations are sums
// in nanoseconds.
type bucket struct {
	sec        int64 // unix second held; any other value means empty
	txns       int64
	roundTrips int64
	latency    int64
	server     int64
	client     int64
	network    int64
	gaps       int64 // gaps between transactions measured
	gapSum     int64
	rttSamples int64
	clientRTT  int64
	upRTT      int64
	hist       [histBins]uint32
}

// txn is a completed transaction as a Conn reports it.
type txn struct {
	latency, server, client, network time.Duration
	roundTrips                       int64
}

// at returns the bucket of unix second sec, emptied if it held another.
func (a *app) at(sec, window int64) *bucket {
	b := &a.buckets[((sec%window)+window)%window]
	if b.sec != sec {
		*b = bucket{sec: sec}
	}
	return b
}

// histBin is the bin of n round trips.
func histBin(n int64) int {
	if n < 32 {
		return int(max(n, 0))
	}
	return min(32+bits.Len64(uint64(n))-6, histBins-1) // 32..63 -> 32, 64..127 -> 33
}

// binValue is the value a bin stands for: its count, or the middle of a
// power-of-two bin.
func binValue(b int) float64 {
	if b < 32 {
		return float64(b)
	}
	lo := math.Ldexp(1, b-32+5)
	return lo * 1.5
}

// appFor returns the application of k, creating it, or the (other)
// application of k's protocol when the table is full.
func (t *Table) appFor(k Key, now time.Time) *app {
	t.mu.Lock()
	defer t.mu.Unlock()
	if a := t.apps[k]; a != nil {
		return a
	}
	if len(t.apps) >= t.maxApps {
		t.pruneLocked(now)
	}
	if len(t.apps) >= t.maxApps {
		k = Key{Protocol: k.Protocol, User: Other, Database: Other, Application: Other}
		if a := t.apps[k]; a != nil {
			return a
		}
	}
	a := &app{key: k, first: now, conns: map[*Conn]struct{}{}, buckets: make([]bucket, t.window)}
	t.apps[k] = a
	return a
}

// pruneLocked forgets the applications with no open session and nothing
// in the window ending at now.
func (t *Table) pruneLocked(now time.Time) {
	lo := now.Unix() - t.window
	for k, a := range t.apps {
		if len(a.conns) > 0 {
			continue
		}
		empty := true
		for i := range a.buckets {
			if a.buckets[i].sec > lo {
				empty = false
				break
			}
		}
		if empty {
			delete(t.apps, k)
		}
	}
}

// record adds a completed transaction at now, and when gapped the
// client time between it and the session's previous one.
func (t *Table) record(a *app, now time.Time, x txn, gap time.Duration, gapped bool) {
	t.mu.Lock()
	b := a.at(now.Unix(), t.window)
	if gapped {
		b.gaps++
		b.gapSum += int64(gap)
	}
	b.txns++
	b.roundTrips += x.roundTrips
	b.latency += int64(x.latency)
	b.server += int64(x.server)
	b.client += int64(x.client)
	b.network += int64(x.network)
	b.hist[histBin(x.roundTrips)]++
	t.mu.Unlock()
}

// recordRTT adds one sample of a session's sockets' kernel RTT.
func (t *Table) recordRTT(a *app, now time.Time, client, upstream time.Duration) {
	t.mu.Lock()
	b := a.at(now.Unix(), t.window)
	b.rttSamples++
	b.clientRTT += int64(client)
	b.upRTT += int64(upstream)
	t.mu.Unlock()
}

// closeConn removes c from its application, keeping the second of its
// last transaction while it is in the window.
func (t *Table) closeConn(c *Conn, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	a := c.app
	delete(a.conns, c)
	if last := c.lastTxn.Load(); last > now.Unix()-t.window {
		a.closed = append(a.closed, last)
		if len(a.closed) > maxClosed {
			a.closed = slices.Delete(a.closed, 0, len(a.closed)-maxClosed)
		}
	}
}

// maxClosed bounds the closed sessions remembered per application (for
// App.Sessions); beyond it the first closed are forgotten.
const maxClosed = 1 << 16

// Snapshot returns every application with a transaction in the window
// ending at now, sorted by protocol, user, database and application.
// Applications with nothing in the window are left out (and forgotten
// when they have no open session).
func (t *Table) Snapshot(now time.Time) []App {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.pruneLocked(now)
	nowSec := now.Unix()
	lo := nowSec - t.window
	out := make([]App, 0, len(t.apps))
	for _, a := range t.apps {
		var sum bucket
		for i := range a.buckets {
			b := &a.buckets[i]
			if b.sec <= lo || b.sec > nowSec {
				continue
			}
			sum.txns += b.txns
			sum.roundTrips += b.roundTrips
			sum.latency += b.latency
			sum.server += b.server
			sum.client += b.client
			sum.network += b.network
			sum.gaps += b.gaps
			sum.gapSum += b.gapSum
			sum.rttSamples += b.rttSamples
			sum.clientRTT += b.clientRTT
			sum.upRTT += b.upRTT
			for j, n := range b.hist {
				sum.hist[j] += n
			}
		}
		if sum.txns == 0 {
			continue
		}
		sessions := 0
		for c := range a.conns {
			if c.lastTxn.Load() > lo {
				sessions++
			}
		}
		a.closed = slices.DeleteFunc(a.closed, func(sec int64) bool { return sec <= lo })
		sessions += len(a.closed)
		out = append(out, summarize(a.key, &sum, sessions, span(now, a.first, lo+1)))
	}
	slices.SortFunc(out, func(x, y App) int {
		return cmp.Or(cmp.Compare(x.Protocol, y.Protocol), cmp.Compare(x.User, y.User),
			cmp.Compare(x.Database, y.Database), cmp.Compare(x.Application, y.Application))
	})
	return out
}

// minSpan is the least time rates are taken over.
const minSpan = 100 * time.Millisecond

// span is the time rates are taken over: from the start of the window's
// oldest second (unix second from) to now, or from first when it is
// later; never under minSpan.
func span(now, first time.Time, from int64) time.Duration {
	start := time.Unix(from, 0)
	if first.After(start) {
		start = first
	}
	return max(now.Sub(start), minSpan)
}

// summarize turns the window's sums into an App.
func summarize(k Key, s *bucket, sessions int, span time.Duration) App {
	n := float64(s.txns)
	mean := func(sum int64) time.Duration { return time.Duration(float64(sum) / n) }
	a := App{
		Protocol: k.Protocol, User: k.User, Database: k.Database, Application: k.Application,
		Sessions:      sessions,
		Transactions:  s.txns,
		TPS:           n / span.Seconds(),
		Concurrency:   float64(s.latency) / float64(span),
		RoundTrips:    float64(s.roundTrips) / n,
		RoundTripsP95: percentile(&s.hist, s.txns, 0.95),
		Latency:       mean(s.latency),
		ServerTime:    mean(s.server),
		NetworkWait:   mean(s.network),
	}
	var gap time.Duration
	if s.gaps > 0 {
		gap = time.Duration(float64(s.gapSum) / float64(s.gaps))
	}
	a.ClientTime = mean(s.client) + gap
	a.Cycle = a.Latency + gap
	if s.rttSamples > 0 {
		a.ClientRTT = time.Duration(s.clientRTT / s.rttSamples)
		a.UpstreamRTT = time.Duration(s.upRTT / s.rttSamples)
	}
	if a.Latency > 0 {
		a.NetworkShare = min(max(float64(a.NetworkWait)/float64(a.Latency), 0), 1)
	}
	return a
}

// percentile returns the q-quantile of the histogram of n values.
func percentile(h *[histBins]uint32, n int64, q float64) float64 {
	rank := int64(math.Ceil(q * float64(n)))
	var seen int64
	for b, c := range h {
		seen += int64(c)
		if seen >= rank {
			return binValue(b)
		}
	}
	return 0
}
