package testenv

import (
	"slices"
	"testing"
)

// SteadyCounts checks counters that must grow by the same amount at
// every step: step runs the same request once and returns the counters
// read right after its answer (a session's statements and bytes, as a
// view shows them). It runs step warm times (what a first use prepares
// or pairs), twice more to learn each counter's increment, which must
// be positive, then n times, and fails t at the first step where a
// counter is not its start plus that many increments. It returns the
// increments.
func SteadyCounts(t testing.TB, warm, n int, step func() []int64) []int64 {
	t.Helper()
	for range warm {
		step()
	}
	base := step()
	next := step()
	per := make([]int64, len(base))
	for i := range base {
		if per[i] = next[i] - base[i]; per[i] <= 0 {
			t.Fatalf("one step moved the counters by %v; want every one to grow", per)
		}
	}
	want := make([]int64, len(base))
	for k := int64(2); k < int64(n)+2; k++ {
		got := step()
		for i := range base {
			want[i] = base[i] + k*per[i]
		}
		if !slices.Equal(got, want) {
			t.Fatalf("after %d steps the counters read %v, want %v", k, got, want)
		}
	}
	return per
}
