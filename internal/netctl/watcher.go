package netctl

import (
	"context"
	"log/slog"
	"maps"
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
// sends on, runs a Controller per direction with a bottleneck in
// between, and holds the direction's Low class to the rate it finds
// (link.Link.SetLowRate). It is safe for concurrent use.
type Watcher struct {
	o   WatcherOptions
	log *slog.Logger

	mu sync.Mutex
	// Guarded by mu.
	dirs map[dirKey]*watched
	seq  uint64         // socket keys
	ests []LinkEstimate // the last step's, sorted
}

type dirKey struct {
	l   *link.Link
	dir link.Direction
}

// watched is one link direction: its sockets and its controller.
type watched struct {
	socks map[uint64]socket
	ctl   *Controller
	last  Estimate
	// low is the Low class's bytes through the direction at the last
	// step: with no bottleneck found and no Low byte since, there is
	// nothing to hold and the sockets are not read.
	low int64
}

// socket is a watched connection.
type socket struct {
	ctl   rawconn.Controller
	class func() link.Class
}

// LinkEstimate is a Watcher's estimate for one link direction.
type LinkEstimate struct {
	Link      string
	Direction link.Direction
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
	return &Watcher{o: o, log: log, dirs: map[dirKey]*watched{}}
}

// Attach watches rc, a socket l's direction dir sends on, until the
// returned function is called (safe to call more than once); class
// tells the class its bytes go at now, and must be safe to call from
// the Watcher's goroutine. A nil rc is not watched; a socket is
// sampled only when it is TCP.
func (w *Watcher) Attach(l *link.Link, dir link.Direction, rc rawconn.Controller, class func() link.Class) (detach func()) {
	if rc == nil || l == nil {
		return func() {}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	k := dirKey{l, dir}
	d := w.dirs[k]
	if d == nil {
		d = &watched{socks: map[uint64]socket{}, ctl: NewController(Options{Target: w.o.Target})}
		w.dirs[k] = d
	}
	w.seq++
	id := w.seq
	d.socks[id] = socket{rc, class}
	var once sync.Once
	return func() {
		once.Do(func() {
			w.mu.Lock()
			delete(d.socks, id)
			w.mu.Unlock()
		})
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
		socks map[uint64]socket
	}
	w.mu.Lock()
	jobs := make([]job, 0, len(w.dirs))
	for k, d := range w.dirs {
		if len(d.socks) == 0 && d.last.State == Unknown {
			delete(w.dirs, k)
			continue
		}
		jobs = append(jobs, job{k, d, maps.Clone(d.socks)})
	}
	w.mu.Unlock()

	var ests []LinkEstimate
	samples := make([]Sample, 0, 16)
	for _, j := range jobs {
		cfg := j.k.l.Config()
		// A link with a capacity is sluice's own model of the
		// bottleneck, scheduled by the link itself.
		if !cfg.NetworkControl || cfg.Capacity > 0 {
			if j.d.last.LowRate != 0 {
				j.k.l.SetLowRate(j.k.dir, 0)
			}
			j.d.last = Estimate{}
			continue
		}
		low := j.k.l.Stats().Directions[j.k.dir].Classes[link.Low].Bytes
		idle := low == j.d.low
		j.d.low = low
		if idle && j.d.last.State == Unknown {
			ests = append(ests, LinkEstimate{Link: j.k.l.Name(), Direction: j.k.dir, Estimate: j.d.last})
			continue
		}
		samples = samples[:0]
		for id, so := range j.socks {
			if s, ok := sample(so.ctl); ok {
				s.Key, s.Low = id, so.class() == link.Low
				samples = append(samples, s)
			}
		}
		est := j.d.ctl.Step(now, samples)
		if est.LowRate != j.d.last.LowRate {
			j.k.l.SetLowRate(j.k.dir, est.LowRate)
		}
		if est.State != j.d.last.State {
			if est.State == Found {
				w.log.Info("network controller found a bottleneck", "link", j.k.l.Name(), "direction", j.k.dir.String(),
					"bottleneck_bytes_per_second", est.Bottleneck, "queue_delay", est.QueueDelay, "base_rtt", est.BaseRTT)
			} else {
				w.log.Info("network controller lost the bottleneck", "link", j.k.l.Name(), "direction", j.k.dir.String())
			}
		}
		j.d.last = est
		ests = append(ests, LinkEstimate{Link: j.k.l.Name(), Direction: j.k.dir, Estimate: est})
	}
	slices.SortFunc(ests, func(a, b LinkEstimate) int {
		if a.Link != b.Link {
			return strings.Compare(a.Link, b.Link)
		}
		return int(a.Direction) - int(b.Direction)
	})
	w.mu.Lock()
	w.ests = ests
	w.mu.Unlock()
}

// release lifts every hold the Watcher set.
func (w *Watcher) release() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for k, d := range w.dirs {
		if d.last.LowRate != 0 {
			k.l.SetLowRate(k.dir, 0)
		}
	}
	w.dirs = map[dirKey]*watched{}
	w.ests = nil
}

// sample reads TCP_INFO of rc; false when it is not a TCP socket, or
// is gone.
func sample(rc rawconn.Controller) (Sample, bool) {
	var info unix.TCPInfo
	var err error
	if cerr := rc.Control(func(fd uintptr) { err = rawconn.TCPInfo(fd, &info) }); cerr != nil || err != nil {
		return Sample{}, false
	}
	return Sample{
		RTT:         time.Duration(info.Rtt) * time.Microsecond,
		MinRTT:      time.Duration(info.Min_rtt) * time.Microsecond,
		Acked:       info.Bytes_acked,
		InFlight:    info.Unacked > 0,
		RwndLimited: time.Duration(info.Rwnd_limited) * time.Microsecond,
	}, true
}
