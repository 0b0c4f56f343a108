package netem

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/sluicelab/sluice/internal/enum"
)

// Model constants.
const (
	// MSS is the segment size, in bytes, that losses are counted in: a chunk
	// of n bytes is ceil(n/MSS) segments, each lost with the loss model's
	// probability (1448 is the payload of a 1500-byte Ethernet frame with
	// TCP timestamps).
	MSS = 1448

	// DefaultWindow is the window, in bytes, used when Params.Window is 0.
	DefaultWindow = 4 << 20

	// MinRTO is the floor of the default retransmission timeout, Linux's
	// tcp_rto_min.
	MinRTO = 200 * time.Millisecond
)

// Distribution is the shape of the delay spread. Each is netem's table of
// the same name, computed from its definition instead of read from a table:
// a sample is Delay + Jitter·q(u), where u is uniform on (0, 1) and q is
// the distribution's scaled inverse CDF:
//
//	Uniform       q(u) = 2u - 1                      (mean 0, stddev 1/√3)
//	Normal        q(u) = Φ⁻¹(u)                      (mean 0, stddev 1)
//	Pareto        q(u) = ((1-u)^(-1/3) - 1.5)·4/3    (shape 3, shifted to mean 0)
//	ParetoNormal  q(u) = (Φ⁻¹(u) + 3·Pareto(u)) / 4
//
// q is clipped to [-32767/8192, +32767/8192] (about ±4), the range netem's
// 16-bit tables can hold; so Pareto's clipped mean is -0.0329 and its
// stddev 0.8209, not 0 and 1.
type Distribution uint8

// The delay distributions. Uniform is the zero value and what the netem
// qdisc uses when no table is loaded.
const (
	Uniform Distribution = iota
	Normal
	Pareto
	ParetoNormal
)

var distributionNames = [...]string{
	Uniform:      "uniform",
	Normal:       "normal",
	Pareto:       "pareto",
	ParetoNormal: "paretonormal",
}

// String returns the distribution's name as ParseDistribution accepts it,
// or "Distribution(N)" for an unknown value.
func (d Distribution) String() string {
	return enum.Name(distributionNames[:], int(d), "Distribution")
}

// ParseDistribution parses "uniform", "normal", "pareto" or "paretonormal"
// (case-insensitive, surrounding spaces ignored).
func ParseDistribution(s string) (Distribution, error) {
	if i, ok := enum.Index(distributionNames[:], s, true); ok {
		return Distribution(i), nil
	}
	return 0, fmt.Errorf("netem: unknown distribution %q (want uniform, normal, pareto or paretonormal)", s)
}

// MarshalText implements encoding.TextMarshaler.
func (d Distribution) MarshalText() ([]byte, error) {
	if int(d) >= len(distributionNames) {
		return nil, fmt.Errorf("netem: unknown distribution %d", uint8(d))
	}
	return []byte(d.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler with ParseDistribution.
func (d *Distribution) UnmarshalText(b []byte) error { return unmarshalText(d, b, ParseDistribution) }

// unmarshalText sets *dst to what parse reads in b, or leaves it and
// returns parse's error.
func unmarshalText[T any](dst *T, b []byte, parse func(string) (T, error)) error {
	v, err := parse(string(b))
	if err != nil {
		return err
	}
	*dst = v
	return nil
}

// LossKind selects the loss process.
type LossKind uint8

// The loss processes.
const (
	// Bernoulli loses each segment independently with probability
	// Params.Loss. It is the zero value.
	Bernoulli LossKind = iota
	// GilbertElliott loses segments in bursts: a two-state Markov chain
	// (good, bad) steps once per segment, as netem's "loss gemodel".
	GilbertElliott
)

// String returns "bernoulli" or "gemodel" (netem's name), or
// "LossKind(N)" for an unknown value.
func (k LossKind) String() string {
	return enum.Name(lossKindNames, int(k), "LossKind")
}

var lossKindNames = []string{Bernoulli: "bernoulli", GilbertElliott: "gemodel"}

// ParseLossKind parses a loss model name, case-insensitive: "bernoulli" or
// "random" (netem's name) for Bernoulli, "gemodel", "gilbert-elliott" or
// "gilbertelliott" for GilbertElliott.
func ParseLossKind(s string) (LossKind, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "bernoulli", "random":
		return Bernoulli, nil
	case "gemodel", "gilbert-elliott", "gilbertelliott":
		return GilbertElliott, nil
	}
	return 0, fmt.Errorf("netem: unknown loss model %q (want bernoulli or gemodel)", s)
}

// MarshalText implements encoding.TextMarshaler.
func (k LossKind) MarshalText() ([]byte, error) {
	if k > GilbertElliott {
		return nil, fmt.Errorf("netem: unknown loss model %d", uint8(k))
	}
	return []byte(k.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler with ParseLossKind.
func (k *LossKind) UnmarshalText(b []byte) error { return unmarshalText(k, b, ParseLossKind) }

// LossModel selects and parameterises the loss process. The zero value is
// Bernoulli with Params.Loss.
//
// For GilbertElliott every segment is lost with the loss probability of the
// current state, then the chain moves (good to bad with probability P, bad
// to good with probability R). The long-run loss rate is
// (R·GoodLoss + P·BadLoss) / (P + R) and a stay in the bad state lasts 1/R
// segments on average. All probabilities are per segment, in [0, 1].
type LossModel struct {
	Kind LossKind
	// P is the probability of moving from good to bad (GilbertElliott only).
	P float64
	// R is the probability of moving from bad to good (GilbertElliott only);
	// 0 means 1-P, netem's default when only P is given.
	R float64
	// BadLoss is the loss probability in the bad state (netem's 1-h); 0
	// means 1, netem's default.
	BadLoss float64
	// GoodLoss is the loss probability in the good state (netem's 1-k).
	GoodLoss float64
}

// Params describes one direction of an emulated path. The zero value
// emulates nothing (see IsZero). Negative durations and sizes count as
// zero and probabilities are clamped to [0, 1] where they are used;
// Validate reports them instead.
type Params struct {
	// Delay is the one-way delay (netem semantics: a delay of d adds 2d to a
	// round trip when both directions have it).
	Delay time.Duration
	// Jitter is the spread of the delay: a sample, drawn once per chunk
	// (Release call), is Delay + Jitter·q(u) with q given by Distribution,
	// clamped at 0. 0 means no spread.
	Jitter time.Duration
	// Distribution is the shape of the spread; the zero value is Uniform.
	Distribution Distribution
	// Correlation, in [0, 1], is how much a delay sample depends on the
	// previous one: the lag-1 correlation of the uniform variates u behind
	// successive samples, as netem defines it, which makes it the rank
	// correlation of successive delays (their plain correlation is within
	// 0.03 of it for Uniform and Normal and up to about 0.07 lower for the
	// skewed Pareto shapes). Unlike netem's, the samples keep exactly the
	// configured distribution at any correlation. 1 freezes the spread.
	Correlation float64
	// Rate limits the flow to Rate bytes per second with a token bucket of
	// Burst bytes; 0 means unlimited.
	Rate int64
	// Burst is the token bucket size in bytes: how many bytes the rate lets
	// through at once after the flow was idle. 0 means one millisecond of
	// Rate, at least one MSS.
	Burst int64
	// Loss is the per-segment loss probability of the Bernoulli model, in
	// [0, 1]; GilbertElliott ignores it. A loss never drops bytes: it
	// stalls the flow for RTO.
	Loss float64
	// LossModel selects Bernoulli (the zero value) or Gilbert-Elliott.
	LossModel LossModel
	// RTO is the stall per lost segment (a retransmission is never lost
	// again). 0 means Linux's retransmission
	// timeout for a steady round trip of 2·Delay: 2·Delay + max(MinRTO,
	// 8·Jitter) (SRTT + max(rto_min, 4·RTTVAR), taking RTTVAR as 2·Jitter).
	RTO time.Duration
	// Window is how many bytes of the flow may be in flight on the path,
	// from the write until the acknowledgement is back; 0 means
	// DefaultWindow. One flow's throughput is at most Window / RTT.
	Window int64
	// Seed seeds the random generators of every Path made with these
	// Params; with the same Seed, per-flow seed and input, a Path repeats
	// exactly.
	Seed int64
}

// IsZero reports whether p emulates nothing: no delay, no jitter, no rate
// and no loss. The caller may then bypass emulation entirely; the Window
// alone is not emulated, because with no delay in this direction it can
// only bind through the reverse direction's delay.
func (p Params) IsZero() bool {
	return p.Delay <= 0 && p.Jitter <= 0 && p.Rate <= 0 && !p.lossy()
}

func (p Params) lossy() bool {
	r := p.WithDefaults()
	if r.LossModel.Kind == GilbertElliott {
		m := r.LossModel
		return m.GoodLoss > 0 || (m.P > 0 && m.BadLoss > 0)
	}
	return r.Loss > 0
}

// WithDefaults returns p with every zero meaning a default replaced by the
// default it stands for (Burst when Rate is set, RTO, Window, R and BadLoss
// of a Gilbert-Elliott model) and out-of-range values clamped; it is what
// a Path actually applies.
func (p Params) WithDefaults() Params {
	r := p
	r.Delay = max(r.Delay, 0)
	r.Jitter = max(r.Jitter, 0)
	r.Correlation = clamp01(r.Correlation)
	r.Loss = clamp01(r.Loss)
	r.Rate = max(r.Rate, 0)
	r.Burst = max(r.Burst, 0)
	if r.Rate > 0 && r.Burst == 0 {
		r.Burst = max(r.Rate/1000, MSS)
	}
	if r.RTO <= 0 {
		r.RTO = 2*r.Delay + max(MinRTO, 8*r.Jitter)
	}
	if r.Window <= 0 {
		r.Window = DefaultWindow
	}
	m := &r.LossModel
	m.P = clamp01(m.P)
	m.R = clamp01(m.R)
	m.BadLoss = clamp01(m.BadLoss)
	m.GoodLoss = clamp01(m.GoodLoss)
	if m.R == 0 {
		m.R = 1 - m.P
	}
	if m.BadLoss == 0 {
		m.BadLoss = 1
	}
	return r
}

// MaxDelay is the longest delay, jitter or rto Validate accepts: a
// minute, far above any real path's, so that a mistyped value ('1000000h')
// is refused rather than holding every byte of a link for years.
const MaxDelay = time.Minute

// Validate reports the first out-of-range setting: a duration above
// MaxDelay, a negative duration or size, a probability or correlation
// outside [0, 1] (or NaN), or an unknown Distribution or LossKind.
func (p Params) Validate() error {
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"delay", p.Delay}, {"jitter", p.Jitter}, {"rto", p.RTO}} {
		if d.v > MaxDelay {
			return fmt.Errorf("netem: %s %v is above the maximum %v", d.name, d.v, MaxDelay)
		}
	}
	signed := []struct {
		name     string
		v        any // a time.Duration or an int64
		negative bool
	}{
		{"delay", p.Delay, p.Delay < 0}, {"jitter", p.Jitter, p.Jitter < 0}, {"rto", p.RTO, p.RTO < 0},
		{"rate", p.Rate, p.Rate < 0}, {"burst", p.Burst, p.Burst < 0}, {"window", p.Window, p.Window < 0},
	}
	for _, s := range signed {
		if s.negative {
			return fmt.Errorf("netem: %s %v is negative", s.name, s.v)
		}
	}
	probs := []struct {
		name string
		v    float64
	}{
		{"correlation", p.Correlation}, {"loss", p.Loss},
		{"gemodel p", p.LossModel.P}, {"gemodel r", p.LossModel.R},
		{"gemodel bad-state loss", p.LossModel.BadLoss},
		{"gemodel good-state loss", p.LossModel.GoodLoss},
	}
	for _, q := range probs {
		if !(q.v >= 0 && q.v <= 1) {
			return fmt.Errorf("netem: %s %v is outside [0, 1]", q.name, q.v)
		}
	}
	if int(p.Distribution) >= len(distributionNames) {
		return fmt.Errorf("netem: unknown distribution %d", uint8(p.Distribution))
	}
	if p.LossModel.Kind > GilbertElliott {
		return fmt.Errorf("netem: unknown loss model %d", uint8(p.LossModel.Kind))
	}
	return nil
}

// clamp01 clamps v to [0, 1]; NaN becomes 0.
func clamp01(v float64) float64 {
	if !(v > 0) {
		return 0
	}
	return math.Min(v, 1)
}
