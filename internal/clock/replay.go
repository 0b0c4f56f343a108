package clock

import (
	"time"

	"golang.org/x/sys/unix"
)

// Monotonic is implemented by clocks that can place a reading of the
// kernel's CLOCK_MONOTONIC (bpf_ktime_get_ns) on their own time line.
type Monotonic interface {
	// FromMonotonic returns the clock's time when CLOCK_MONOTONIC read ns
	// nanoseconds, given now, a reading of this clock taken just before.
	FromMonotonic(ns uint64, now time.Time) time.Time
}

// FromMonotonic returns now less the age of ns by CLOCK_MONOTONIC (read
// here, once), so the result keeps now's monotonic reading and compares
// with Now. A reading from the future (after the call's own) gives now.
func (Real) FromMonotonic(ns uint64, now time.Time) time.Time {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts) != nil {
		return now
	}
	age := time.Duration(ts.Nano() - int64(ns))
	if age < 0 {
		return now
	}
	return now.Add(-age)
}

// Replay is a Clock whose Now reads a time set by its user, while one is
// set: code shown events after they happened (the chunks the kernel's
// fast path relayed, read later from its journal) records when they
// happened rather than when it saw them. Timers are the underlying
// clock's. A Replay is for one goroutine at a time; its zero value is
// not usable (NewReplay).
type Replay struct {
	Clock
	at time.Time // zero: Now is the underlying clock's
}

// NewReplay returns a Replay reading c's time while none is set.
func NewReplay(c Clock) *Replay { return &Replay{Clock: c} }

// Now returns the time set, or the underlying clock's when none is.
func (r *Replay) Now() time.Time {
	if !r.at.IsZero() {
		return r.at
	}
	return r.Clock.Now()
}

// Set makes Now read at until the next Set; the zero time reads the
// underlying clock again.
func (r *Replay) Set(at time.Time) { r.at = at }
