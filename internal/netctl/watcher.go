package netctl

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/link"
	"github.com/sluicelab/sluice/internal/rawconn"
)

// DefaultInterval is the time between a Watcher's samples.
const DefaultInterval = 10 * time.Millisecond

// WatcherOptions configure a Watcher.
type WatcherOptions struct {
	Clock    clock.Clock  // nil means clock.Real
	Logger   *slog.Logger // nil means no logs
	Interval time.Duration
	// Target is the queueing delay the Low class may cause; 0 means
	// DefaultTarget.
	Target time.Duration
}

// Watcher reads the kernel's state of the sockets each link direction
// receives and sends on, runs a Controller per side of each direction
// (Side), and holds the direction's Low class to the lower of the rates
// they find (link.Link.SetLowRate). It is safe for concurrent use.
type Watcher struct {
	o   WatcherOptions
	log *slog.Logger

	noProbe sync.Once // the warning that no probe could be opened

	mu sync.Mutex
	// Guarded by mu.
	dirs   map[dirKey]*watched
	probes map[probeKey]*probe
	seq    uint64         // socket keys
	ests   []LinkEstimate // the last step's, sorted
}

type dirKey struct {
	l   *link.Link
	dir link.Direction
}

// watched is one link direction. Its socket maps are guarded by
// Watcher.mu; the rest is the sampling goroutine's alone.
type watched struct {
	sides [2]watchedSide // by Side
	// low is the Low class's bytes through the direction at the last
	// step: with no bottleneck found and no Low byte since, there is
	// nothing to hold and the sockets are not read.
	low int64
	// rate is the Low rate set on the link, 0 none; path the path's
	// rate given with it (link.Link.SetLowRate).
	rate, path int64
}

// watchedSide is one side of a direction: its sockets and controller.
type watchedSide struct {
	socks map[uint64]*socket
	ctl   *Controller
	last  Estimate
}

// socket is a watched connection.
type socket struct {
	ctl   rawconn.Controller
	class func() link.Class
	// On the receive side: the probe of the socket's peer, opened when
	// Low bytes first arrive on it (nil: none yet, or none to be had),
	// and whether the socket is detached, both guarded by Watcher.mu;
	// and, the sampling goroutine's alone, whether a probe was looked
	// for, the bytes received at the last sample and the receive window
	// clamp set (bytes; 0 never set).
	probe  *probe
	gone   bool
	probed bool
	recvd  uint64
	clamp  int
}

// Side is where on a link direction's path, seen from sluice, a
// bottleneck sits.
type Side uint8

const (
	// Send is the path beyond sluice, toward the peer it writes the
	// direction's bytes to: the round trips of its own sends show the
	// queue there (tcpi_rtt over tcpi_min_rtt), and the link's pacing
	// of the Low class holds it.
	Send Side = iota
	// Receive is the path before sluice, from the peer it reads the
	// direction's bytes from: the round trips of ICMP echo requests to
	// that peer show the queue there (a probe), while Low-class bytes
	// arrive; reading the Low class more slowly, and clamping the window
	// its sockets advertise, shrink what its senders keep in flight (as
	// rLEDBAT does), so the link's pacing holds this side too.
	Receive
)

func (s Side) String() string {
	if s == Receive {
		return "receive"
	}
	return "send"
}

// LinkEstimate is a Watcher's estimate for one side of a link
// direction.
type LinkEstimate struct {
	Link      string
	Direction link.Direction
	Side      Side
	Estimate
}

// NewWatcher returns a Watcher; Run makes it work.
func NewWatcher(o WatcherOptions) *Watcher {
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Interval <= 0 {
		o.Interval = DefaultInterval
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Watcher{o: o, log: log, dirs: map[dirKey]*watched{}, probes: map[probeKey]*probe{}}
}

// Attach watches recv and send, the sockets a flow of l's direction
// dir reads its bytes from and writes them to, until the returned
// function is called (safe to call more than once); class tells the
// class the flow's bytes go at now, and must be safe to call from the
// Watcher's goroutine. A nil socket is not watched; a socket is sampled
// only when it is TCP.
func (w *Watcher) Attach(l *link.Link, dir link.Direction, recv, send rawconn.Controller, class func() link.Class) (detach func()) {
	if l == nil || recv == nil && send == nil {
		return func() {}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	k := dirKey{l, dir}
	d := w.dirs[k]
	if d == nil {
		d = &watched{}
		for i := range d.sides {
			d.sides[i] = watchedSide{socks: map[uint64]*socket{}, ctl: NewController(Options{Target: w.o.Target})}
		}
		w.dirs[k] = d
	}
	w.seq++
	id := w.seq
	var rs *socket
	if recv != nil {
		rs = &socket{ctl: recv, class: class}
		d.sides[Receive].socks[id] = rs
	}
	if send != nil {
		d.sides[Send].socks[id] = &socket{ctl: send, class: class}
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			w.mu.Lock()
			defer w.mu.Unlock()
			for i := range d.sides {
				delete(d.sides[i].socks, id)
			}
			if rs != nil {
				rs.gone = true
				w.releaseProbeLocked(rs.probe)
				rs.probe = nil
			}
		})
	}
}

// probeOf returns the probe of so's peer, looking for it the first
// time: opening it or taking another reference to it. nil when it
// cannot be had (the peer is not IPv4, or no ICMP socket may be opened),
// and the receive side then shows no queue. Only the sampling goroutine
// calls it, without w.mu.
func (w *Watcher) probeOf(so *socket) *probe {
	if !so.probed {
		so.probed = true
		p := w.probe(so.ctl)
		w.mu.Lock()
		if so.gone {
			w.releaseProbeLocked(p)
		} else {
			so.probe = p
		}
		w.mu.Unlock()
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return so.probe
}

// probe returns the probe of rc's peer, opening it or taking another
// reference; nil when it cannot be had.
func (w *Watcher) probe(rc rawconn.Controller) *probe {
	k, nsfd, err := probeTarget(rc)
	if err != nil {
		return nil
	}
	defer unix.Close(nsfd)
	w.mu.Lock()
	if p := w.probes[k]; p != nil {
		p.refs++
		w.mu.Unlock()
		return p
	}
	w.mu.Unlock()
	p, err := openProbe(w.o.Clock, k, nsfd)
	if err != nil {
		w.noProbe.Do(func() {
			w.log.Warn("network controller: no probe of the path where sluice receives; a bottleneck there is not controlled", "err", err)
		})
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if q := w.probes[k]; q != nil {
		p.close()
		p = q
	} else {
		w.probes[k] = p
	}
	p.refs++
	return p
}

// releaseProbeLocked drops a reference to p, closing it with the last.
func (w *Watcher) releaseProbeLocked(p *probe) {
	if p == nil {
		return
	}
	if p.refs--; p.refs == 0 {
		delete(w.probes, p.key)
		p.close()
	}
}

// Estimates returns the estimate of every watched direction of a link
// with network control, by link name and direction.
func (w *Watcher) Estimates() []LinkEstimate {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.ests)
}

// Run samples every Interval until ctx ends.
func (w *Watcher) Run(ctx context.Context) error {
	t := w.o.Clock.NewTimer(w.o.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			w.release()
			return context.Cause(ctx)
		case <-t.C():
		}
		w.step(w.o.Clock.Now())
		t.Reset(w.o.Interval)
	}
}

// step samples every direction once and applies the controllers' rates.
func (w *Watcher) step(now time.Time) {
	type job struct {
		k     dirKey
		d     *watched
		socks [2][]*socket // by Side, ordered by key
		keys  [2][]uint64
	}
	w.mu.Lock()
	jobs := make([]job, 0, len(w.dirs))
	for k, d := range w.dirs {
		if d.idleLocked() {
			delete(w.dirs, k)
			continue
		}
		j := job{k: k, d: d}
		for i := range d.sides {
			for id, so := range d.sides[i].socks {
				j.keys[i] = append(j.keys[i], id)
				j.socks[i] = append(j.socks[i], so)
			}
		}
		jobs = append(jobs, j)
	}
	w.mu.Unlock()

	var ests []LinkEstimate
	samples := make([]Sample, 0, 16)
	for _, j := range jobs {
		d, l, dir := j.d, j.k.l, j.k.dir
		cfg := l.Config()
		// A link with a capacity is sluice's own model of the
		// bottleneck, scheduled by the link itself.
		if !cfg.NetworkControl || cfg.Capacity > 0 {
			if d.rate != 0 {
				l.SetLowRate(dir, 0, 0)
				d.rate, d.path = 0, 0
			}
			d.sides[Send].last, d.sides[Receive].last = Estimate{}, Estimate{}
			continue
		}
		low := l.ClassBytes(dir, link.Low)
		idle := low == d.low
		d.low = low
		rate, path := int64(0), int64(0)
		for i := range d.sides {
			ws := &d.sides[i]
			side := Side(i)
			if idle && ws.last.State == Unknown {
				ests = append(ests, LinkEstimate{Link: l.Name(), Direction: dir, Side: side, Estimate: ws.last})
				continue
			}
			samples = samples[:0]
			var probes []*probe // of the receive side's peers with Low bytes arriving
			for n, so := range j.socks[i] {
				s, ok := so.sample(side)
				if !ok {
					continue
				}
				s.Key, s.Low = j.keys[i][n], so.class() == link.Low
				if side == Receive && s.Low && s.InFlight {
					if p := w.probeOf(so); p != nil && !slices.Contains(probes, p) {
						probes = append(probes, p)
					}
				}
				s.InFlight = s.InFlight && side == Send
				samples = append(samples, s)
			}
			for _, p := range probes {
				p.send(now)
				if rtt, low, ok := p.sample(now); ok {
					samples = append(samples, Sample{RTT: rtt, MinRTT: low, Key: p.sampleKey(), InFlight: true, Low: true})
				}
			}
			est := ws.ctl.Step(now, samples)
			if est.State != ws.last.State {
				if est.State == Found {
					w.log.Info("network controller found a bottleneck", "link", l.Name(), "direction", dir.String(), "side", side.String(),
						"bottleneck_bytes_per_second", est.Bottleneck, "queue_delay", est.QueueDelay, "base_rtt", est.BaseRTT)
				} else {
					w.log.Info("network controller lost the bottleneck", "link", l.Name(), "direction", dir.String(), "side", side.String())
				}
			}
			ws.last = est
			if side == Receive {
				clampWindows(j.socks[i], est)
			}
			if est.LowRate > 0 && (rate == 0 || est.LowRate < rate) {
				rate = est.LowRate
			}
			if est.LowRate > 0 && est.Bottleneck > 0 && (path == 0 || est.Bottleneck < path) {
				path = est.Bottleneck
			}
			ests = append(ests, LinkEstimate{Link: l.Name(), Direction: dir, Side: side, Estimate: est})
		}
		if rate != d.rate || path != d.path {
			l.SetLowRate(dir, rate, path)
			d.rate, d.path = rate, path
		}
	}
	slices.SortFunc(ests, func(a, b LinkEstimate) int {
		if a.Link != b.Link {
			return strings.Compare(a.Link, b.Link)
		}
		if a.Direction != b.Direction {
			return int(a.Direction) - int(b.Direction)
		}
		return int(a.Side) - int(b.Side)
	})
	w.mu.Lock()
	w.ests = ests
	w.mu.Unlock()
}

// idleLocked reports that d has no sockets and holds nothing: it can
// go.
func (d *watched) idleLocked() bool {
	for i := range d.sides {
		if len(d.sides[i].socks) > 0 {
			return false
		}
	}
	return d.rate == 0
}

// release lifts every hold the Watcher set.
func (w *Watcher) release() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for k, d := range w.dirs {
		if d.rate != 0 {
			k.l.SetLowRate(k.dir, 0, 0)
		}
	}
	for _, p := range w.probes {
		p.close()
	}
	w.dirs, w.probes = map[dirKey]*watched{}, map[probeKey]*probe{}
	w.ests = nil
}

// Receive windows: while the receive side holds the Low class, each of
// its Low sockets may have at most its share of the Low rate over a round
// trip and twice the target in flight (TCP_WINDOW_CLAMP, as rLEDBAT
// sets its window), between minClamp and maxClamp: so its sender cannot
// fill the queue from a receive buffer the link's pacing has not yet
// filled. A socket once clamped gets maxClamp back when the hold ends.
const (
	minClamp = 16 << 10
	maxClamp = 16 << 20
)

// clampWindows sets the receive window clamps of socks for est.
func clampWindows(socks []*socket, est Estimate) {
	var low []*socket
	for _, so := range socks {
		if so.class() == link.Low {
			low = append(low, so)
		} else if so.clamp != 0 && so.clamp != maxClamp {
			so.setClamp(maxClamp)
		}
	}
	want := maxClamp
	if est.State == Found && len(low) > 0 {
		span := est.BaseRTT + 2*DefaultTarget
		want = int(min(max(float64(est.LowRate)/float64(len(low))*span.Seconds(), minClamp), maxClamp))
	}
	for _, so := range low {
		if so.clamp == 0 && want == maxClamp {
			continue
		}
		if d := so.clamp - want; d > want/8 || -d > want/8 {
			so.setClamp(want)
		}
	}
}

// setClamp sets the socket's receive window clamp to n bytes.
func (so *socket) setClamp(n int) {
	var err error
	if cerr := so.ctl.Control(func(fd uintptr) {
		err = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_WINDOW_CLAMP, n)
	}); cerr == nil && err == nil {
		so.clamp = n
	}
}

// minUnacked is the least segments a sending socket must have in
// flight for its round trip to count: fewer are a flow too small to
// keep a queue, whose round trips its peer's delayed acknowledgements
// stretch.
const minUnacked = 4

// minDelivered is the least bytes a socket must have delivered for its
// round trips to count: a young flow's say more about its start (a
// server's first answer, a window still opening) than about the path.
const minDelivered = 256 << 10

// sample reads TCP_INFO of the socket as side sees it (receiving, with
// no round trip: see probe); false when it
// is not a TCP socket, or is gone. Only the sampling goroutine calls it.
func (so *socket) sample(side Side) (Sample, bool) {
	var info unix.TCPInfo
	var err error
	if cerr := so.ctl.Control(func(fd uintptr) { err = rawconn.TCPInfo(fd, &info) }); cerr != nil || err != nil {
		return Sample{}, false
	}
	if side == Send {
		return Sample{
			RTT:         time.Duration(info.Rtt) * time.Microsecond,
			MinRTT:      time.Duration(info.Min_rtt) * time.Microsecond,
			Acked:       info.Bytes_acked,
			InFlight:    info.Unacked >= minUnacked && info.Bytes_acked >= minDelivered,
			RwndLimited: time.Duration(info.Rwnd_limited) * time.Microsecond,
		}, true
	}
	// Receiving, the socket tells the bytes delivered, and whether they
	// arrive now (InFlight): its peer's probe tells the round trips.
	arriving := info.Bytes_received > so.recvd
	so.recvd = info.Bytes_received
	return Sample{Acked: info.Bytes_received, InFlight: arriving && info.Bytes_received >= minDelivered}, true
}
