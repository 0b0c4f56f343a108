package netctl

import (
	"testing"
	"time"
)

// path is a fluid model of a bottleneck for the controller's tests: a
// queue that drains at capacity bytes/s, fed by flows that send as fast
// as they are let (offered bytes/s; 0 means unlimited demand, bounded by
// what the queue holds).
type path struct {
	capacity float64       // bytes/s
	base     time.Duration // round trip with an empty queue
	limit    float64       // queue bytes
	backlog  float64
	acked    [2]uint64 // per socket
}

// step moves dt: the flows offer send bytes/s, the queue drains, and
// the sockets' samples come back.
func (p *path) step(dt time.Duration, send float64) []Sample {
	in := send * dt.Seconds()
	p.backlog = min(p.backlog+in, p.limit)
	out := min(p.backlog, p.capacity*dt.Seconds())
	p.backlog -= out
	p.acked[0] += uint64(out / 2)
	p.acked[1] += uint64(out - out/2)
	rtt := p.base + time.Duration(p.backlog/p.capacity*float64(time.Second))
	return []Sample{
		{Key: 1, RTT: rtt, MinRTT: p.base, Acked: p.acked[0], InFlight: p.backlog > 0 || in > 0, Low: true},
		{Key: 2, RTT: rtt, MinRTT: p.base, Acked: p.acked[1], InFlight: p.backlog > 0 || in > 0, Low: true},
	}
}

// run drives a controller over p for d, the flows offering demand
// bytes/s or what the Low rate lets through, whichever is less, and
// returns the last estimate and the mean delivery over the last second.
func run(t *testing.T, c *Controller, p *path, demand float64, start time.Time, d time.Duration) (Estimate, float64, time.Time) {
	t.Helper()
	const dt = 10 * time.Millisecond
	now := start
	var est Estimate
	var lastSec uint64
	for el := time.Duration(0); el < d; el += dt {
		send := demand
		if est.LowRate > 0 {
			send = min(send, float64(est.LowRate))
		}
		before := p.acked[0] + p.acked[1]
		samples := p.step(dt, send)
		if el >= d-time.Second {
			lastSec += p.acked[0] + p.acked[1] - before
		}
		now = now.Add(dt)
		est = c.Step(now, samples)
	}
	return est, float64(lastSec), now
}

// TestControllerFindsBottleneck: at several rates and queue depths,
// bulk Low traffic that would fill the queue is held to a rate that
// keeps the queue near the target, and still delivers most of the
// capacity.
func TestControllerFindsBottleneck(t *testing.T) {
	for _, tt := range []struct {
		name     string
		capacity float64 // bytes/s
		queue    time.Duration
	}{
		{"50Mbit 20ms", 50e6 / 8, 20 * time.Millisecond},
		{"200Mbit 100ms", 200e6 / 8, 100 * time.Millisecond},
		{"1Gbit 300ms", 1e9 / 8, 300 * time.Millisecond},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := &path{capacity: tt.capacity, base: 100 * time.Microsecond, limit: tt.capacity * tt.queue.Seconds()}
			c := NewController(Options{})
			est, delivered, _ := run(t, c, p, 4*tt.capacity, time.Unix(0, 0), 10*time.Second) // a bulk load that would fill any queue
			if est.State != Found {
				t.Fatalf("state %v after 10 s of a full queue; estimate %+v", est.State, est)
			}
			if est.QueueDelay > 4*DefaultTarget {
				t.Errorf("standing queue %v, want at most %v", est.QueueDelay, 4*DefaultTarget)
			}
			if delivered < 0.85*tt.capacity {
				t.Errorf("delivered %.0f B/s of %.0f B/s in the last second", delivered, tt.capacity)
			}
			if est.Bottleneck < int64(0.85*tt.capacity) || est.Bottleneck > int64(1.05*tt.capacity) {
				t.Errorf("bottleneck estimate %d B/s, capacity %.0f", est.Bottleneck, tt.capacity)
			}
		})
	}
}

// TestControllerLosesBottleneck: when the path's capacity grows far
// beyond what was found, the queue never builds again and the Low class
// goes back to unlimited.
func TestControllerLosesBottleneck(t *testing.T) {
	p := &path{capacity: 50e6 / 8, base: 100 * time.Microsecond, limit: 50e6 / 8 * 0.05}
	c := NewController(Options{})
	demand := 4 * p.capacity
	est, _, now := run(t, c, p, demand, time.Unix(0, 0), 5*time.Second)
	if est.State != Found {
		t.Fatalf("no bottleneck found: %+v", est)
	}
	p.capacity, p.limit = 100e9, 100e9
	est, _, _ = run(t, c, p, demand, now, 10*time.Second)
	if est.State != Unknown || est.LowRate != 0 {
		t.Errorf("after the bottleneck went: %+v, want state none and no limit", est)
	}
}

// TestControllerCeiling: a configured capacity caps the Low class even
// with no bottleneck found.
func TestControllerCeiling(t *testing.T) {
	c := NewController(Options{Ceiling: 1e6})
	est := c.Step(time.Unix(1, 0), nil)
	est = c.Step(time.Unix(2, 0), nil)
	if est.LowRate != 1e6 {
		t.Errorf("LowRate %d, want the ceiling 1e6", est.LowRate)
	}
}

// TestControllerIdle: when the sockets go away after a bottleneck was
// found, the hold is lifted once a window has passed with nothing
// delivered, and is never "unlimited while found".
func TestControllerIdle(t *testing.T) {
	p := &path{capacity: 50e6 / 8, base: 100 * time.Microsecond, limit: 50e6 / 8 * 0.05}
	c := NewController(Options{})
	est, _, now := run(t, c, p, 4*p.capacity, time.Unix(0, 0), 5*time.Second)
	if est.State != Found {
		t.Fatalf("no bottleneck found: %+v", est)
	}
	for range 400 { // 4 s without sockets
		now = now.Add(10 * time.Millisecond)
		est = c.Step(now, nil)
		if est.State == Found && est.LowRate == 0 {
			t.Fatalf("found with no hold: %+v", est)
		}
	}
	if est.State != Unknown || est.LowRate != 0 {
		t.Errorf("after 4 s idle: %+v, want state none and no hold", est)
	}
}

// TestControllerSteps: what the controller makes of the delay alone,
// step by step: each phase delivers rate bytes/s for a while with the
// Low class's round trips excess over their lowest, and ends in want.
func TestControllerSteps(t *testing.T) {
	type phase struct {
		d      time.Duration
		rate   float64       // bytes/s delivered
		excess time.Duration // round trip over the lowest
		want   State
		// follows: the sockets deliver no more than the Low rate once
		// it is held, as paced flows do once their buffers are empty
		follows bool
	}
	const fast = 25e6
	for _, tt := range []struct {
		name   string
		phases []phase
	}{
		{"a burst shorter than confirmTime is no bottleneck", []phase{
			{time.Second, fast, 0, Unknown, false},
			{confirmTime - 10*time.Millisecond, fast, 10 * time.Millisecond, Unknown, false},
			{time.Second, fast, 0, Unknown, false},
		}},
		{"a queue that stands while the path is busy is found", []phase{
			{time.Second, fast, 0, Unknown, false},
			{confirmTime + 20*time.Millisecond, fast, 10 * time.Millisecond, Found, false},
		}},
		{"round trips stretched while the path idles are the ends' pauses", []phase{
			{time.Second, fast, 0, Unknown, false},
			{time.Second, fast / 10, 10 * time.Millisecond, Unknown, false},
		}},
		{"a queue that stays however far the Low class is held is let go, and not found again for quietTime", []phase{
			{time.Second, fast, 0, Unknown, false},
			{100 * time.Millisecond, fast, 10 * time.Millisecond, Found, false},
			{3 * time.Second, fast, 10 * time.Millisecond, Unknown, true},
			{quietTime - 3*time.Second, fast, 10 * time.Millisecond, Unknown, true},
			{time.Second, fast, 10 * time.Millisecond, Found, false},
		}},
		{"a queue that stays while the held sockets still deliver what they were let send before is theirs, and held", []phase{
			{time.Second, fast, 0, Unknown, false},
			{100 * time.Millisecond, fast, 10 * time.Millisecond, Found, false},
			{2 * time.Second, fast, 10 * time.Millisecond, Found, false},
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := NewController(Options{})
			now := time.Unix(0, 0)
			var acked float64
			const dt = 10 * time.Millisecond
			for i, ph := range tt.phases {
				var est Estimate
				for el := time.Duration(0); el < ph.d; el += dt {
					now = now.Add(dt)
					rate := ph.rate
					if ph.follows && est.LowRate > 0 {
						rate = min(rate, float64(est.LowRate))
					}
					acked += rate * dt.Seconds()
					est = c.Step(now, []Sample{{Key: 1, RTT: 100*time.Microsecond + ph.excess, MinRTT: 100 * time.Microsecond,
						Acked: uint64(acked), InFlight: true, Low: true}})
				}
				if est.State != ph.want {
					t.Fatalf("phase %d: state %v, want %v (%+v)", i, est.State, ph.want, est)
				}
			}
		})
	}
}

// TestControllerClimbsPastStaleFind: a bottleneck found while the path
// was slow (the bulk sessions still starting, their processors busy)
// holds the Low class to that rate; once the path is 25 times faster,
// with no queue, the Low class reaches it within about a second, without
// overshooting into a deep queue, and then keeps the queue near the
// target.
func TestControllerClimbsPastStaleFind(t *testing.T) {
	const capacity = 200e6 / 8
	p := &path{capacity: capacity / 25, base: 100 * time.Microsecond, limit: capacity / 25 * 0.02}
	c := NewController(Options{})
	est, _, now := run(t, c, p, 4*capacity, time.Unix(0, 0), time.Second)
	if est.State != Found || est.LowRate > capacity/20 {
		t.Fatalf("after a second on the slow path: %+v, want found near %.0f B/s", est, capacity/25)
	}
	p.capacity, p.limit = capacity, capacity*0.1
	const dt = 10 * time.Millisecond
	reached, worst, drained := time.Duration(-1), time.Duration(0), false
	for el := time.Duration(0); el < 3*time.Second; el += dt {
		send := min(4*capacity, float64(est.LowRate))
		if est.LowRate == 0 {
			send = 4 * capacity
		}
		samples := p.step(dt, send)
		now = now.Add(dt)
		est = c.Step(now, samples)
		if reached < 0 && est.Bottleneck >= int64(0.85*capacity) {
			reached = el
		}
		if drained = drained || p.backlog == 0; drained { // the slow path's queue gone
			worst = max(worst, time.Duration(p.backlog/p.capacity*float64(time.Second)))
		}
	}
	t.Logf("reached 85%% after %v; the deepest queue since the slow path's drained %v", reached, worst)
	if worst > 10*time.Millisecond {
		t.Errorf("the climb overshot into a queue of %v, want at most 10ms", worst)
	}
	if reached < 0 || reached > 1200*time.Millisecond {
		t.Errorf("the Low class reached 85%% of the path after %v, want within 1.2 s", reached)
	}
	if est.QueueDelay > 4*DefaultTarget {
		t.Errorf("standing queue %v after the climb, want at most %v", est.QueueDelay, 4*DefaultTarget)
	}
}

// TestControllerIgnoresLoneStretch: once a bottleneck is found, a round
// trip stretched in one sample only (a processor's scheduling delay, not
// a queue) does not lower the Low rate; the same stretch standing for
// longer than standSpan does.
func TestControllerIgnoresLoneStretch(t *testing.T) {
	for _, tt := range []struct {
		name  string
		steps int // samples of 10 ms with the stretch
		falls bool
	}{
		{"one sample", 1, false},
		{"standing", 5, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			const capacity = 25e6
			p := &path{capacity: capacity, base: 100 * time.Microsecond, limit: capacity * 0.1}
			c := NewController(Options{})
			est, _, now := run(t, c, p, 4*capacity, time.Unix(0, 0), 5*time.Second)
			if est.State != Found {
				t.Fatalf("no bottleneck found: %+v", est)
			}
			// Let the queue empty and the rate settle with no delay at all.
			acked := p.acked[0]
			sample := func(excess time.Duration) Estimate {
				now = now.Add(10 * time.Millisecond)
				acked += uint64(capacity * 0.01)
				return c.Step(now, []Sample{{Key: 1, RTT: p.base + excess, MinRTT: p.base, Acked: acked, InFlight: true, Low: true}})
			}
			for range 20 {
				est = sample(0)
			}
			before := est.LowRate
			for range tt.steps {
				est = sample(5 * time.Millisecond)
			}
			if fell := est.LowRate < before; fell != tt.falls {
				t.Errorf("Low rate %d after %d stretched samples, %d before: fell %v, want %v", est.LowRate, tt.steps, before, fell, tt.falls)
			}
		})
	}
}
