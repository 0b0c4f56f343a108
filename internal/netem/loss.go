package netem

import (
	"math"
	"math/rand/v2"
)

// never is the gap or stay length drawn for a probability of zero.
const never = math.MaxInt64

// lossState places losses in the flow's segment sequence. It draws the gap
// to the next loss (and, for Gilbert-Elliott, the length of the stay in the
// current state) from geometric distributions instead of flipping a coin
// per segment, so its cost is per loss, not per segment, and the positions
// of losses do not depend on how the flow is cut into chunks.
type lossState struct {
	started bool  // a Gilbert-Elliott stay has been drawn
	bad     bool  // Gilbert-Elliott: in the bad state
	left    int64 // Gilbert-Elliott: segments left in the current stay
	gap     int64 // segments before the next loss at the current rate; -1 = not drawn
}

func (s *lossState) reset() { *s = lossState{gap: -1} }

// lost returns how many of the next m segments are lost under p (which has
// its defaults applied).
func (s *lossState) lost(r *rand.Rand, p *Params, m int64) int64 {
	if m <= 0 {
		return 0
	}
	if p.LossModel.Kind != GilbertElliott {
		return s.bernoulli(r, p.Loss, m)
	}
	g := &p.LossModel
	var n int64
	for m > 0 {
		if !s.started || s.left == 0 {
			if s.started {
				s.bad = !s.bad
			}
			s.started = true
			exit := g.P
			if s.bad {
				exit = g.R
			}
			// A stay lasts one segment plus the failures before the exit.
			s.left = satAdd(1, geometric(r, exit))
			s.gap = -1
		}
		q := g.GoodLoss
		if s.bad {
			q = g.BadLoss
		}
		step := min(m, s.left)
		n += s.bernoulli(r, q, step)
		m -= step
		if s.left != never {
			s.left -= step
		}
	}
	return n
}

// bernoulli counts losses among the next m segments when each is lost
// with probability q, carrying the gap to the next loss across calls.
func (s *lossState) bernoulli(r *rand.Rand, q float64, m int64) int64 {
	if q <= 0 {
		return 0
	}
	var n int64
	for {
		if s.gap < 0 {
			s.gap = geometric(r, q)
		}
		if s.gap >= m {
			if s.gap != never {
				s.gap -= m
			}
			return n
		}
		m -= s.gap + 1
		n++
		s.gap = -1
	}
}

// geometric returns the number of failures before the first success of
// independent trials that succeed with probability q: 0 when q >= 1,
// never when q <= 0.
func geometric(r *rand.Rand, q float64) int64 {
	if q >= 1 {
		return 0
	}
	if !(q > 0) {
		return never
	}
	u := 1 - r.Float64() // (0, 1]
	g := math.Floor(math.Log(u) / math.Log1p(-q))
	if g >= math.MaxInt64/2 {
		return never
	}
	return int64(g)
}

func satAdd(a, b int64) int64 {
	if b >= never-a {
		return never
	}
	return a + b
}
