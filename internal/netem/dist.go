package netem

import "math"

// qMax is the largest |q| netem's tables hold: int16 entries scaled by
// NETEM_DIST_SCALE (8192).
const qMax = 32767.0 / 8192.0

// quantile maps a standard normal score z to the distribution's scaled
// inverse CDF at u = Φ(z). Working from z keeps Normal exact and lets the
// correlation run on normal scores (see corrCoef).
func quantile(d Distribution, z float64) float64 {
	switch d {
	case Normal:
		return clampQ(z)
	case Pareto:
		return paretoQ(z)
	case ParetoNormal:
		return clampQ((clampQ(z) + 3*paretoQ(z)) / 4)
	default: // Uniform
		return math.Erf(z / math.Sqrt2) // 2Φ(z) - 1
	}
}

// paretoQ is netem's pareto table at u = Φ(z): a Pareto variate of shape 3
// and scale 1 (mean 1.5, variance 3/4), shifted by -1.5 and scaled by 4/3,
// then clipped at qMax.
func paretoQ(z float64) float64 {
	tail := 0.5 * math.Erfc(z/math.Sqrt2) // 1 - Φ(z), exact in the upper tail
	if tail <= 0 {
		return qMax
	}
	return math.Min((math.Pow(tail, -1.0/3)-1.5)*4/3, qMax)
}

func clampQ(q float64) float64 { return math.Max(-qMax, math.Min(q, qMax)) }

// corrCoef converts a correlation of uniform variates (netem's definition)
// into the coefficient of the AR(1) process on normal scores that produces
// it: for a bivariate normal with correlation r, Φ(Z1) and Φ(Z2) have
// correlation (6/π)·asin(r/2), so r = 2·sin(π·ρ/6).
// ρ = 1 maps to exactly 1, which freezes the process.
func corrCoef(rho float64) float64 {
	if rho >= 1 {
		return 1
	}
	return math.Min(2*math.Sin(math.Pi*rho/6), 1)
}
