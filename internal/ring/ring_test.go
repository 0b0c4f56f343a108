package ring

import (
	"slices"
	"testing"
)

// TestRing adds 1, 2, ... 9 to rings of size 1 to 4 and checks after
// each Add that the ring holds the last Size values, oldest first.
func TestRing(t *testing.T) {
	for size := 1; size <= 4; size++ {
		r := Ring[int]{Size: size}
		if got := r.All(); len(got) != 0 || r.Len() != 0 {
			t.Fatalf("size %d: empty ring holds %v (Len %d)", size, got, r.Len())
		}
		for v := 1; v <= 9; v++ {
			r.Add(v)
			var want []int
			for w := max(1, v-size+1); w <= v; w++ {
				want = append(want, w)
			}
			if got := r.All(); !slices.Equal(got, want) || r.Len() != len(want) {
				t.Fatalf("size %d, after adding %d: All = %v (Len %d), want %v", size, v, got, r.Len(), want)
			}
		}
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
