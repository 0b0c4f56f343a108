package netem

import "time"

// flightEntry is one chunk counted against the window.
type flightEntry struct {
	n     int64     // bytes
	ackAt time.Time // when its acknowledgement is back at the sender
	seq   uint64    // the chunk's sequence number in its Line
}

// flight is the window ledger of one flow: the chunks in flight, oldest
// first. Acknowledgements are cumulative, so ackAt never decreases along
// the ledger and the chunks in flight at any time are a suffix of it. It
// is pure: times are passed in.
type flight struct {
	q       ring[flightEntry]
	bytes   int64     // sum of n over q
	lastAck time.Time // ackAt of the newest entry
}

// admitAt returns the earliest time, not before arrival, at which n more
// bytes fit in window, and how many of the oldest entries must be
// acknowledged by then. A chunk larger than the window is admitted alone,
// once everything before it is acknowledged.
func (f *flight) admitAt(arrival time.Time, n, window int64) (time.Time, int) {
	at := arrival
	free := window - f.bytes
	k := 0
	for free < n && k < f.q.len() {
		e := f.q.at(k)
		free += e.n
		if e.ackAt.After(at) {
			at = e.ackAt
		}
		k++
	}
	return at, k
}

// ack removes the k oldest entries, then any further ones acknowledged by
// t whose sequence number is below released (chunks the Line has passed on).
func (f *flight) ack(k int, t time.Time, released uint64) {
	for ; k > 0 && f.q.len() > 0; k-- {
		f.bytes -= f.q.pop().n
	}
	for f.q.len() > 0 {
		e := f.q.at(0)
		if e.ackAt.After(t) || e.seq >= released {
			return
		}
		f.bytes -= f.q.pop().n
	}
}

// push records n bytes in flight until ackAt, which is raised to the
// previous entry's if earlier (acknowledgements are cumulative), and
// returns the recorded ackAt.
func (f *flight) push(n int64, ackAt time.Time, seq uint64) time.Time {
	if ackAt.Before(f.lastAck) {
		ackAt = f.lastAck
	}
	f.lastAck = ackAt
	f.q.push(flightEntry{n: n, ackAt: ackAt, seq: seq})
	f.bytes += n
	return ackAt
}
