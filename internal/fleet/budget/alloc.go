package budget

import (
	"maps"
	"slices"
	"time"
)

// Grant is the allocator's word to one instance: run the Low class at
// Rate bytes/s until Expires. Version increases with every change of
// Rate for that instance (a renewal keeps it); the instance acknowledges
// the version it applies in its demand.
type Grant struct {
	Rate    int64     `json:"rate"`
	Version uint64    `json:"version"`
	Expires time.Time `json:"expires"`
}

// Valid reports whether g may be applied at now.
func (g Grant) Valid(now time.Time) bool { return g.Version > 0 && now.Before(g.Expires) }

// Demand is what one instance reports: the rate it wants and the
// version of the grant it applies (0 for none).
type Demand struct {
	Want    int64  `json:"want"`
	Applied uint64 `json:"applied"`
}

// Write is one change the allocator asks for: put Grant for Name, or,
// with Delete, remove Name's grant.
type Write struct {
	Name   string
	Grant  Grant
	Delete bool
}

// Allocator turns demands into grants that keep the sum of what the
// instances may be running at within the budget while grants change:
// lower before raise. Lowered grants are written first; until an
// instance has acknowledged its lowered grant, or the grant it had
// before has expired, it is counted at its old rate, and only what is
// left of the budget after that count is handed out as raises (by
// max-min over what each instance still lacks). An instance that stops
// reporting a demand (its lease expired) has its grant deleted and is
// counted at that grant until it expires.
//
// An Allocator is pure logic driven by Step; it is not safe for
// concurrent use. The zero value is not ready: use NewAllocator.
type Allocator struct {
	ttl   time.Duration
	insts map[string]*inst
}

// inst is the allocator's record of one instance.
type inst struct {
	cur Grant // last written; Version 0 before the first
	// hi is the highest rate the instance may still be applying from an
	// earlier grant, until hiUntil; it stops counting once cur is
	// acknowledged.
	hi      int64
	hiUntil time.Time
	gone    bool // no demand: grant deleted, counted until cur expires
}

// exposure is the highest rate the instance may be applying at now.
func (x *inst) exposure(now time.Time) int64 {
	r := int64(0)
	if x.cur.Valid(now) {
		r = x.cur.Rate
	}
	if x.hi > r && now.Before(x.hiUntil) {
		r = x.hi
	}
	return r
}

// NewAllocator returns an allocator whose grants are valid for ttl
// after they are written.
func NewAllocator(ttl time.Duration) *Allocator {
	return &Allocator{ttl: ttl, insts: map[string]*inst{}}
}

// Adopt takes over grants found in the store (a new allocator's start):
// each counts at its rate until it expires, as if just written.
func (a *Allocator) Adopt(grants map[string]Grant) {
	for name, g := range grants {
		a.insts[name] = &inst{cur: g, hi: g.Rate, hiUntil: g.Expires}
	}
}

// Exposure returns the sum of the rates the instances may be applying
// at now: what Step keeps within the budget.
func (a *Allocator) Exposure(now time.Time) int64 {
	var s int64
	for _, x := range a.insts {
		s += x.exposure(now)
	}
	return s
}

// Grants returns the grants as last written, of the instances that
// still report a demand.
func (a *Allocator) Grants() map[string]Grant {
	out := map[string]Grant{}
	for name, x := range a.insts {
		if !x.gone && x.cur.Version > 0 {
			out[name] = x.cur
		}
	}
	return out
}

// Step computes the grants at now for the given budget (bytes/s) and
// the demands of the live instances, and returns the writes to make, in
// name order, lowerings and renewals before raises. Targets are
// Fill(budget, wants); a raise is held back (in part) while lowered
// instances have not acknowledged. Every grant written is valid for the
// allocator's ttl from now. Writes are meant to be made in one
// transaction: Step assumes they all took effect.
func (a *Allocator) Step(now time.Time, budget int64, demands map[string]Demand) []Write {
	var out []Write
	// Acknowledgements, departures and expiries.
	for name, x := range a.insts {
		d, live := demands[name]
		if live && x.cur.Version > 0 && d.Applied >= x.cur.Version {
			x.hi = 0
		}
		if !live && !x.gone {
			x.gone = true
			x.hi = max(x.hi, x.cur.Rate)
			x.hiUntil = later(x.hiUntil, x.cur.Expires)
			out = append(out, Write{Name: name, Delete: true})
		}
		if x.gone && x.exposure(now) == 0 {
			delete(a.insts, name)
		}
	}
	names := slices.Sorted(maps.Keys(demands))
	wants := make([]int64, len(names))
	for i, n := range names {
		wants[i] = demands[n].Want
		switch x := a.insts[n]; {
		case x == nil:
			a.insts[n] = &inst{}
		case x.gone: // back before its old grant expired: still counted
			x.gone, x.cur.Rate = false, 0
		}
	}
	targets := Fill(budget, wants)
	exp := now.Add(a.ttl)
	put := func(name string, x *inst, rate int64) {
		if rate != x.cur.Rate || x.cur.Version == 0 {
			if e := x.exposure(now); e > rate {
				x.hi, x.hiUntil = e, later(x.hiUntil, x.cur.Expires)
			}
			x.cur.Version++
		}
		x.cur.Rate, x.cur.Expires = rate, exp
		out = append(out, Write{Name: name, Grant: x.cur})
	}
	// Lowerings and renewals first; raises are decided on what is left.
	var raise []int
	for i, n := range names {
		x := a.insts[n]
		if targets[i] > x.cur.Rate || (x.cur.Version == 0 && targets[i] > 0) {
			raise = append(raise, i)
			continue
		}
		put(n, x, targets[i])
	}
	if len(raise) == 0 {
		return out
	}
	// Headroom: the budget less what everyone may be running at, where a
	// raised instance counts at its current grant (the raise adds to it).
	head := budget - a.Exposure(now)
	lack := make([]int64, len(raise))
	for k, i := range raise {
		x := a.insts[names[i]]
		lack[k] = targets[i] - max(x.cur.Rate, x.exposure(now))
		head += x.exposure(now) - max(x.cur.Rate, x.exposure(now))
		if lack[k] < 0 {
			lack[k] = 0
		}
	}
	add := MaxMin(max(head, 0), lack)
	for k, i := range raise {
		x := a.insts[names[i]]
		base := max(x.cur.Rate, x.exposure(now))
		rate := min(targets[i], base+add[k])
		if x.cur.Version > 0 && rate <= x.cur.Rate {
			put(names[i], x, x.cur.Rate) // renew; the raise waits
			continue
		}
		put(names[i], x, rate)
	}
	return out
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
