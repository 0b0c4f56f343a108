package sbrand

import (
	"fmt"
	"math"
	"math/bits"
	"sync/atomic"

	"github.com/sluicelab/sluice/internal/enum"
)

// Dist selects the distribution Rand.Default draws from.
type Dist int

// The distributions of sysbench's --rand-type.
const (
	Special  Dist = iota // gaussian core plus a uniform hot spot; sysbench 1.0's default
	Uniform              // every value equally likely
	Gaussian             // mean of SpecIter uniform draws
	Pareto               // power law with shape ParetoH
)

// distNames holds the --rand-type spelling of each Dist.
var distNames = []string{
	Special:  "special",
	Uniform:  "uniform",
	Gaussian: "gaussian",
	Pareto:   "pareto",
}

// String returns the --rand-type spelling of d.
func (d Dist) String() string { return enum.Name(distNames, int(d), "Dist") }

// ParseDist returns the Dist spelled s (as --rand-type takes it, exactly).
func ParseDist(s string) (Dist, error) {
	if i, ok := enum.Index(distNames, s, false); ok {
		return Dist(i), nil
	}
	return 0, fmt.Errorf("unknown distribution %q (want uniform, gaussian, special or pareto)", s)
}

// Config holds the distribution parameters. The zero value is not useful;
// start from DefaultConfig.
type Config struct {
	Dist     Dist    // distribution of Default
	SpecIter int     // --rand-spec-iter: uniform draws averaged by gaussian and special
	SpecPct  int     // --rand-spec-pct: percentage of the range that is "special"
	SpecRes  int     // --rand-spec-res: percentage of draws that hit the special part
	ParetoH  float64 // --rand-pareto-h: shape of the pareto distribution, in (0, 1)
}

// DefaultConfig returns sysbench 1.0.20's defaults: special, 12, 1, 75, 0.2.
func DefaultConfig() Config {
	return Config{Dist: Special, SpecIter: 12, SpecPct: 1, SpecRes: 75, ParetoH: 0.2}
}

// Rand draws numbers and strings. It is not safe for concurrent use.
type Rand struct {
	s0, s1 uint64 // xoroshiro128+ state, never both zero

	dist     Dist
	iter     int
	iterMult float64 // 1 / iter
	pctMult  float64 // pct / 100
	pct2Mult float64 // pct / 200
	resMult  float64 // 100 / (100 - res); +Inf at res = 100
	power    float64 // log(h) / log(1 - h)
}

// New returns a Rand seeded with seed and drawing with cfg.
func New(seed uint64, cfg Config) *Rand {
	r := &Rand{dist: cfg.Dist, iter: cfg.SpecIter}
	r.s0 = splitmix(&seed)
	r.s1 = splitmix(&seed)
	if r.s0 == 0 && r.s1 == 0 {
		r.s1 = 1
	}
	r.iterMult = 1 / float64(cfg.SpecIter)
	r.pctMult = float64(cfg.SpecPct) / 100
	r.pct2Mult = float64(cfg.SpecPct) / 200
	r.resMult = 100 / (100 - float64(cfg.SpecRes))
	r.power = math.Log(cfg.ParetoH) / math.Log(1-cfg.ParetoH)
	return r
}

func splitmix(x *uint64) uint64 {
	*x += 0x9e3779b97f4a7c15
	z := *x
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// Uint64 returns 64 uniformly distributed bits.
func (r *Rand) Uint64() uint64 {
	s0, s1 := r.s0, r.s1
	res := s0 + s1
	s1 ^= s0
	r.s0 = bits.RotateLeft64(s0, 24) ^ s1 ^ (s1 << 16)
	r.s1 = bits.RotateLeft64(s1, 37)
	return res
}

// Float64 returns a uniformly distributed number in [0, 1).
func (r *Rand) Float64() float64 {
	return float64(r.Uint64()>>11) * (1.0 / (1 << 53))
}

// Default draws from [a, b] with the configured distribution.
func (r *Rand) Default(a, b uint32) uint32 {
	switch r.dist {
	case Uniform:
		return r.Uniform(a, b)
	case Gaussian:
		return r.Gaussian(a, b)
	case Pareto:
		return r.Pareto(a, b)
	}
	return r.Special(a, b)
}

// Uniform draws uniformly from [a, b].
func (r *Rand) Uniform(a, b uint32) uint32 {
	return uint32(float64(a) + r.Float64()*float64(b-a+1))
}

// Gaussian draws the mean of SpecIter uniform draws over [a, b].
func (r *Rand) Gaussian(a, b uint32) uint32 {
	t := float64(b - a + 1)
	sum := 0.0
	for i := 0; i < r.iter; i++ {
		sum += r.Float64() * t
	}
	return a + uint32(sum*r.iterMult)
}

// Special draws from [a, b]: SpecRes percent of the draws fall uniformly in
// the SpecPct percent of the range centred on its middle, the rest follow
// the gaussian distribution over the whole range.
func (r *Rand) Special(a, b uint32) uint32 {
	t := float64(b - a)
	rangeSize := t * r.resMult
	rnd := r.Float64()
	res := rnd * rangeSize
	if res < t {
		sum := 0.0
		for i := 0; i < r.iter; i++ {
			sum += r.Float64()
		}
		return uint32(float64(a) + sum*t*r.iterMult)
	}
	d := t * r.pctMult
	res = rnd * (d + 1)
	res += t/2 - t*r.pct2Mult
	return a + uint32(res)
}

// Pareto draws from [a, b] with a power law of shape ParetoH, skewed
// towards a.
func (r *Rand) Pareto(a, b uint32) uint32 {
	return a + uint32(float64(b-a+1)*math.Pow(r.Float64(), r.power))
}

// AppendString appends a string shaped like template to dst and returns the
// extended slice: each '#' becomes a random digit, each '@' a random
// lower-case letter, any other byte is copied.
func (r *Rand) AppendString(dst []byte, template string) []byte {
	for i := 0; i < len(template); i++ {
		switch c := template[i]; c {
		case '#':
			dst = append(dst, byte(r.Uniform('0', '9')))
		case '@':
			dst = append(dst, byte(r.Uniform('a', 'z')))
		default:
			dst = append(dst, c)
		}
	}
	return dst
}

// Unique hands out pseudo-random uint32 values without repetition (a
// permutation of the 2^32 values, walked from a seeded start). It is safe
// for concurrent use.
type Unique struct {
	index  atomic.Uint32
	offset uint32
}

// NewUnique returns a sequence seeded with index and offset.
func NewUnique(index, offset uint32) *Unique {
	u := &Unique{offset: permute(permute(offset) + 0x46790905)}
	u.index.Store(permute(permute(index) + 0x682f0161))
	return u
}

// Next returns the next value of the sequence.
func (u *Unique) Next() uint32 {
	i := u.index.Add(1) - 1
	return permute((permute(i) + u.offset) ^ 0x5bf03635)
}

// permute is a bijection on uint32 built from quadratic residues modulo
// the largest 32-bit prime; the five values at or above the prime map to
// themselves.
func permute(x uint32) uint32 {
	const prime = 4294967291
	if x >= prime {
		return x
	}
	residue := uint32(uint64(x) * uint64(x) % prime)
	if x <= prime/2 {
		return residue
	}
	return prime - residue
}
