package hist

import (
	"fmt"
	"math"
	"strings"
	"testing"
)

func TestIndexBounds(t *testing.T) {
	tests := []struct {
		ms   float64
		want int
	}{
		{0, 0},
		{-1, 0},
		{math.NaN(), 0},
		{MinMS, 0},
		{MinMS / 10, 0},
		{MaxMS, Size - 1},
		{MaxMS * 10, Size - 1},
		{math.Inf(1), Size - 1},
	}
	for _, tt := range tests {
		if got := Index(tt.ms); got != tt.want {
			t.Errorf("Index(%v) = %d, want %d", tt.ms, got, tt.want)
		}
	}
}

func TestValueRoundTrip(t *testing.T) {
	for i := 0; i < Size; i++ {
		if got := Index(Value(i)); got != i {
			t.Fatalf("Index(Value(%d)) = %d", i, got)
		}
	}
	// Buckets are about 1.8% apart, so a value is within 1% of its bucket.
	for _, ms := range []float64{0.05, 0.8, 1.96, 21.89, 1004.25} {
		v := Value(Index(ms))
		if math.Abs(v-ms)/ms > 0.01 {
			t.Errorf("bucket value %v for %v", v, ms)
		}
	}
}

func TestPercentileMatchesSysbenchBuckets(t *testing.T) {
	// sysbench prints bucket values; these are values seen in its reports.
	for _, printed := range []string{"0.80", "1.96", "2.14", "21.89"} {
		var ms float64
		fmt.Sscan(printed, &ms)
		var h Log
		h.Record(ms)
		if got := fmt.Sprintf("%.2f", h.Percentile(95)); got != printed {
			t.Errorf("95th of {%v} prints %s, want %s", ms, got, printed)
		}
	}
}

func TestPercentileRank(t *testing.T) {
	var h Log
	for i := 1; i <= 100; i++ {
		h.Record(float64(i))
	}
	if got := h.Percentile(95); math.Abs(got-95) > 1 {
		t.Fatalf("95th = %v, want about 95", got)
	}
	if got := h.Percentile(100); math.Abs(got-100) > 1 {
		t.Fatalf("100th = %v", got)
	}
	var empty Log
	if got := fmt.Sprintf("%.2f", empty.Percentile(95)); got != "0.00" {
		t.Fatalf("empty 95th prints %s", got)
	}
}

func TestMergeAndReset(t *testing.T) {
	var a, b Log
	a.Record(1)
	b.Record(1)
	b.Record(50)
	a.Merge(&b)
	if a.Count() != 3 {
		t.Fatalf("count = %d", a.Count())
	}
	bk := a.Buckets()
	if len(bk) != 2 || bk[0].Count != 2 || bk[1].Count != 1 {
		t.Fatalf("buckets = %+v", bk)
	}
	a.Reset()
	if a.Count() != 0 || len(a.Buckets()) != 0 {
		t.Fatal("reset left data")
	}
}

func TestWriteTo(t *testing.T) {
	var h Log
	var sb strings.Builder
	if n, _ := h.WriteTo(&sb); n != 0 {
		t.Fatal("empty histogram printed")
	}
	for i := 0; i < 4; i++ {
		h.Record(2)
	}
	h.Record(10)
	h.WriteTo(&sb)
	lines := strings.Split(strings.TrimSuffix(sb.String(), "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("lines = %q", lines)
	}
	if lines[0] != "       value  ------------- distribution ------------- count" {
		t.Fatalf("header %q", lines[0])
	}
	want := fmt.Sprintf("%12.3f |%-40s %d", Value(Index(2)), strings.Repeat("*", 40), 4)
	if lines[1] != want {
		t.Fatalf("line %q, want %q", lines[1], want)
	}
	want = fmt.Sprintf("%12.3f |%-40s %d", Value(Index(10)), strings.Repeat("*", 10), 1)
	if lines[2] != want {
		t.Fatalf("line %q, want %q", lines[2], want)
	}
}

func BenchmarkRecord(b *testing.B) {
	var h Log
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		h.Record(float64(i%1000) * 0.01)
	}
}
