package budget

import (
	"slices"
	"testing"
)

func TestMaxMin(t *testing.T) {
	for _, tt := range []struct {
		name   string
		budget int64
		wants  []int64
		max    []int64 // MaxMin
		fill   []int64 // Fill
	}{
		{"none", 30, nil, []int64{}, []int64{}},
		{"one backlogged", 30, []int64{100}, []int64{30}, []int64{30}},
		{"one small", 30, []int64{10}, []int64{10}, []int64{30}},
		{"two equal", 30, []int64{30, 30}, []int64{15, 15}, []int64{15, 15}},
		{"small one keeps its want", 30, []int64{5, 30, 30}, []int64{5, 12, 13}, []int64{5, 12, 13}},
		{"all under", 30, []int64{5, 10, 6}, []int64{5, 10, 6}, []int64{8, 13, 9}},
		{"idle ones", 30, []int64{0, 100, 0}, []int64{0, 30, 0}, []int64{0, 30, 0}},
		{"negative", 30, []int64{-5, 40}, []int64{0, 30}, []int64{0, 30}},
		{"zero budget", 0, []int64{10, 10}, []int64{0, 0}, []int64{0, 0}},
		{"water levels", 100, []int64{10, 20, 50, 60}, []int64{10, 20, 35, 35}, []int64{10, 20, 35, 35}},
	} {
		got := MaxMin(tt.budget, tt.wants)
		if !slices.Equal(got, tt.max) {
			t.Errorf("%s: MaxMin(%d, %v) = %v, want %v", tt.name, tt.budget, tt.wants, got, tt.max)
		}
		checkShare(t, tt.name, tt.budget, tt.wants, got)
		fill := Fill(tt.budget, tt.wants)
		if !slices.Equal(fill, tt.fill) {
			t.Errorf("%s: Fill(%d, %v) = %v, want %v", tt.name, tt.budget, tt.wants, fill, tt.fill)
		}
		var sum int64
		for _, g := range fill {
			sum += g
		}
		if len(tt.wants) > 0 && tt.budget > 0 && sum != tt.budget {
			t.Errorf("%s: Fill sums to %d, want %d", tt.name, sum, tt.budget)
		}
	}
}

// checkShare checks the max-min properties: no one above its want, the
// sum within budget, and whoever gets less than its want gets at least
// as much as anyone else (nothing could be moved to it).
func checkShare(t *testing.T, name string, budget int64, wants, got []int64) {
	t.Helper()
	var sum, top int64
	for i, g := range got {
		if g > max(wants[i], 0) || g < 0 {
			t.Errorf("%s: share %d of want %d", name, g, wants[i])
		}
		sum += g
		top = max(top, g)
	}
	if sum > max(budget, 0) {
		t.Errorf("%s: shares sum to %d over budget %d", name, sum, budget)
	}
	for i, g := range got {
		if g < wants[i] && g < top-int64(len(got)) {
			t.Errorf("%s: share %d of want %d below the level %d", name, g, wants[i], top)
		}
	}
}

func FuzzMaxMin(f *testing.F) {
	f.Add(int64(30_000_000), int64(1), int64(40_000_000), int64(0))
	f.Add(int64(7), int64(3), int64(3), int64(3))
	f.Fuzz(func(t *testing.T, budget, a, b, c int64) {
		if budget > 1<<50 || a > 1<<50 || b > 1<<50 || c > 1<<50 {
			return // beyond any rate: nothing to check
		}
		wants := []int64{a, b, c}
		checkShare(t, "fuzz", budget, wants, MaxMin(budget, wants))
		fill := Fill(budget, wants)
		var sum int64
		for _, g := range fill {
			sum += g
		}
		if budget > 0 && sum != budget {
			t.Errorf("Fill(%d, %v) = %v sums to %d", budget, wants, fill, sum)
		}
	})
}
