package netem

import (
	"slices"
	"sync/atomic"
	"time"
)

// latenessBounds are the upper bounds of a Lateness's buckets. They
// reach below zero because a precise release is aimed early by the mean
// lateness of its wake-ups, and past 10 ms for releases on a timer when
// the host is busy.
var latenessBounds = [...]time.Duration{
	-100 * time.Microsecond, -50 * time.Microsecond, -20 * time.Microsecond,
	-10 * time.Microsecond, -5 * time.Microsecond, 0,
	5 * time.Microsecond, 10 * time.Microsecond, 20 * time.Microsecond,
	50 * time.Microsecond, 100 * time.Microsecond, 200 * time.Microsecond,
	500 * time.Microsecond, time.Millisecond, 2 * time.Millisecond,
	5 * time.Millisecond, 10 * time.Millisecond,
}

// Lateness is a histogram of how late a Line hands chunks to its writer:
// the clock's time just before the write less the chunk's release time,
// negative when early. It measures the emulation alone: what the write
// then costs, and how long the receiver takes to wake up, is not in it.
//
// The zero value is empty and ready to use. Record and Snapshot are safe
// for concurrent use and never block; several Lines may share one
// Lateness. A Snapshot taken while Records run may count a release in
// Count before its bucket, never the reverse.
type Lateness struct {
	buckets [len(latenessBounds) + 1]atomic.Uint64 // last: above every bound
	sum     atomic.Int64                           // nanoseconds
	count   atomic.Uint64
}

// Record adds one release that left late by d (negative: early).
func (h *Lateness) Record(d time.Duration) {
	i := 0
	for i < len(latenessBounds) && d > latenessBounds[i] {
		i++
	}
	// Count first, bucket last: a Snapshot, which loads the buckets
	// first, then never sees more in the buckets than in Count.
	h.count.Add(1)
	h.sum.Add(int64(d))
	h.buckets[i].Add(1)
}

// LatenessSnapshot is a Lateness's content at one time.
type LatenessSnapshot struct {
	Count uint64        // releases recorded
	Sum   time.Duration // sum of their lateness; Sum / Count is the mean
	// Buckets holds, for each of Bounds, the releases at most that late
	// (cumulative, as Prometheus's histograms count).
	Buckets []uint64
}

// Bounds returns the upper bounds of LatenessSnapshot.Buckets, from
// -100 µs to 10 ms, in a slice of the caller's own.
func (LatenessSnapshot) Bounds() []time.Duration { return slices.Clone(latenessBounds[:]) }

// Mean returns the mean lateness, 0 when nothing was recorded.
func (s LatenessSnapshot) Mean() time.Duration {
	if s.Count == 0 {
		return 0
	}
	return s.Sum / time.Duration(s.Count)
}

// Snapshot returns the histogram's content.
func (h *Lateness) Snapshot() LatenessSnapshot {
	s := LatenessSnapshot{Buckets: make([]uint64, len(latenessBounds))}
	var cum uint64
	for i := range latenessBounds {
		cum += h.buckets[i].Load()
		s.Buckets[i] = cum
	}
	s.Sum = time.Duration(h.sum.Load())
	s.Count = h.count.Load()
	return s
}
