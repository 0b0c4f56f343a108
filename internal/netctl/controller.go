package netctl

import (
	"time"
)

// Sample is what the kernel says of one of a link direction's sockets
// (TCP_INFO), read at one instant. A socket sluice sends on gives its
// own round trips; one it receives on, the receiver's estimate of them
// (see Side).
type Sample struct {
	RTT    time.Duration // smoothed round-trip time (tcpi_rtt), or a probe's
	MinRTT time.Duration // the lowest round trip seen (tcpi_min_rtt); 0 unknown
	// Acked is the socket's bytes delivered so far: acknowledged
	// (tcpi_bytes_acked), or, receiving, received (tcpi_bytes_received);
	// it only grows. Key tells one socket's samples from another's.
	Acked uint64
	Key   uint64
	// InFlight reports bytes on the path now: sent and not acknowledged
	// (tcpi_unacked of a few segments), or, receiving, arriving since the
	// last sample.
	// Only then does RTT say anything about a queue now.
	InFlight bool
	// RwndLimited is how long the socket has been held by its peer's
	// receive window (tcpi_rwnd_limited): while it grows, a slow reader,
	// not a queue, is what the round trips show.
	RwndLimited time.Duration
	// Low reports that the socket's bytes go at the Low class: its
	// round trips tell the queue the Low class builds. Other sockets
	// count for the delivery rate only; their own bursts are theirs.
	Low bool
}

// State is what the controller believes about a direction.
type State uint8

const (
	// Unknown: no bottleneck found; the Low class is not limited.
	Unknown State = iota
	// Found: a queue builds somewhere on the path; the Low class is
	// held to a rate that keeps it short.
	Found
)

func (s State) String() string {
	if s == Found {
		return "bottleneck"
	}
	return "none"
}

// Estimate is the controller's view of a direction after a step.
type Estimate struct {
	State State
	// Bottleneck is the highest rate delivered through the path lately
	// (bytes/s, all classes), the estimate of its capacity; 0 before any
	// delivery.
	Bottleneck int64
	// BaseRTT is the lowest round trip of the sockets; QueueDelay the
	// smallest excess over their own lowest of the Low-class sockets
	// with bytes in flight: the standing queue the Low class keeps on
	// the path.
	BaseRTT, QueueDelay time.Duration
	// LowRate is the rate the Low class may enter the link at (bytes/s);
	// 0 means unlimited.
	LowRate int64
}

// Options tune a Controller; the zero Options are the defaults.
type Options struct {
	// Target is the queueing delay the Low class may cause; 0 means
	// DefaultTarget.
	Target time.Duration
	// Ceiling is a rate (bytes/s) the Low class never exceeds; 0 means
	// none.
	Ceiling int64
}

// DefaultTarget is the standing queue, in queueing delay, the Low class
// may build at a bottleneck, as the smoothed round trips of its sockets
// show it (so it holds the bursts TCP sends, and the peers' delayed
// acknowledgements, too): what a more important byte may wait behind it,
// beside what the Low class's share of the path takes from it while it
// yields (link.Config.LowYieldPercent).
const DefaultTarget = time.Millisecond

const (
	// window is how long the bottleneck estimate remembers a rate.
	window = 2 * time.Second
	// rateSpan is the span a delivery rate is measured over: long
	// enough to smooth the bursts of acknowledgements.
	rateSpan = 100 * time.Millisecond
	// floorShare is the least share of the bottleneck the Low class
	// keeps, so that its flows still measure the path.
	floorShare = 0.02
	// recoverTime is how long the Low class takes, with no queue, to
	// climb from nothing back to the whole bottleneck.
	recoverTime = time.Second
	// probeTime and probeGain: with no queue, the Low rate grows by
	// probeGain of itself per probeTime.
	probeTime = 100 * time.Millisecond
	probeGain = 0.25
	// lostAfter is how long the Low class may run above lostFactor
	// times the rate it was last held to, with no queue, before the
	// bottleneck counts as gone.
	lostAfter  = 2 * time.Second
	lostFactor = 1.5
	// futileShare, futileAfter and quietTime: a queue that stays
	// futileAfter with the Low class held under futileShare of the
	// path's rate, and its sockets delivering no more than drainFactor
	// times that, is not the Low class's; the controller lets go and
	// does not look again for quietTime. While the sockets deliver more
	// than that, the queue is still theirs: what they were let send
	// (a send buffer, a receive window granted) before the hold.
	futileShare = 0.1
	futileAfter = 300 * time.Millisecond
	quietTime   = 5 * time.Second
	drainFactor = 2
	// busyShare is the share of the bottleneck estimate the path must
	// deliver for a queue to count towards finding a bottleneck.
	busyShare = 0.8
	// minReact is the least time between two falls of the Low rate, and
	// maxCut the most one fall takes of the lower of the rate and the
	// bottleneck estimate.
	minReact = 40 * time.Millisecond
	maxCut   = 0.25
	// nearShare: near the bottleneck estimate the Low rate climbs by the
	// estimate per recoverTime alone, not by probeGain of itself;
	// pastShare and pastGain: past pastShare times the rate a queue last
	// stood at, it climbs by pastGain of itself per probeTime, as a TCP
	// sender starts: that rate said little of the path.
	nearShare = 0.9
	pastShare = 1.25
	pastGain  = 0.5
	// confirmTime is how long the queue must stay above the target
	// before a bottleneck counts as found: a queue that stands, not a
	// burst's.
	confirmTime = 30 * time.Millisecond
	// standSpan is how long a queueing delay must show in every sample
	// to count: shorter stretches of the round trips are the processors'.
	standSpan = 10 * time.Millisecond
)

// Controller holds the Low class of one link direction below the
// capacity of a bottleneck it is not told about: a delay-based
// controller (LEDBAT, RFC 6817, with a target of milliseconds, not
// LEDBAT's 100) whose
// rate is bounded by a windowed maximum of the delivery rate (as BBR
// estimates a bottleneck's bandwidth). It is pure logic: Step is given
// the time and the samples. Not safe for concurrent use.
type Controller struct {
	o Options

	last  time.Time                // the previous step; zero before the first
	acked map[uint64]uint64        // Acked by socket at the previous step
	rwnd  map[uint64]time.Duration // RwndLimited by socket at the previous step
	total uint64                   // bytes delivered since the first step
	hist  []totalAt                // total at recent steps, oldest first, spanning rateSpan
	rates []rateAt                 // delivery rates within window, newest last
	qhist []qAt                    // queueing delays of the steps within standSpan, oldest first
	est   Estimate
	// congested is the bottleneck estimate at the last step with a queue
	// above the target; aboveFor how long the Low rate has since run
	// above lostFactor times it, with no such queue.
	congested int64
	aboveFor  time.Duration
	// queuedFor is how long, while no bottleneck is found, the queue has
	// stayed above the target.
	queuedFor time.Duration
	// foundAt is the bottleneck estimate when it was last found;
	// futileFor how long the queue has since stayed with the Low class
	// held under futileShare of it; no bottleneck is found again before
	// quietUntil.
	foundAt    int64
	futileFor  time.Duration
	quietUntil time.Time
	// recent is the delivery rate over the last rateSpan (bytes/s).
	recent int64
	// cut is when the Low rate last fell: it falls again only once the
	// queue had a round trip to show the fall.
	cut time.Time
}

type totalAt struct {
	at    time.Time
	total uint64
}

type qAt struct {
	at time.Time
	q  time.Duration // -1: no Low socket with bytes in flight
}

type rateAt struct {
	at   time.Time
	rate int64
}

// NewController returns a controller with options o.
func NewController(o Options) *Controller {
	if o.Target <= 0 {
		o.Target = DefaultTarget
	}
	return &Controller{o: o, acked: map[uint64]uint64{}, rwnd: map[uint64]time.Duration{}}
}

// Step takes the direction's sockets at now and returns the estimate.
// Steps should come every few milliseconds to some tens; now never goes
// back.
func (c *Controller) Step(now time.Time, samples []Sample) Estimate {
	dt := now.Sub(c.last)
	first := c.last.IsZero()
	c.last = now
	var delivered uint64
	acked := make(map[uint64]uint64, len(samples))
	rwnd := make(map[uint64]time.Duration, len(samples))
	qdelay, base := time.Duration(-1), time.Duration(0)
	for _, s := range samples {
		acked[s.Key], rwnd[s.Key] = s.Acked, s.RwndLimited
		prevRwnd, seen := c.rwnd[s.Key]
		readerHeld := !seen || s.RwndLimited > prevRwnd
		if prev, ok := c.acked[s.Key]; ok && s.Acked > prev {
			delivered += s.Acked - prev
		}
		if s.MinRTT > 0 && (base == 0 || s.MinRTT < base) {
			base = s.MinRTT
		}
		if s.Low && s.InFlight && s.MinRTT > 0 && !readerHeld {
			if q := max(s.RTT-s.MinRTT, 0); qdelay < 0 || q < qdelay {
				qdelay = q
			}

		}
	}
	c.acked, c.rwnd = acked, rwnd
	if base > 0 {
		c.est.BaseRTT = base
	}
	qdelay = c.standing(now, qdelay)
	c.est.QueueDelay = max(qdelay, 0)
	if first || dt <= 0 {
		return c.est
	}
	c.total += delivered
	c.addRate(now)
	b := c.est.Bottleneck
	// A queue that stands at a bottleneck keeps it busy: the path
	// delivers near the highest rate it has. Round trips stretched while
	// it delivers far less are the ends' own pauses (a sender that has
	// nothing to send, a process not scheduled), not a queue.
	busy := float64(c.recent) >= busyShare*float64(b)
	quiet := now.Before(c.quietUntil)
	if c.est.State == Unknown && qdelay > c.o.Target && b > 0 && busy && !quiet {
		c.queuedFor += dt
	} else {
		c.queuedFor = 0
	}
	switch {
	case c.est.State == Unknown && (quiet || c.queuedFor < confirmTime):
		// No queue, or one not yet long enough to stand.
	case qdelay > c.o.Target && b > 0:
		if c.est.State == Unknown {
			c.est.State = Found
			c.est.LowRate = b
			c.queuedFor, c.foundAt, c.futileFor = 0, b, 0
		}
		// A queue that stays while the Low class is held to a small
		// share of what the path carried when it was found, and its
		// sockets deliver about what it is held to, is not the Low
		// class's: the ends' pauses, or other traffic. Holding on only
		// starves the Low class; let go, and look again later.
		held := float64(c.est.LowRate) <= futileShare*float64(c.foundAt)
		if held && c.recent <= drainFactor*c.est.LowRate {
			c.futileFor += dt
		} else {
			c.futileFor = 0
		}
		if c.futileFor >= futileAfter {
			c.est.State, c.est.LowRate, c.aboveFor, c.futileFor = Unknown, 0, 0, 0
			c.quietUntil = now.Add(quietTime)
			break
		}
		// Back off in proportion to the excess delay, by at most a
		// quarter per round trip (the queue's and the path's), as LEDBAT's
		// window falls with the delay above target.
		if now.Sub(c.cut) >= max(qdelay+base, minReact) {
			excess := min(float64(qdelay-c.o.Target)/float64(c.o.Target), 1)
			c.est.LowRate = int64(float64(min(c.est.LowRate, b)) * (1 - excess*maxCut))
			c.cut = now
		}
		c.congested, c.aboveFor = b, 0
	case c.est.State == Found:
		// Below target: climb by the whole bottleneck per recoverTime,
		// or, far below it, by a quarter per probeTime if that is more, so
		// that a class held far down gets its share back within a second
		// or two and one near the path's rate probes past it gently.
		// Well past the rate a queue last stood at, with none since, the
		// path has more than it had then (a queue found while the flows
		// were still starting, or the path grew): probe faster still.
		up := float64(b) * dt.Seconds() / recoverTime.Seconds()
		switch low := float64(c.est.LowRate); {
		case low > pastShare*float64(c.congested):
			up = max(up, low*pastGain*dt.Seconds()/probeTime.Seconds())
		case low < nearShare*float64(b):
			up = max(up, low*probeGain*dt.Seconds()/probeTime.Seconds())
		}
		c.est.LowRate += int64(up)
		// The bottleneck is gone when the path delivers well beyond what
		// it did under the last queue, and the Low class is let past that
		// with no queue: more capacity, not less demand.
		if float64(c.est.LowRate) > lostFactor*float64(c.congested) && float64(b) > lostFactor*float64(c.congested) {
			c.aboveFor += dt
		} else {
			c.aboveFor = 0
		}
		if c.aboveFor >= lostAfter {
			c.est.State, c.est.LowRate, c.aboveFor = Unknown, 0, 0
		}
	}
	if c.est.State == Found && b == 0 {
		// Nothing delivered for a whole window: nothing to hold.
		c.est.State, c.est.LowRate, c.aboveFor = Unknown, 0, 0
	}
	if c.est.State == Found {
		c.est.LowRate = max(c.est.LowRate, int64(float64(b)*floorShare), 1)
		c.est.LowRate = min(c.est.LowRate, 2*b)
	}
	if c.o.Ceiling > 0 && (c.est.LowRate == 0 || c.est.LowRate > c.o.Ceiling) {
		c.est.LowRate = c.o.Ceiling
	}
	return c.est
}

// standing returns the least queueing delay of the steps within
// standSpan up to now, q the newest (-1: no Low socket to tell): a queue
// stands in every sample, while a busy processor's scheduling delay
// stretches some round trips by as much as the target and not the next.
func (c *Controller) standing(now time.Time, q time.Duration) time.Duration {
	c.qhist = append(c.qhist, qAt{now, q})
	i := 0
	for i < len(c.qhist)-1 && now.Sub(c.qhist[i].at) > standSpan {
		i++
	}
	c.qhist = c.qhist[i:]
	for _, x := range c.qhist {
		q = min(q, x.q)
	}
	return q
}

// addRate measures the delivery rate over the last rateSpan and
// updates the windowed maximum.
func (c *Controller) addRate(now time.Time) {
	c.hist = append(c.hist, totalAt{now, c.total})
	i := 0
	for i+1 < len(c.hist) && now.Sub(c.hist[i+1].at) >= rateSpan {
		i++
	}
	c.hist = c.hist[i:]
	span := now.Sub(c.hist[0].at)
	if span < rateSpan/2 {
		return
	}
	r := int64(float64(c.total-c.hist[0].total) / span.Seconds())
	j := 0
	for j < len(c.rates) && now.Sub(c.rates[j].at) > window {
		j++
	}
	c.rates = append(c.rates[j:], rateAt{now, r})
	b := int64(0)
	for _, x := range c.rates {
		b = max(b, x.rate)
	}
	c.est.Bottleneck = b
	c.recent = r
}
