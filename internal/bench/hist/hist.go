package hist

import (
	"fmt"
	"io"
	"math"
	"strings"
)

// Geometry of the histogram, as sysbench defines it.
const (
	Size  = 1024 // number of buckets
	MinMS = 1e-3 // value of the first bucket, in milliseconds
	MaxMS = 1e5  // value of the last bucket, in milliseconds
)

var (
	deduct = math.Log(MinMS)
	mult   = (Size - 1) / (math.Log(MaxMS) - math.Log(MinMS))
)

// Log counts latencies in logarithmic buckets. The zero value is empty and
// ready to use.
type Log struct {
	counts [Size]uint64
	n      uint64
}

// Index returns the bucket a latency of ms milliseconds falls in. NaN,
// zero and negative values fall in bucket 0.
func Index(ms float64) int {
	if !(ms > 0) {
		return 0
	}
	i := math.Floor((math.Log(ms)-deduct)*mult + 0.5)
	if i < 0 {
		return 0
	}
	if i >= Size {
		return Size - 1
	}
	return int(i)
}

// Value returns the latency in milliseconds that bucket i stands for.
func Value(i int) float64 {
	return math.Exp(float64(i)/mult + deduct)
}

// Record counts one latency of ms milliseconds.
func (h *Log) Record(ms float64) {
	h.counts[Index(ms)]++
	h.n++
}

// Count returns the number of latencies recorded.
func (h *Log) Count() uint64 { return h.n }

// Merge adds o's counts to h.
func (h *Log) Merge(o *Log) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
}

// Reset empties h.
func (h *Log) Reset() { *h = Log{} }

// Percentile returns the p-th percentile (0 < p <= 100) in milliseconds
// the way sysbench computes it: the value of the first bucket at which the
// running count reaches round(n*p/100). An empty histogram returns the value
// of bucket 0, which prints as 0.00.
func (h *Log) Percentile(p float64) float64 {
	nmax := uint64(math.Floor(float64(h.n)*p/100 + 0.5))
	var cur uint64
	i := 0
	for ; i < Size; i++ {
		cur += h.counts[i]
		if cur >= nmax {
			break
		}
	}
	if i == Size {
		i = Size - 1
	}
	return Value(i)
}

// Bucket is one non-empty bucket of a Log.
type Bucket struct {
	ValueMS float64 // latency the bucket stands for, in milliseconds
	Count   uint64  // latencies counted in it
}

// Buckets returns the non-empty buckets in increasing order of value.
func (h *Log) Buckets() []Bucket {
	var out []Bucket
	for i, c := range h.counts {
		if c > 0 {
			out = append(out, Bucket{ValueMS: Value(i), Count: c})
		}
	}
	return out
}

// WriteTo prints h the way sysbench --histogram does: a header line, then
// one line per non-empty bucket with its value, a bar of up to 40 stars
// scaled to the fullest bucket, and its count. An empty histogram prints
// nothing.
func (h *Log) WriteTo(w io.Writer) (int64, error) {
	var maxc uint64
	for _, c := range h.counts {
		maxc = max(maxc, c)
	}
	if maxc == 0 {
		return 0, nil
	}
	var b strings.Builder
	b.WriteString("       value  ------------- distribution ------------- count\n")
	const stars = "****************************************"
	for i, c := range h.counts {
		if c == 0 {
			continue
		}
		width := int(math.Floor(float64(c)*40/float64(maxc) + 0.5))
		fmt.Fprintf(&b, "%12.3f |%-40s %d\n", Value(i), stars[:width], c)
	}
	n, err := io.WriteString(w, b.String())
	return int64(n), err
}
