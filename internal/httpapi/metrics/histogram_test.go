package metrics

import (
	"testing"
	"time"

	"github.com/sluicelab/sluice/internal/link"
)

// TestHistogram checks the conversion of a link histogram (counts per
// bucket) into Prometheus's cumulative buckets in seconds.
func TestHistogram(t *testing.T) {
	var h link.Histogram
	h.Counts[0] = 2                      // <= 50us
	h.Counts[4] = 3                      // <= 1ms
	h.Counts[link.NumDelayBuckets-1] = 1 // > 5s
	h.Sum = 7 * time.Second
	n, sum, b := histogram(h)
	if n != 6 || sum != 7 {
		t.Fatalf("count %d sum %v, want 6 and 7", n, sum)
	}
	if len(b) != link.NumDelayBuckets-1 {
		t.Fatalf("%d buckets", len(b))
	}
	want := map[float64]uint64{50e-6: 2, 100e-6: 2, 0.001: 5, 0.0025: 5, 5: 5}
	for le, c := range want {
		if b[le] != c {
			t.Errorf("bucket le=%v: %d, want %d", le, b[le], c)
		}
	}
}
