package link

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

var t0 = time.Unix(1_700_000_000, 0)

const (
	us  = time.Microsecond
	ms  = time.Millisecond
	kib = 1 << 10
	mib = 1 << 20
)

// newTestSched returns a scheduler for tests and a log of its admissions.
func newTestSched(cfg Config) (*sched, *[]*Flow) {
	s := newSched(cfg, t0)
	log := new([]*Flow)
	s.onAdmit = func(f *Flow) { *log = append(*log, f) }
	return s, log
}

// adm is an expected admission: a flow and the offset of its departure.
type adm struct {
	flow   string
	depart time.Duration
}

// op is one step of a scheduler table: at offset at, do one thing
// (send, cancel or configure), run dispatch, and expect the admissions
// it made, in order, and the time it asks to run again (-1: none).
type op struct {
	at     time.Duration
	send   string // flow to send on
	n      int64
	class  Class
	cancel string // flow whose request is withdrawn
	cfg    *Config
	want   []adm
	next   time.Duration
}

func runOps(t *testing.T, cfg Config, pools map[string]string, ops []op) {
	t.Helper()
	s, log := newTestSched(cfg)
	flows := map[string]*Flow{}
	flow := func(name string) *Flow {
		if f, ok := flows[name]; ok {
			return f
		}
		pool := pools[name]
		f := &Flow{pool: s.pool(pool)}
		flows[name] = f
		return f
	}
	names := map[*Flow]string{}
	for i, o := range ops {
		now := t0.Add(o.at)
		*log = (*log)[:0]
		switch {
		case o.send != "":
			f := flow(o.send)
			names[f] = o.send
			if f.state == stQueued {
				t.Fatalf("step %d: %s already waiting", i, o.send)
			}
			s.arrive(now, f, o.n, o.class)
		case o.cancel != "":
			s.remove(flow(o.cancel))
		case o.cfg != nil:
			s.configure(now, o.cfg.normalized())
		}
		next := s.dispatch(now)
		var got []adm
		for _, f := range *log {
			got = append(got, adm{names[f], f.depart.Sub(t0)})
		}
		if !slices.Equal(got, o.want) {
			t.Fatalf("step %d at %v: admitted %v, want %v", i, o.at, got, o.want)
		}
		wantNext := time.Time{}
		if o.next >= 0 {
			wantNext = t0.Add(o.next)
		}
		if !next.Equal(wantNext) {
			gotNext := time.Duration(-1)
			if !next.IsZero() {
				gotNext = next.Sub(t0)
			}
			t.Fatalf("step %d at %v: next %v, want %v", i, o.at, gotNext, o.next)
		}
	}
}

func TestSchedSteps(t *testing.T) {
	// 1e6 bytes/s: one byte per microsecond.
	base := Config{Capacity: 1_000_000, QueueSize: 1500, NetworkControl: true, LowPriorityQueueBytes: NoLowQueueBound}
	with := func(f func(c *Config)) Config {
		c := base
		f(&c)
		return c
	}
	// fourClasses sends L1 and L2 (Low), N1 (Normal) and H1 (High), 1000
	// bytes each, within 400 µs before more: L1 goes in at once, the
	// others wait.
	fourClasses := func(more ...op) []op {
		return append([]op{
			{at: 0, send: "L1", n: 1000, class: Low, want: []adm{{"L1", 1 * ms}}, next: -1},
			{at: 0, send: "L2", n: 1000, class: Low, next: 1 * ms},
			{at: 200 * us, send: "N1", n: 1000, class: Normal, next: 1 * ms},
			{at: 400 * us, send: "H1", n: 1000, class: High, next: 1 * ms},
		}, more...)
	}
	// lowBound bounds the Low bytes in the queue at 2000; lowFull fills
	// that bound before more: L1 and L2 go in at once, L3 waits.
	lowBound := with(func(c *Config) { c.QueueSize = 100_000; c.LowPriorityQueueBytes = 2000 })
	lowFull := func(more ...op) []op {
		return append([]op{
			{at: 0, send: "L1", n: 1000, class: Low, want: []adm{{"L1", 1 * ms}}, next: -1},
			{at: 0, send: "L2", n: 1000, class: Low, want: []adm{{"L2", 2 * ms}}, next: -1},
			{at: 0, send: "L3", n: 1000, class: Low, next: 1 * ms},
		}, more...)
	}
	tests := []struct {
		name  string
		cfg   Config
		pools map[string]string
		ops   []op
	}{
		{
			name: "strict priority",
			cfg:  base,
			ops: fourClasses(
				op{at: 1 * ms, want: []adm{{"H1", 2 * ms}}, next: 2 * ms},
				op{at: 2 * ms, want: []adm{{"N1", 3 * ms}}, next: 3 * ms},
				op{at: 3 * ms, want: []adm{{"L2", 4 * ms}}, next: -1},
			),
		},
		{
			name: "control off is one fifo",
			cfg:  with(func(c *Config) { c.NetworkControl = false }),
			ops: fourClasses(
				op{at: 1 * ms, want: []adm{{"L2", 2 * ms}}, next: 2 * ms},
				op{at: 2 * ms, want: []adm{{"N1", 3 * ms}}, next: 3 * ms},
				op{at: 3 * ms, want: []adm{{"H1", 4 * ms}}, next: -1},
			),
		},
		{
			name: "a waiting high chunk holds lower classes back",
			cfg:  base,
			ops: []op{
				{at: 0, send: "N1", n: 1000, want: []adm{{"N1", 1 * ms}}, next: -1},
				{at: 0, send: "H1", n: 1000, class: High, next: 1 * ms},
				{at: 0, send: "L1", n: 100, class: Low, next: 1 * ms}, // would fit, but H1 waits
				{at: 1 * ms, want: []adm{{"H1", 2 * ms}, {"L1", 2100 * us}}, next: -1},
			},
		},
		{
			name: "occupancy bound",
			cfg:  lowBound,
			ops: lowFull(
				// Normal waits behind at most 2000 Low bytes.
				op{at: 500 * us, send: "N1", n: 1000, want: []adm{{"N1", 3 * ms}}, next: 1 * ms},
				op{at: 1 * ms, want: []adm{{"L3", 4 * ms}}, next: -1},
			),
		},
		{
			name: "a late run admits at the time space freed",
			cfg:  with(func(c *Config) { c.QueueSize = 1000; c.LowPriorityBandwidth = 500_000 }),
			ops: []op{
				{at: 0, send: "A", n: 1000, want: []adm{{"A", 1 * ms}}, next: -1},
				{at: 0, send: "B", n: 1000, next: 1 * ms},
				{at: 0, send: "C", n: 1000, class: Low, next: 1 * ms},
				// The run meant for 1 ms comes at 3.5 ms: B went in at 1 ms and
				// C at 2 ms, so the link lost nothing.
				{at: 3500 * us, want: []adm{{"B", 2 * ms}, {"C", 3 * ms}}, next: -1},
				// Admissions are never dated before the scheduler's time.
				{at: 3500 * us, send: "A", n: 1000, want: []adm{{"A", 4500 * us}}, next: -1},
			},
		},
		{
			name: "a late run admits what was due before a later arrival",
			cfg:  lowBound,
			ops: lowFull(
				// The run meant for 1 ms has not come when N1 arrives at
				// 2.5 ms. L3 went in at 1 ms, before N1 existed; the link
				// does not idle from 2 ms to 2.5 ms, and N1 still waits
				// behind at most 2000 Low bytes.
				op{at: 2500 * us, send: "N1", n: 1000, want: []adm{{"L3", 3 * ms}, {"N1", 4 * ms}}, next: -1},
			),
		},
		{
			name: "at the same instant priority decides",
			cfg:  lowBound,
			ops: lowFull(
				op{at: 1 * ms, send: "N1", n: 1000, want: []adm{{"N1", 3 * ms}, {"L3", 4 * ms}}, next: -1},
			),
		},
		{
			name: "configure admits what was due under the old settings",
			cfg:  with(func(c *Config) { c.QueueSize = 1000 }),
			ops: []op{
				{at: 0, send: "A", n: 1000, want: []adm{{"A", 1 * ms}}, next: -1},
				{at: 0, send: "B", n: 1000, next: 1 * ms},
				// The run meant for 1 ms comes with the new capacity at
				// 1.5 ms: B went in at 1 ms at the old one.
				{at: 1500 * us, cfg: &Config{Capacity: 4_000_000, QueueSize: 1000, NetworkControl: true}, want: []adm{{"B", 2 * ms}}, next: -1},
			},
		},
		{
			name: "oversize chunk enters an empty queue",
			cfg:  base,
			ops: []op{
				{at: 0, send: "A", n: 5000, want: []adm{{"A", 5 * ms}}, next: -1},
				{at: 0, send: "B", n: 10, next: 5 * ms},
				{at: 5 * ms, want: []adm{{"B", 5*ms + 10*us}}, next: -1},
			},
		},
		{
			name: "low bandwidth in 1ms ticks",
			cfg:  Config{NetworkControl: true, LowPriorityBandwidth: 1_000_000}, // 1000 bytes per tick
			ops: []op{
				{at: 0, send: "L1", n: 600, class: Low, want: []adm{{"L1", 0}}, next: -1},
				{at: 0, send: "L2", n: 600, class: Low, want: []adm{{"L2", 0}}, next: -1},
				{at: 0, send: "L3", n: 600, class: Low, next: 1 * ms},
				{at: 0, send: "N1", n: 5000, want: []adm{{"N1", 0}}, next: 1 * ms},
				{at: 1 * ms, want: []adm{{"L3", 1 * ms}}, next: -1},
				{at: 1 * ms, send: "L1", n: 600, class: Low, want: []adm{{"L1", 1 * ms}}, next: -1},
				{at: 1 * ms, send: "L2", n: 600, class: Low, next: 2 * ms},
				{at: 2 * ms, want: []adm{{"L2", 2 * ms}}, next: -1},
			},
		},
		{
			name: "configure speeds up a waiting low flow",
			cfg:  Config{NetworkControl: true, LowPriorityBandwidth: 1000},
			ops: []op{
				{at: 0, send: "L1", n: 1000, class: Low, want: []adm{{"L1", 0}}, next: -1},
				{at: 0, send: "L2", n: 1000, class: Low, next: time.Second},
				// 500 bytes of backlog left at 1e6 bytes/s: 0.5 ms, same tick.
				{at: 500 * ms, cfg: &Config{NetworkControl: true, LowPriorityBandwidth: 1_000_000}, want: []adm{{"L2", 500 * ms}}, next: -1},
			},
		},
		{
			name: "configure changes capacity for waiting flows",
			cfg:  with(func(c *Config) { c.QueueSize = 1000 }),
			ops: []op{
				{at: 0, send: "A", n: 1000, want: []adm{{"A", 1 * ms}}, next: -1},
				{at: 0, send: "B", n: 1000, next: 1 * ms},
				{at: 500 * us, cfg: &Config{Capacity: 2_000_000, QueueSize: 1000, NetworkControl: true}, next: 1 * ms},
				{at: 1 * ms, want: []adm{{"B", 1500 * us}}, next: -1},
			},
		},
		{
			name: "switching control on reorders the waiting flows",
			cfg:  with(func(c *Config) { c.NetworkControl = false; c.QueueSize = 1000 }),
			ops: []op{
				{at: 0, send: "A", n: 1000, want: []adm{{"A", 1 * ms}}, next: -1},
				{at: 0, send: "L", n: 1000, class: Low, next: 1 * ms},
				{at: 0, send: "N", n: 1000, next: 1 * ms},
				{at: 0, cfg: &Config{Capacity: 1_000_000, QueueSize: 1000, NetworkControl: true}, next: 1 * ms},
				{at: 1 * ms, want: []adm{{"N", 2 * ms}}, next: 2 * ms},
				{at: 2 * ms, want: []adm{{"L", 3 * ms}}, next: -1},
			},
		},
		{
			name: "cancel",
			cfg:  with(func(c *Config) { c.QueueSize = 1000 }),
			ops: []op{
				{at: 0, send: "A", n: 1000, want: []adm{{"A", 1 * ms}}, next: -1},
				{at: 0, send: "B", n: 1000, next: 1 * ms},
				{at: 0, send: "C", n: 1000, next: 1 * ms},
				{at: 500 * us, cancel: "B", next: 1 * ms},
				{at: 1 * ms, want: []adm{{"C", 2 * ms}}, next: -1},
			},
		},
		{
			name: "cancelling the head of the line lets the rest in",
			cfg:  with(func(c *Config) { c.NetworkControl = false }),
			ops: []op{
				{at: 0, send: "A", n: 1000, want: []adm{{"A", 1 * ms}}, next: -1},
				{at: 0, send: "B", n: 2000, next: 1 * ms}, // waits for an empty queue
				{at: 0, send: "C", n: 100, next: 1 * ms},  // behind B
				{at: 100 * us, cancel: "B", want: []adm{{"C", 1100 * us}}, next: -1},
			},
		},
		{
			name:  "pools take turns by weight",
			cfg:   with(func(c *Config) { c.QueueSize = 1; c.Weights = map[string]int{"a": 2} }),
			pools: map[string]string{"A1": "a", "A2": "a", "B1": "b", "B2": "b"},
			ops: []op{
				// 32 KiB chunks take 32.768 ms at 1e6 bytes/s.
				{at: 0, send: "X", n: 1, want: []adm{{"X", 1 * us}}, next: -1},
				{at: 0, send: "B1", n: Quantum, next: 1 * us},
				{at: 0, send: "A1", n: Quantum, next: 1 * us},
				{at: 0, send: "A2", n: Quantum, next: 1 * us},
				{at: 0, send: "B2", n: Quantum, next: 1 * us},
				// b came first and has a turn of one chunk, then a has two.
				{at: 1 * us, want: []adm{{"B1", 1*us + 32768*us}}, next: 1*us + 32768*us},
				{at: 1*us + 32768*us, want: []adm{{"A1", 1*us + 2*32768*us}}, next: 1*us + 2*32768*us},
				{at: 1*us + 2*32768*us, want: []adm{{"A2", 1*us + 3*32768*us}}, next: 1*us + 3*32768*us},
				{at: 1*us + 3*32768*us, want: []adm{{"B2", 1*us + 4*32768*us}}, next: -1},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { runOps(t, tt.cfg, tt.pools, tt.ops) })
	}
}

// src is a traffic source for sim: one flow that sends chunks.
type src struct {
	name    string
	pool    string
	classes []Class       // class of chunk i is classes[i%len]; nil: Normal
	chunk   int64         // bytes per Send
	total   int64         // bytes to send; 0: no end
	every   time.Duration // at most one Send per every; 0: back to back
	start   time.Duration // offset of the first Send
	turn    time.Duration // from seeing an admission to the next Send (a pump's write and read)

	f       *Flow
	pending bool
	nextAt  time.Time
	readyAt time.Time // the pump is back from its previous chunk
	sent    int64     // bytes admitted
	chunks  int
	first   time.Time   // first Send
	lastDep time.Time   // departure of the last chunk
	departs []time.Time // departure of each chunk
	delays  []time.Duration
}

func (x *src) done() bool { return x.total > 0 && x.sent >= x.total }

// departedBy returns the bytes of x that departed in (from, to].
func (x *src) departedBy(from, to time.Time) int64 {
	var n int64
	for i, d := range x.departs {
		if d.After(from) && !d.After(to) {
			n += x.size(i)
		}
	}
	return n
}

func (x *src) size(i int) int64 {
	if x.total > 0 && int64(i+1)*x.chunk > x.total {
		return x.total - int64(i)*x.chunk
	}
	return x.chunk
}

// sim runs sources against a scheduler in virtual time, the way the pumps
// drive a link: a source sends its next chunk as soon as its previous one
// was admitted (or at its pace, or its turn later), and the scheduler
// runs at every arrival and whenever it asked to (late, if late is set,
// as a real timer fires).
type sim struct {
	s     *sched
	now   time.Time
	srcs  []*src
	after func(m *sim)         // called after every dispatch
	late  func() time.Duration // how late each timed run is; nil: on time
	seq   []*Flow              // Sends in arrival order
	log   *[]*Flow             // admissions in order
}

func newSim(cfg Config, srcs ...*src) *sim {
	s, log := newTestSched(cfg)
	m := &sim{s: s, now: t0, srcs: srcs, log: log}
	for _, x := range srcs {
		x.f = &Flow{pool: s.pool(x.pool)}
		x.nextAt = t0.Add(x.start)
	}
	return m
}

func (m *sim) run(d time.Duration) {
	end := t0.Add(d)
	for {
		for _, x := range m.srcs {
			if x.pending || x.done() || x.nextAt.After(m.now) || x.readyAt.After(m.now) {
				continue
			}
			c := Normal
			if len(x.classes) > 0 {
				c = x.classes[x.chunks%len(x.classes)]
			}
			n := x.chunk
			if x.total > 0 {
				n = min(n, x.total-x.sent)
			}
			if x.first.IsZero() {
				x.first = m.now
			}
			m.s.arrive(m.now, x.f, n, c)
			m.seq = append(m.seq, x.f)
			x.pending = true
			x.nextAt = m.now.Add(x.every)
		}
		next := m.s.dispatch(m.now)
		progressed := false
		for _, x := range m.srcs {
			if !x.pending || x.f.state == stQueued {
				continue
			}
			x.pending, progressed = false, true
			x.readyAt = m.now.Add(x.turn)
			x.sent += x.f.n
			x.chunks++
			x.lastDep = x.f.depart
			x.departs = append(x.departs, x.f.depart)
			x.delays = append(x.delays, x.f.depart.Sub(x.f.start))
		}
		if m.after != nil {
			m.after(m)
		}
		if progressed {
			continue
		}
		t := next
		if !t.IsZero() && m.late != nil {
			t = t.Add(m.late())
		}
		for _, x := range m.srcs {
			if x.pending || x.done() {
				continue
			}
			at := x.nextAt
			if x.readyAt.After(at) {
				at = x.readyAt
			}
			if at.After(m.now) && (t.IsZero() || at.Before(t)) {
				t = at
			}
		}
		if t.IsZero() || t.After(end) {
			m.now = end
			return
		}
		m.now = t
	}
}

func bulk(name, pool string, n int, c Class) []*src {
	var out []*src
	for i := range n {
		out = append(out, &src{name: fmt.Sprintf("%s%d", name, i), pool: pool, classes: []Class{c}, chunk: 32 * kib})
	}
	return out
}

func within(got, want, tol float64) bool { return got >= want*(1-tol) && got <= want*(1+tol) }

func TestPoolWeights(t *testing.T) {
	type poolSpec struct {
		name   string
		weight int
		flows  int
		chunk  int64
	}
	tests := []struct {
		name  string
		class Class
		pools []poolSpec
	}{
		{"3:1", Normal, []poolSpec{{"a", 3, 1, 32 * kib}, {"b", 1, 1, 32 * kib}}},
		{"3:1 several flows", Normal, []poolSpec{{"a", 3, 2, 32 * kib}, {"b", 1, 5, 32 * kib}}},
		{"3:1 low class", Low, []poolSpec{{"a", 3, 2, 32 * kib}, {"b", 1, 2, 32 * kib}}},
		{"1:2:5", High, []poolSpec{{"a", 1, 1, 32 * kib}, {"b", 2, 1, 32 * kib}, {"c", 5, 1, 32 * kib}}},
		{"equal weights, unequal chunks", Normal, []poolSpec{{"a", 1, 1, 4 * kib}, {"b", 1, 1, 256 * kib}}},
		{"1:1 unknown pools", Normal, []poolSpec{{"x", 0, 1, 32 * kib}, {"y", 0, 1, 16 * kib}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := Config{Capacity: 100_000_000, NetworkControl: true, Weights: map[string]int{}}
			var srcs []*src
			byPool := map[string][]*src{}
			var wsum float64
			for _, p := range tt.pools {
				if p.weight > 0 {
					cfg.Weights[p.name] = p.weight
				}
				wsum += float64(cfg.weight(p.name))
				for i := range p.flows {
					x := &src{name: fmt.Sprintf("%s%d", p.name, i), pool: p.name, classes: []Class{tt.class}, chunk: p.chunk}
					srcs = append(srcs, x)
					byPool[p.name] = append(byPool[p.name], x)
				}
			}
			m := newSim(cfg, srcs...)
			m.run(2 * time.Second)
			from, to := t0.Add(500*ms), t0.Add(2*time.Second)
			var total int64
			got := map[string]int64{}
			for name, xs := range byPool {
				for _, x := range xs {
					got[name] += x.departedBy(from, to)
				}
				total += got[name]
			}
			if want := int64(100_000_000 * 1.5); !within(float64(total), float64(want), 0.01) {
				t.Errorf("link carried %d bytes, want about %d", total, want)
			}
			for _, p := range tt.pools {
				share := float64(got[p.name]) / float64(total)
				want := float64(cfg.weight(p.name)) / wsum
				if !within(share, want, 0.03) {
					t.Errorf("pool %s got %.4f of the link, want %.4f", p.name, share, want)
				}
			}
		})
	}
}

// TestNoStarvation: a pool of weight 1 against one of weight 100 still
// gets its share, and never waits much more than one round.
func TestNoStarvation(t *testing.T) {
	cfg := Config{Capacity: 100_000_000, NetworkControl: true, Weights: map[string]int{"big": 100, "small": 1}}
	srcs := append(bulk("big", "big", 4, Normal), bulk("small", "small", 2, Normal)...)
	m := newSim(cfg, srcs...)
	m.run(2 * time.Second)
	var small, total int64
	var last time.Time
	var gap time.Duration
	for _, x := range srcs {
		n := x.departedBy(t0.Add(500*ms), t0.Add(2*time.Second))
		total += n
		if x.pool == "small" {
			small += n
		}
	}
	var smallDeps []time.Time
	for _, x := range srcs[4:] {
		smallDeps = append(smallDeps, x.departs...)
	}
	slices.SortFunc(smallDeps, time.Time.Compare)
	for _, d := range smallDeps {
		if !last.IsZero() {
			gap = max(gap, d.Sub(last))
		}
		last = d
	}
	if share, want := float64(small)/float64(total), 1.0/101; !within(share, want, 0.1) {
		t.Errorf("small pool got %.5f of the link, want %.5f", share, want)
	}
	// One round: 101 quanta at 100 MB/s is 33 ms.
	if round := time.Duration(101 * Quantum * int64(time.Second) / 100_000_000); gap > 2*round {
		t.Errorf("small pool waited %v between chunks, a round is %v", gap, round)
	}
}

// TestLowBandwidth: the Low class as a whole is held to
// LowPriorityBandwidth within the leaky bucket's 1 ms ticks, and gets it.
func TestLowBandwidth(t *testing.T) {
	const rate = 256_000_000
	tests := []struct {
		name     string
		capacity int64
	}{
		{"unlimited link", 0},
		{"1 GB/s link", 1_000_000_000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := Config{Capacity: tt.capacity, NetworkControl: true, LowPriorityBandwidth: rate, LowPriorityQueueBytes: NoLowQueueBound}
			srcs := append(bulk("low", "etl", 3, Low), bulk("lowb", "other", 2, Low)...)
			m := newSim(cfg, srcs...)
			var admitted int64
			perTick := map[int64]int64{}
			chunk := int64(32 * kib)
			var fail string
			m.after = func(m *sim) {
				for _, f := range *m.log {
					admitted += f.n
					perTick[int64(m.now.Sub(t0)/ms)] += f.n
				}
				*m.log = (*m.log)[:0]
				T := m.now.Sub(t0)
				if bound := rate*int64(T+ms)/int64(time.Second) + chunk; admitted > bound && fail == "" {
					fail = fmt.Sprintf("%d bytes admitted by %v, bound %d", admitted, T, bound)
				}
			}
			m.run(time.Second)
			if fail != "" {
				t.Fatal(fail)
			}
			for tick, n := range perTick {
				if n > rate/1000+chunk {
					t.Errorf("tick %d admitted %d bytes, bound %d", tick, n, rate/1000+chunk)
				}
			}
			if want := int64(rate - rate/1000 - chunk); admitted < want {
				t.Errorf("admitted %d bytes in 1 s, want at least %d", admitted, want)
			}
		})
	}
}

// lateTimer returns a deterministic sequence of timer latenesses, uniform
// in [0, most): Go's timers on an idle Linux host fire up to about 1 ms
// late.
func lateTimer(seed uint64, most time.Duration) func() time.Duration {
	r := rand.New(rand.NewPCG(seed, seed+1))
	return func() time.Duration { return time.Duration(r.Int64N(int64(most))) }
}

// TestLowBandwidthLateRuns: the Low class gets LowPriorityBandwidth when
// the scheduler's timer fires up to 1 ms late and each pump takes a while
// to come back with its next chunk, with one flow as with many: a lone
// flow comes back after the bucket emptied, and is late, not idle.
func TestLowBandwidthLateRuns(t *testing.T) {
	tests := []struct {
		name     string
		flows    int
		rate     int64
		capacity int64
		turn     time.Duration
	}{
		{"1 flow, 20 MB/s", 1, 20_000_000, 100_000_000, 50 * us},
		{"10 flows, 20 MB/s", 10, 20_000_000, 100_000_000, 50 * us},
		{"1 flow, 20 MB/s, slow pump", 1, 20_000_000, 100_000_000, 1200 * us},
		{"1 flow, 256 MB/s", 1, 256_000_000, 1_000_000_000, 20 * us},
		{"4 flows, 256 MB/s", 4, 256_000_000, 1_000_000_000, 20 * us},
		{"1 flow, 256 MB/s, unlimited link", 1, 256_000_000, 0, 20 * us},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := Config{Capacity: tt.capacity, NetworkControl: true, LowPriorityBandwidth: tt.rate, LowPriorityQueueBytes: NoLowQueueBound}
			srcs := bulk("low", "etl", tt.flows, Low)
			for _, x := range srcs {
				x.turn = tt.turn
			}
			m := newSim(cfg, srcs...)
			m.late = lateTimer(uint64(i), ms)
			m.run(time.Second)
			from, to := t0.Add(100*ms), t0.Add(time.Second)
			var total int64
			for _, x := range srcs {
				total += x.departedBy(from, to)
			}
			got := float64(total) / to.Sub(from).Seconds()
			t.Logf("low class %.2f MB/s", got/1e6)
			if !within(got, float64(tt.rate), 0.01) {
				t.Errorf("low class got %.2f MB/s, limit %.2f MB/s", got/1e6, float64(tt.rate)/1e6)
			}
		})
	}
}

// TestOccupancyBoundWorkConserving: with yielding off, Low bytes in the
// FIFO never exceed the bound, a Normal chunk waits behind at most that
// much Low data, and Low still fills every byte of capacity Normal leaves,
// also when the scheduler's timer fires up to 1 ms late.
func TestOccupancyBoundWorkConserving(t *testing.T) {
	for _, late := range []bool{false, true} {
		t.Run(fmt.Sprint("late=", late), func(t *testing.T) { testOccupancyBound(t, late) })
	}
}

func testOccupancyBound(t *testing.T, late bool) {
	const capacity = 100_000_000
	const bound = 64 * kib
	cfg := Config{Capacity: capacity, NetworkControl: true, LowYieldPercent: NoLowYield}
	normal := &src{name: "app", pool: "app", chunk: 32 * kib, every: ms} // ~33 MB/s offered
	srcs := append(bulk("bulk", "etl", 10, Low), normal)
	m := newSim(cfg, srcs...)
	if late {
		m.late = lateTimer(7, ms)
		for _, x := range srcs {
			x.turn = 50 * us
		}
	}
	var most int64
	m.after = func(m *sim) { most = max(most, m.s.fifo.occ[Low]) }
	m.run(time.Second)
	if most > bound {
		t.Errorf("low occupancy reached %d bytes, bound %d", most, bound)
	}
	// A Normal chunk waits for the Low bytes ahead of it and its own, and
	// sometimes for the previous Normal chunk.
	worst := time.Duration((bound + 2*32*kib) * int64(time.Second) / capacity)
	for i, d := range normal.delays {
		if d > worst {
			t.Fatalf("normal chunk %d waited %v, want at most %v", i, d, worst)
		}
	}
	if normal.sent < 999*32*kib {
		t.Errorf("normal sent %d bytes, offered %d", normal.sent, 1000*32*kib)
	}
	var total int64
	from, to := t0.Add(10*ms), t0.Add(time.Second)
	for _, x := range srcs {
		total += x.departedBy(from, to)
	}
	t.Logf("link carried %.2f%% of its capacity", 100*float64(total)/(float64(capacity)*0.99))
	if want := float64(capacity) * 0.99; float64(total) < want*0.999 {
		t.Errorf("link carried %d bytes in 990 ms, capacity allows %.0f", total, want)
	}
}

// TestLowYields: while Normal bytes are on the link and for YieldHold
// after, Low enters at LowYieldPercent of the capacity, also when the
// scheduler's timer fires up to 1 ms late; once Normal stops, Low takes
// the whole capacity again. With yielding off it takes all Normal leaves.
func TestLowYields(t *testing.T) {
	const capacity = 100_000_000
	for _, tt := range []struct {
		pct  int
		late bool
		want float64 // Low's share of capacity while Normal runs
	}{
		{pct: 0, want: DefaultLowYieldPercent / 100.0},
		{pct: 0, late: true, want: DefaultLowYieldPercent / 100.0},
		{pct: 10, want: 0.10},
		{pct: NoLowYield, want: 1 - 32.768/100}, // what ~33 MB/s of Normal leaves
	} {
		t.Run(fmt.Sprintf("pct=%d,late=%v", tt.pct, tt.late), func(t *testing.T) {
			cfg := Config{Capacity: capacity, NetworkControl: true, LowYieldPercent: tt.pct}
			// Normal sends 32 KiB per ms for 500 ms, then stops.
			normal := &src{name: "app", pool: "app", chunk: 32 * kib, every: ms, total: 500 * 32 * kib}
			srcs := append(bulk("bulk", "etl", 8, Low), normal)
			m := newSim(cfg, srcs...)
			if tt.late {
				m.late = lateTimer(7, ms)
				for _, x := range srcs {
					x.turn = 50 * us
				}
			}
			m.run(time.Second)
			low := func(from, to time.Duration) float64 {
				var n int64
				for _, x := range srcs[:8] {
					n += x.departedBy(t0.Add(from), t0.Add(to))
				}
				return float64(n) / (to - from).Seconds() / capacity
			}
			if got := low(50*ms, 450*ms); !within(got, tt.want, 0.03) {
				t.Errorf("low share while normal runs = %.3f, want %.3f", got, tt.want)
			}
			if normal.sent != 500*32*kib {
				t.Errorf("normal sent %d bytes, offered %d", normal.sent, 500*32*kib)
			}
			// Normal's last byte leaves about 500 ms in; YieldHold later Low
			// has the link to itself.
			if got := low(500*ms+YieldHold+5*ms, time.Second); got < 0.99 {
				t.Errorf("low share after normal stopped = %.3f, want the whole link", got)
			}
		})
	}
}

// TestLowYieldsToEngaged: while a statement above Low runs (Link.Engage)
// Low yields though no Normal byte is on the link, and YieldHold after it
// ended Low has the whole link again. An unpaired end changes nothing.
func TestLowYieldsToEngaged(t *testing.T) {
	const capacity = 100_000_000
	cfg := Config{Capacity: capacity, NetworkControl: true}
	srcs := bulk("bulk", "etl", 8, Low)
	m := newSim(cfg, srcs...)
	m.s.engage(t0, false) // unpaired: ignored
	began, ended := false, false
	m.after = func(m *sim) {
		switch at := m.now.Sub(t0); {
		case !began && at >= 100*ms:
			m.s.engage(m.now, true)
			began = true
		case !ended && at >= 400*ms:
			if m.s.engage(m.now, false) {
				m.s.dispatch(m.now)
			}
			ended = true
		}
	}
	m.run(time.Second)
	share := func(from, to time.Duration) float64 {
		var n int64
		for _, x := range srcs {
			n += x.departedBy(t0.Add(from), t0.Add(to))
		}
		return float64(n) / (to - from).Seconds() / capacity
	}
	for _, tt := range []struct {
		name     string
		from, to time.Duration
		want     float64
	}{
		{"before", 10 * ms, 90 * ms, 1},
		{"engaged", 150 * ms, 390 * ms, DefaultLowYieldPercent / 100.0},
		{"after the hold", 400*ms + YieldHold + 10*ms, time.Second, 1},
	} {
		if got := share(tt.from, tt.to); !within(got, tt.want, 0.03) {
			t.Errorf("%s: low share %.3f, want %.3f", tt.name, got, tt.want)
		}
	}
}

// TestWorkConservingAlone: Low alone, with the default bound, uses the
// whole capacity.
func TestWorkConservingAlone(t *testing.T) {
	cfg := Config{Capacity: 100_000_000, NetworkControl: true, LowPriorityBandwidth: 256_000_000}
	srcs := bulk("bulk", "etl", 3, Low)
	m := newSim(cfg, srcs...)
	m.run(time.Second)
	var total int64
	for _, x := range srcs {
		total += x.departedBy(t0, t0.Add(time.Second))
	}
	if total < 100_000_000-32*kib {
		t.Errorf("low alone carried %d bytes in 1 s on a 100 MB/s link", total)
	}
}

// TestControlOffArrivalOrder: with network control off every Send is
// admitted in arrival order, whatever its class or pool.
func TestControlOffArrivalOrder(t *testing.T) {
	cfg := Config{Capacity: 100_000_000, QueueSize: 256 * kib, Weights: map[string]int{"a": 50}}
	r := rand.New(rand.NewPCG(1, 2))
	var srcs []*src
	for i := range 12 {
		srcs = append(srcs, &src{
			name: fmt.Sprint(i), pool: []string{"a", "b", "c"}[i%3],
			classes: []Class{byPriority[r.IntN(3)], byPriority[r.IntN(3)]},
			chunk:   int64(1 + r.IntN(64*kib)), every: time.Duration(r.IntN(5)) * ms,
		})
	}
	m := newSim(cfg, srcs...)
	m.run(500 * ms)
	if len(*m.log) < 1000 {
		t.Fatalf("only %d admissions", len(*m.log))
	}
	for i, f := range *m.log {
		if m.seq[i] != f {
			t.Fatalf("admission %d is not the %dth Send", i, i)
		}
	}
}

// TestOrderAcrossClassChanges: a flow whose class changes from chunk to
// chunk (a statement penalized midway) still departs in order.
func TestOrderAcrossClassChanges(t *testing.T) {
	for _, control := range []bool{false, true} {
		t.Run(fmt.Sprint("control=", control), func(t *testing.T) {
			cfg := Config{Capacity: 100_000_000, NetworkControl: control, LowPriorityBandwidth: 20_000_000}
			x := &src{name: "x", pool: "app", chunk: 16 * kib, classes: []Class{Normal, Low, Low, High, Normal, Low}}
			srcs := append(bulk("bulk", "etl", 4, Low), x)
			for i := range 2 { // leave Low some capacity
				srcs = append(srcs, &src{name: fmt.Sprint("n", i), pool: "app", chunk: 32 * kib, every: ms})
			}
			m := newSim(cfg, srcs...)
			m.run(300 * ms)
			if x.chunks < 20 {
				t.Fatalf("only %d chunks sent", x.chunks)
			}
			for i := 1; i < len(x.departs); i++ {
				if x.departs[i].Before(x.departs[i-1]) {
					t.Fatalf("chunk %d departs at %v, before chunk %d at %v", i, x.departs[i].Sub(t0), i-1, x.departs[i-1].Sub(t0))
				}
			}
		})
	}
}

// TestReferenceProblem reproduces the reference warehouse's problem: bulk
// flows fill the device FIFO, and a small normal transfer crawls. With
// control off it shares the FIFO with the N bulk flows and takes about
// (N+1)x its unloaded time; with control on and the occupancy bound it
// takes about 1x. A rate limit alone above the capacity leaves the FIFO
// full of Low bytes and the wait in place.
func TestReferenceProblem(t *testing.T) {
	const capacity = 100_000_000
	const n = 8
	transfer := func(cfg Config, load bool) time.Duration {
		app := &src{name: "app", pool: "app", chunk: 32 * kib, total: 1_000_000, start: 200 * ms}
		srcs := []*src{app}
		if load {
			class := Normal
			if cfg.NetworkControl {
				class = Low // the bulk statements were penalized
			}
			srcs = append(srcs, bulk("bulk", "etl", n, class)...)
		}
		m := newSim(cfg, srcs...)
		m.run(2 * time.Second)
		if !app.done() {
			t.Fatalf("transfer incomplete: %d bytes", app.sent)
		}
		return app.lastDep.Sub(app.first)
	}
	unloaded := transfer(Config{Capacity: capacity}, false)
	tests := []struct {
		name     string
		cfg      Config
		min, max float64 // slowdown against unloaded
	}{
		{"control off", Config{Capacity: capacity}, n + 1, n + 4},
		{"control on, rate limit only", Config{Capacity: capacity, NetworkControl: true, LowPriorityBandwidth: 256_000_000, LowPriorityQueueBytes: NoLowQueueBound}, 2, 4},
		{"control on, occupancy bound", Config{Capacity: capacity, NetworkControl: true, LowPriorityBandwidth: 256_000_000}, 1, 1.1},
	}
	t.Logf("unloaded: %v", unloaded)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := transfer(tt.cfg, true)
			x := float64(got) / float64(unloaded)
			t.Logf("%v: %.2fx", got, x)
			if x < tt.min || x > tt.max {
				t.Errorf("transfer took %v, %.2fx unloaded, want %.1fx..%.1fx", got, x, tt.min, tt.max)
			}
		})
	}
}

// TestPeekMatchesTake: the candidate checked for admission is the one
// admitted, whatever the ring's state.
func TestPeekMatchesTake(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for trial := range 200 {
		cfg := Config{NetworkControl: true, Weights: map[string]int{}}
		npools := 1 + r.IntN(6)
		for i := range npools {
			cfg.Weights[fmt.Sprint(i)] = 1 + r.IntN(4)
		}
		s := newSched(cfg, t0)
		var flows []*Flow
		for range 1 + r.IntN(12) {
			flows = append(flows, &Flow{pool: s.pool(fmt.Sprint(r.IntN(npools)))})
		}
		for step := range 300 {
			f := flows[r.IntN(len(flows))]
			if f.state != stQueued && r.IntN(3) > 0 {
				s.enqueue(t0, f, int64(1+r.IntN(8*Quantum)), Normal)
			}
			rg := &s.rings[Normal]
			if rg.waiting == 0 || r.IntN(2) == 0 {
				continue
			}
			want := rg.peek()
			got := rg.take()
			if got != want {
				t.Fatalf("trial %d step %d: peek %s, take %s", trial, step, want.pool.name, got.pool.name)
			}
			g := got.head
			got.deficit -= g.n
			s.remove(g)
		}
	}
}

func TestConfigNormalized(t *testing.T) {
	w := map[string]int{"a": 0, "b": 5, "c": MaxWeight + 1}
	c := Config{Capacity: -1, QueueSize: -3, LowPriorityBandwidth: -2, LowPriorityQueueBytes: -7, Weights: w}.normalized()
	w["b"] = 9 // the link keeps its own copy
	want := Config{QueueSize: DefaultQueueSize, LowPriorityQueueBytes: NoLowQueueBound, LowYieldPercent: DefaultLowYieldPercent}
	if c.Capacity != want.Capacity || c.QueueSize != want.QueueSize || c.LowPriorityBandwidth != 0 || c.LowPriorityQueueBytes != want.LowPriorityQueueBytes || c.LowYieldPercent != want.LowYieldPercent {
		t.Errorf("normalized = %+v", c)
	}
	for pool, want := range map[string]int64{"a": 1, "b": 5, "c": MaxWeight, "zzz": DefaultWeight} {
		if got := c.weight(pool); got != want {
			t.Errorf("weight(%s) = %d, want %d", pool, got, want)
		}
	}
	if c := (Config{LowYieldPercent: 250}).normalized(); c.LowYieldPercent != NoLowYield {
		t.Errorf("LowYieldPercent 250 normalized to %d, want %d", c.LowYieldPercent, NoLowYield)
	}
	if d := (Config{}).normalized(); d.LowPriorityQueueBytes != DefaultLowPriorityQueueBytes || d.QueueSize != DefaultQueueSize {
		t.Errorf("zero normalized = %+v", d)
	}
}

func TestParseClass(t *testing.T) {
	for in, want := range map[string]Class{"high": High, "normal": Normal, "low": Low, " LOW ": Low, "Normal": Normal} {
		if got, err := ParseClass(in); err != nil || got != want {
			t.Errorf("ParseClass(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "lowest", "medium"} {
		if got, err := ParseClass(in); err == nil || got != Normal {
			t.Errorf("ParseClass(%q) = %v, %v; want Normal and an error", in, got, err)
		}
	}
	for c := range Class(NumClasses) {
		if got, err := ParseClass(c.String()); err != nil || got != c {
			t.Errorf("round trip of %v: %v, %v", c, got, err)
		}
	}
	if s := Class(9).String(); !strings.Contains(s, "9") {
		t.Errorf("Class(9) = %q", s)
	}
}

func FuzzParseClass(f *testing.F) {
	for _, s := range []string{"high", "normal", "low", "HIGH", " low\t", "", "x", "\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := ParseClass(s)
		if err != nil {
			return
		}
		if c >= NumClasses || !strings.EqualFold(strings.TrimSpace(s), c.String()) {
			t.Fatalf("ParseClass(%q) = %v", s, c)
		}
	})
}
