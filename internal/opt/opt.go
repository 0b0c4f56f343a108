package opt

// Number is what Positive accepts: counts, sizes, durations and
// fractions.
type Number interface {
	~int | ~int32 | ~int64 | ~float64
}

// Positive returns v if it is above zero and def otherwise.
func Positive[T Number](v, def T) T {
	if v > 0 {
		return v
	}
	return def
}
