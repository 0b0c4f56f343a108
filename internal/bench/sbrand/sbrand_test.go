package sbrand

import (
	"math"
	"testing"
)

func TestDistributionsStayInRange(t *testing.T) {
	ranges := []struct{ a, b uint32 }{{1, 1}, {1, 10}, {1, 10000}, {0, 1}, {100, 1000000}}
	for _, d := range []Dist{Special, Uniform, Gaussian, Pareto} {
		cfg := DefaultConfig()
		cfg.Dist = d
		r := New(42, cfg)
		for _, rg := range ranges {
			for i := 0; i < 20000; i++ {
				v := r.Default(rg.a, rg.b)
				if v < rg.a || v > rg.b {
					t.Fatalf("%v: Default(%d, %d) = %d, out of range", d, rg.a, rg.b, v)
				}
			}
		}
	}
}

func TestUniformCoversRange(t *testing.T) {
	r := New(7, DefaultConfig())
	var seen [10]int
	for i := 0; i < 100000; i++ {
		seen[r.Uniform(0, 9)]++
	}
	for v, n := range seen {
		if n < 9000 || n > 11000 {
			t.Fatalf("value %d drawn %d times of 100000, want about 10000", v, n)
		}
	}
}

func TestSpecialHotSpot(t *testing.T) {
	// With the defaults, 75% of the draws fall in the central 1% of the range.
	r := New(1, DefaultConfig())
	const n = 200000
	hot := 0
	for i := 0; i < n; i++ {
		v := r.Special(1, 100000)
		if v >= 49500 && v <= 50501 {
			hot++
		}
	}
	frac := float64(hot) / n
	if frac < 0.74 || frac > 0.78 {
		t.Fatalf("hot fraction = %.3f, want about 0.75 (plus the gaussian share)", frac)
	}
}

func TestParetoSkew(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Dist = Pareto
	r := New(3, cfg)
	low := 0
	for i := 0; i < 100000; i++ {
		if r.Default(1, 1000) <= 200 {
			low++
		}
	}
	// h = 0.2: 80% of the draws land in the first 20% of the range.
	if low < 78000 || low > 82000 {
		t.Fatalf("draws in the first 20%% = %d of 100000, want about 80000", low)
	}
}

func TestSameSeedSameSequence(t *testing.T) {
	a, b := New(99, DefaultConfig()), New(99, DefaultConfig())
	for i := 0; i < 1000; i++ {
		if x, y := a.Default(1, 1000000), b.Default(1, 1000000); x != y {
			t.Fatalf("draw %d: %d != %d", i, x, y)
		}
	}
	if New(1, DefaultConfig()).Uint64() == New(2, DefaultConfig()).Uint64() {
		t.Fatal("different seeds gave the same first value")
	}
}

func TestDegenerateConfigsDoNotPanic(t *testing.T) {
	cfgs := []Config{
		{Dist: Special, SpecIter: 0, SpecPct: 0, SpecRes: 100, ParetoH: 0},
		{Dist: Gaussian, SpecIter: 0},
		{Dist: Pareto, ParetoH: 1},
		{Dist: Special, SpecIter: 12, SpecPct: 100, SpecRes: 0, ParetoH: 0.5},
	}
	for _, cfg := range cfgs {
		r := New(5, cfg)
		for i := 0; i < 100; i++ {
			r.Default(10, 1)
			r.Default(0, math.MaxUint32)
			r.Default(5, 5)
		}
	}
}

func TestAppendString(t *testing.T) {
	r := New(11, DefaultConfig())
	tmpl := "###########-@@@@-x"
	got := r.AppendString([]byte("p:"), tmpl)
	if len(got) != 2+len(tmpl) || string(got[:2]) != "p:" {
		t.Fatalf("got %q", got)
	}
	for i, c := range []byte(tmpl) {
		g := got[2+i]
		switch c {
		case '#':
			if g < '0' || g > '9' {
				t.Fatalf("position %d: %q is not a digit", i, g)
			}
		case '@':
			if g < 'a' || g > 'z' {
				t.Fatalf("position %d: %q is not a letter", i, g)
			}
		default:
			if g != c {
				t.Fatalf("position %d: %q, want %q", i, g, c)
			}
		}
	}
}

func TestUniqueDoesNotRepeat(t *testing.T) {
	u := NewUnique(12345, 678)
	seen := make(map[uint32]bool, 200000)
	for i := 0; i < 200000; i++ {
		v := u.Next()
		if seen[v] {
			t.Fatalf("value %d repeated after %d draws", v, i)
		}
		seen[v] = true
	}
}

func TestPermuteIsBijectiveOnSample(t *testing.T) {
	seen := make(map[uint32]uint32)
	for _, base := range []uint32{0, 1 << 20, 4294967291 / 2, 4294967291 - 5000, math.MaxUint32 - 3000} {
		for x := base; x < base+3000; x++ {
			y := permute(x)
			if prev, ok := seen[y]; ok && prev != x {
				t.Fatalf("permute(%d) = permute(%d) = %d", x, prev, y)
			}
			seen[y] = x
		}
	}
}

func TestParseDist(t *testing.T) {
	for _, d := range []Dist{Special, Uniform, Gaussian, Pareto} {
		got, err := ParseDist(d.String())
		if err != nil || got != d {
			t.Fatalf("ParseDist(%q) = %v, %v", d.String(), got, err)
		}
	}
	for _, s := range []string{"", "zipfian", "Uniform", "special "} {
		if _, err := ParseDist(s); err == nil {
			t.Fatalf("ParseDist(%q) accepted", s)
		}
	}
}

func FuzzParseDist(f *testing.F) {
	for _, s := range []string{"special", "uniform", "gaussian", "pareto", "", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDist(s)
		if err == nil && d.String() != s {
			t.Fatalf("ParseDist(%q) = %v", s, d)
		}
	})
}

func BenchmarkSpecial(b *testing.B) {
	r := New(1, DefaultConfig())
	b.ReportAllocs()
	var sink uint32
	for i := 0; i < b.N; i++ {
		sink += r.Special(1, 100000)
	}
	_ = sink
}

func BenchmarkAppendString(b *testing.B) {
	r := New(1, DefaultConfig())
	buf := make([]byte, 0, 128)
	const tmpl = "###########-###########-###########-###########-###########-###########-###########-###########-###########-###########"
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		buf = r.AppendString(buf[:0], tmpl)
	}
}
