package budget

import (
	"fmt"
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

// Check reports why a grant read from etcd is garbage, nil when it is
// not: a negative rate, or an expiry more than MaxAheadTTLs grant TTLs
// after now (an allocator writes now + ttl; the margin covers clock
// skew between instances). A garbage grant is never applied: it could
// hold the Low class at any rate long after its allocator has gone.
func (g Grant) Check(now time.Time, ttl time.Duration) error {
	switch {
	case g.Rate < 0:
		return fmt.Errorf("grant rate %d is negative", g.Rate)
	case g.Expires.After(now.Add(MaxAheadTTLs * ttl)):
		return fmt.Errorf("grant expires at %s, more than %d grant TTLs (%s) ahead", g.Expires.UTC().Format(time.RFC3339), MaxAheadTTLs, ttl)
	}
	return nil
}

// MaxAheadTTLs is how many grant TTLs ahead of an instance's clock a
// grant's expiry may be (Grant.Check).
const MaxAheadTTLs = 4

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
// instance has acknowledged its lowered grant (reported exactly its
// version as applied), or the grant it had before has expired, it is
// counted at its old rate, and only what is left of the budget after
// that count is handed out as raises (by max-min over what each
// instance still lacks). An instance that stops reporting a demand (its
// lease expired) has its grant deleted and is counted at that grant
// until it expires.
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
// Fill(budget, wants). An instance whose target is at most what it may
// be running at now (its exposure) gets its target at once; the others
// are raised from their exposure by shares (max-min) of the headroom,
// the budget less every instance's exposure, so no round can add more
// than the headroom. Every grant written is valid for the allocator's
// ttl from now. Writes are meant to be made in one transaction: Step
// assumes they all took effect (if they did not, the instances run
// lower than Step counts, never higher).
func (a *Allocator) Step(now time.Time, budget int64, demands map[string]Demand) []Write {
	var out []Write
	// Acknowledgements, departures and expiries.
	for name, x := range a.insts {
		d, live := demands[name]
		if live && x.cur.Version > 0 && d.Applied == x.cur.Version {
			x.hi = 0
		}
		if !live && !x.gone {
			x.gone = true
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
		case x.gone: // back before its old grant expired: it may still apply it
			x.gone = false
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
		if targets[i] > x.exposure(now) {
			raise = append(raise, i)
			continue
		}
		put(n, x, targets[i])
	}
	if len(raise) == 0 {
		return out
	}
	head := max(budget-a.Exposure(now), 0)
	lack := make([]int64, len(raise))
	base := make([]int64, len(raise))
	for k, i := range raise {
		base[k] = a.insts[names[i]].exposure(now)
		lack[k] = targets[i] - base[k]
	}
	add := MaxMin(head, lack)
	for k, i := range raise {
		put(names[i], a.insts[names[i]], base[k]+add[k])
	}
	return out
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
