package budget

import (
	"math"
	"time"
)

// Sample is one reading of a link's Low class in one direction: the
// bytes admitted since the link was made (link.ClassStats.Bytes) and the
// bytes of the Sends waiting at the reading (ClassStats.Waiting).
type Sample struct {
	Bytes   int64
	Waiting int64
}

// DemandWindow is how far back the estimator looks: the used rate is
// the bytes admitted over the last DemandWindow.
const DemandWindow = time.Second

// Headroom is the factor over the used rate that a class that is not
// backlogged asks for, so it can grow between two allocations.
const Headroom = 1.25

// busyFraction is the part of the applied rate above which a class
// counts as held back by it even if no Send waited at a reading.
const busyFraction = 0.9

// Estimator estimates the demand of one link's Low class in one
// direction from readings taken at a steady pace (every 100 ms or so).
// The estimator: the used rate u is the bytes admitted since the newest
// reading at least DemandWindow old (the oldest one while there is none)
// divided by the time since it. The class is backlogged
// when a Send waited at a reading younger than DemandWindow, or when u reached 90%
// of the rate the class was held to; a backlogged class wants more than
// it gets, so it asks for the whole budget (max-min fairness then gives
// it the fair share of what the others leave); otherwise it asks for
// u*Headroom. The zero Estimator is ready; it is not safe for concurrent
// use.
type Estimator struct {
	hist []reading // oldest first; spans at most DemandWindow
}

type reading struct {
	at time.Time
	Sample
}

// Observe records a reading taken at now. Readings must come in time
// order; a counter that went back (a link made again) restarts the
// window.
func (e *Estimator) Observe(now time.Time, s Sample) {
	if n := len(e.hist); n > 0 && (s.Bytes < e.hist[n-1].Bytes || now.Before(e.hist[n-1].at)) {
		e.hist = e.hist[:0]
	}
	e.hist = append(e.hist, reading{now, s})
	cut := 0
	for cut < len(e.hist)-1 && now.Sub(e.hist[cut+1].at) >= DemandWindow {
		cut++
	}
	e.hist = append(e.hist[:0], e.hist[cut:]...)
}

// Used returns the used rate in bytes/s over the window, 0 with fewer
// than two readings.
func (e *Estimator) Used() int64 {
	n := len(e.hist)
	if n < 2 {
		return 0
	}
	d := e.hist[n-1].at.Sub(e.hist[0].at)
	if d <= 0 {
		return 0
	}
	return int64(math.Round(float64(e.hist[n-1].Bytes-e.hist[0].Bytes) / d.Seconds()))
}

// Backlogged reports whether the class was held back over the window:
// a Send waited at a reading, or the used rate reached 90% of applied
// (bytes/s; 0 means the class was not held to a rate).
func (e *Estimator) Backlogged(applied int64) bool {
	n := len(e.hist)
	for _, r := range e.hist {
		if r.Waiting > 0 && e.hist[n-1].at.Sub(r.at) < DemandWindow {
			return true
		}
	}
	return applied > 0 && float64(e.Used()) >= busyFraction*float64(applied)
}

// Want returns the demand in bytes/s: budget when backlogged (see
// Backlogged), else the used rate times Headroom, never above budget.
func (e *Estimator) Want(applied, budget int64) int64 {
	if e.Backlogged(applied) {
		return budget
	}
	return min(int64(float64(e.Used())*Headroom), budget)
}
