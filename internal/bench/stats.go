package bench

import (
	"sync"
	"time"

	"github.com/sluicelab/sluice/internal/bench/hist"
)

// counters are the per-statement and per-event counts sysbench reports.
type counters struct {
	reads, writes, other uint64 // statements by Counter
	errors, reconnects   uint64 // ignored errors, reconnects
	events               uint64 // completed transactions
	roundTrips           uint64
}

func (c *counters) add(o counters) {
	c.reads += o.reads
	c.writes += o.writes
	c.other += o.other
	c.errors += o.errors
	c.reconnects += o.reconnects
	c.events += o.events
	c.roundTrips += o.roundTrips
}

func (c *counters) queries() uint64 { return c.reads + c.writes + c.other }

// workerStats are one worker's measured figures. The worker records into
// them at the end of each event; the interval reporter takes the interval
// part concurrently.
type workerStats struct {
	mu sync.Mutex
	// Guarded by mu.
	total    counters      // whole run
	interval counters      // since the interval reporter last took them
	latMin   time.Duration // whole run; valid when total.events > 0
	latMax   time.Duration
	latSum   time.Duration
	hist     hist.Log // whole run
	ihist    hist.Log // since the interval reporter last took it
}

// record counts one completed event of latency lat and the statements it
// ran (t.events is ignored: the event itself is counted here).
func (s *workerStats) record(lat time.Duration, t counters) {
	t.events = 1
	ms := float64(lat) / float64(time.Millisecond)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.total.events == 0 || lat < s.latMin {
		s.latMin = lat
	}
	s.latMax = max(s.latMax, lat)
	s.latSum += lat
	s.total.add(t)
	s.interval.add(t)
	s.hist.Record(ms)
	s.ihist.Record(ms)
}

// addCounts counts statements that belong to no event (the final flush of
// bulk_insert).
func (s *workerStats) addCounts(t counters) {
	t.events = 0
	s.mu.Lock()
	defer s.mu.Unlock()
	s.total.add(t)
	s.interval.add(t)
}

// takeIntervalLocked moves the interval figures into c and h and resets
// them. The caller holds s.mu.
func (s *workerStats) takeIntervalLocked(c *counters, h *hist.Log) {
	c.add(s.interval)
	h.Merge(&s.ihist)
	s.interval = counters{}
	s.ihist.Reset()
}
