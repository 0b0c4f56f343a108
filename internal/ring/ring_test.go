package ring

import (
	"slices"
	"testing"
)

func TestRing(t *testing.T) {
	for _, tc := range []struct {
		name string
		size int
		add  []int
		want []int
	}{
		{"empty", 3, nil, []int{}},
		{"not full", 3, []int{1, 2}, []int{1, 2}},
		{"full", 3, []int{1, 2, 3}, []int{1, 2, 3}},
		{"wrapped once", 3, []int{1, 2, 3, 4}, []int{2, 3, 4}},
		{"wrapped twice", 3, []int{1, 2, 3, 4, 5, 6, 7}, []int{5, 6, 7}},
		{"size one", 1, []int{1, 2, 3}, []int{3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Ring[int]{Size: tc.size}
			for _, v := range tc.add {
				r.Add(v)
			}
			if got := r.All(); !slices.Equal(got, tc.want) {
				t.Errorf("All = %v, want %v", got, tc.want)
			}
			if r.Len() != len(tc.want) {
				t.Errorf("Len = %d, want %d", r.Len(), len(tc.want))
			}
		})
	}
}

// TestAllIsACopy: changing what All returned leaves the ring as it was.
func TestAllIsACopy(t *testing.T) {
	r := Ring[int]{Size: 2}
	r.Add(1)
	r.Add(2)
	r.All()[0] = 9
	if got := r.All(); !slices.Equal(got, []int{1, 2}) {
		t.Errorf("All = %v after a change to a copy", got)
	}
}
