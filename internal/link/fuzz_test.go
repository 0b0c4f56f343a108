package link

import (
	"fmt"
	"testing"
	"time"
)

// FuzzSched drives the scheduler with arbitrary sequences of sends,
// cancellations, configuration changes and runs at arbitrary (often late)
// times, and checks its invariants after every step.
func FuzzSched(f *testing.F) {
	f.Add([]byte{0, 1, 200, 0, 0, 2, 200, 2, 3, 0, 50, 0, 1, 3, 0, 1, 2, 1, 9, 9})
	f.Add([]byte{4, 1, 0, 0, 0, 0, 255, 2, 0, 1, 255, 2, 0, 2, 255, 0, 3, 0, 10, 0, 2, 5, 0, 0})
	f.Add([]byte{4, 3, 0, 0, 0, 0, 40, 2, 0, 3, 40, 1, 0, 4, 40, 0, 2, 0, 0, 0, 3, 0, 1, 0})
	f.Fuzz(fuzzSchedBody)
}

// fuzzSchedBody runs one input of FuzzSched: four bytes per step.
func fuzzSchedBody(t *testing.T, data []byte) {
	cfgs := []Config{
		{Capacity: 1_000_000, QueueSize: 4000, NetworkControl: true, LowPriorityQueueBytes: 1500, Weights: map[string]int{"a": 3}},
		{Capacity: 1_000_000, QueueSize: 4000},
		{NetworkControl: true, LowPriorityBandwidth: 2_000_000},
		{Capacity: 3_000_000, QueueSize: 2500, NetworkControl: true, LowPriorityBandwidth: 1_000_000, LowPriorityQueueBytes: NoLowQueueBound},
		{Capacity: 500_000, QueueSize: 1, NetworkControl: true, Weights: map[string]int{"b": 2, "c": 5}},
	}
	s := newSched(cfgs[0], t0)
	var flows [8]*Flow
	for i := range flows {
		flows[i] = &Flow{pool: s.pool([]string{"a", "b", "c"}[i%3])}
	}
	now := t0
	var last time.Time    // latest admission time
	var lastDep time.Time // latest departure from the FIFO
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("at %v: %s", now.Sub(t0), fmt.Sprintf(format, args...))
	}
	s.onAdmit = func(f *Flow) {
		at := s.floor
		if at.Before(last) || at.After(now) || at.Before(f.start) {
			fail("admitted at %v (last %v, sent %v)", at.Sub(t0), last.Sub(t0), f.start.Sub(t0))
		}
		last = at
		c := &s.cfg
		if c.Capacity > 0 {
			// The FIFO departs in admission order. (Across a drop to
			// Capacity 0, Flow.after keeps each flow in order.)
			if f.depart.Before(lastDep) {
				fail("departs at %v after %v", f.depart.Sub(t0), lastDep.Sub(t0))
			}
			lastDep = f.depart
		}
		if c.Capacity > 0 && s.fifo.total > c.QueueSize && s.fifo.count > 1 {
			fail("fifo holds %d bytes in %d segments, size %d", s.fifo.total, s.fifo.count, c.QueueSize)
		}
		if c.NetworkControl {
			if f.class == Low && (s.rings[High].waiting > 0 || s.rings[Normal].waiting > 0) {
				fail("low admitted while higher classes wait")
			}
			if f.class == Normal && s.rings[High].waiting > 0 {
				fail("normal admitted while high waits")
			}
			if f.class == Low && c.Capacity > 0 && c.LowPriorityQueueBytes >= 0 && s.fifo.occ[Low] > c.LowPriorityQueueBytes {
				lows := 0
				for i := range s.fifo.count {
					if s.fifo.segs[(s.fifo.head+i)%len(s.fifo.segs)].class == Low {
						lows++
					}
				}
				if lows > 1 {
					fail("%d low bytes in the fifo, bound %d", s.fifo.occ[Low], c.LowPriorityQueueBytes)
				}
			}
		}
	}
	for len(data) >= 4 {
		op, a, b, c := data[0]%5, data[1], data[2], data[3]
		data = data[4:]
		switch op {
		case 0, 1: // send
			f := flows[int(a)%len(flows)]
			if f.state != stQueued {
				s.arrive(now, f, 1+int64(b)*int64(1+c%16), Class(c%NumClasses))
			}
		case 2: // advance the clock
			now = now.Add(time.Duration(a)*time.Millisecond + time.Duration(b)*10*time.Microsecond)
		case 3: // cancel
			if f := flows[int(a)%len(flows)]; f.state == stQueued {
				s.remove(f)
			}
		case 4: // configure
			s.configure(now, cfgs[int(a)%len(cfgs)].normalized())
		}
		next := s.dispatch(now)
		if (s.arrival.head == nil) != next.IsZero() {
			fail("next %v with waiting flows %v", next, s.arrival.head != nil)
		}
		if !next.IsZero() && !next.After(now) {
			fail("next %v is not after now", next.Sub(t0))
		}
		var waiting [NumClasses]int64
		for f := s.arrival.head; f != nil; f = f.arrNext {
			waiting[f.class] += f.n
		}
		for c := range waiting {
			var got int64
			for _, p := range s.pools {
				got += p.q[c].waiting
			}
			if got != waiting[c] {
				fail("class %v: pools count %d waiting bytes, flows %d", Class(c), got, waiting[c])
			}
		}
	}
}
