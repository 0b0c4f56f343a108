package netem

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

var t0 = time.Unix(1_700_000_000, 0)

// delaySamples returns n delay samples of a Path, one per chunk, with the
// chunks so far apart that ordering never holds one back.
func delaySamples(p Params, seed int64, n int) []float64 {
	path := NewPath(p, seed)
	out := make([]float64, n)
	for i := range out {
		arr := t0.Add(time.Duration(i) * time.Hour)
		out[i] = float64(path.Release(arr, 100).Sub(arr))
	}
	return out
}

func meanStd(xs []float64) (mean, std float64) {
	for _, x := range xs {
		mean += x
	}
	mean /= float64(len(xs))
	for _, x := range xs {
		std += (x - mean) * (x - mean)
	}
	return mean, math.Sqrt(std / float64(len(xs)-1))
}

// refMoments integrates the scaled inverse CDF of d over u in (0, 1).
func refMoments(d Distribution) (mean, std float64) {
	const n = 1 << 20
	var s, s2 float64
	for i := 0; i < n; i++ {
		u := (float64(i) + 0.5) / n
		q := quantile(d, math.Sqrt2*math.Erfinv(2*u-1))
		s += q
		s2 += q * q
	}
	mean = s / n
	return mean, math.Sqrt(s2/n - mean*mean)
}

func TestQuantileReference(t *testing.T) {
	// Closed forms: uniform on [-1, 1]; normal clipped at ±qMax; a shape-3
	// Pareto X clipped at c = 4.5 has E = 1.5 - 0.5/c² and E[X²] = 3 - 2/c,
	// and q = (X - 1.5)·4/3.
	c := 1.5 + 0.75*qMax
	pm := 1.5 - 0.5/(c*c)
	pv := 3 - 2/c - pm*pm
	tests := []struct {
		d          Distribution
		mean, std  float64
		tolM, tolS float64
	}{
		{Uniform, 0, 1 / math.Sqrt(3), 1e-6, 1e-5},
		{Normal, 0, 1, 1e-6, 1e-3},
		{Pareto, (pm - 1.5) * 4 / 3, math.Sqrt(pv) * 4 / 3, 1e-3, 2e-3},
	}
	for _, tt := range tests {
		m, s := refMoments(tt.d)
		if math.Abs(m-tt.mean) > tt.tolM || math.Abs(s-tt.std) > tt.tolS {
			t.Errorf("%v: integrated mean %.5f std %.5f, closed form %.5f %.5f", tt.d, m, s, tt.mean, tt.std)
		}
	}
}

func TestDelayMoments(t *testing.T) {
	const n = 100_000
	delay, jitter := 50*time.Millisecond, 10*time.Millisecond
	for _, d := range []Distribution{Uniform, Normal, Pareto, ParetoNormal} {
		qm, qs := refMoments(d)
		for _, corr := range []float64{0, 0.5} {
			wantMean := float64(delay) + float64(jitter)*qm
			wantStd := float64(jitter) * qs
			xs := delaySamples(Params{Delay: delay, Jitter: jitter, Distribution: d, Correlation: corr, Seed: 11}, 1, n)
			mean, std := meanStd(xs)
			// Standard error of the mean, widened for the correlation.
			se := wantStd / math.Sqrt(n) * math.Sqrt((1+corr)/(1-corr))
			if math.Abs(mean-wantMean) > 5*se {
				t.Errorf("%v corr %v: mean %.4f ms, want %.4f ms ± %.4f", d, corr, mean/1e6, wantMean/1e6, 5*se/1e6)
			}
			if math.Abs(std-wantStd) > 0.02*wantStd {
				t.Errorf("%v corr %v: stddev %.4f ms, want %.4f ms ± 2%%", d, corr, std/1e6, wantStd/1e6)
			}
			lo := float64(delay) - qMax*float64(jitter) - 1
			hi := float64(delay) + qMax*float64(jitter) + 1
			if mn, mx := slices.Min(xs), slices.Max(xs); mn < lo || mx > hi {
				t.Errorf("%v: samples in [%v, %v], outside the table range [%v, %v]", d, mn, mx, lo, hi)
			}
		}
	}
}

func TestDelayClampedAtZero(t *testing.T) {
	xs := delaySamples(Params{Delay: time.Millisecond, Jitter: 10 * time.Millisecond, Distribution: Normal}, 1, 10_000)
	zeros := 0
	for _, x := range xs {
		if x < 0 {
			t.Fatalf("negative delay %v", x)
		}
		if x == 0 {
			zeros++
		}
	}
	// P(1 ms + 10 ms·Z <= 0) = Φ(-0.1) ≈ 0.46.
	if f := float64(zeros) / float64(len(xs)); math.Abs(f-0.46) > 0.03 {
		t.Errorf("fraction clamped to zero = %.3f, want about 0.46", f)
	}
}

func lag1(xs []float64) float64 {
	m, s := meanStd(xs)
	var c float64
	for i := 1; i < len(xs); i++ {
		c += (xs[i] - m) * (xs[i-1] - m)
	}
	return c / float64(len(xs)-1) / (s * s)
}

func ranks(xs []float64) []float64 {
	idx := make([]int, len(xs))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		switch {
		case xs[a] < xs[b]:
			return -1
		case xs[a] > xs[b]:
			return 1
		}
		return 0
	})
	r := make([]float64, len(xs))
	for rank, i := range idx {
		r[i] = float64(rank)
	}
	return r
}

func TestCorrelation(t *testing.T) {
	const n = 50_000
	for _, d := range []Distribution{Uniform, Normal, Pareto, ParetoNormal} {
		for _, rho := range []float64{0, 0.25, 0.5, 0.9} {
			xs := delaySamples(Params{Delay: 100 * time.Millisecond, Jitter: 20 * time.Millisecond, Distribution: d, Correlation: rho, Seed: 5}, 2, n)
			// netem's correlation is that of the uniform variates, which is
			// the rank correlation of the delays.
			if got := lag1(ranks(xs)); math.Abs(got-rho) > 0.02 {
				t.Errorf("%v rho %v: lag-1 rank correlation %.4f", d, rho, got)
			}
			// The plain correlation of the delays is close to it too; the
			// skewed Pareto shapes lower it by up to about 0.07.
			tol := 0.03
			if d == Pareto || d == ParetoNormal {
				tol = 0.1
			}
			if got := lag1(xs); math.Abs(got-rho) > tol {
				t.Errorf("%v rho %v: lag-1 correlation %.4f", d, rho, got)
			}
		}
	}
}

func TestCorrelationOneFreezes(t *testing.T) {
	xs := delaySamples(Params{Delay: 10 * time.Millisecond, Jitter: 5 * time.Millisecond, Correlation: 1}, 1, 100)
	for _, x := range xs[1:] {
		if x != xs[0] {
			t.Fatalf("correlation 1 varied the delay: %v then %v", xs[0], x)
		}
	}
}

func TestRateBulk(t *testing.T) {
	// 200 MB at 50 MB/s, offered all at once: the last byte leaves after
	// (200 MB - burst) / 50 MB/s, and no prefix ever beats the bucket.
	const total, chunk, rate = 200_000_000, 32 << 10, 50_000_000
	p := NewPath(Params{Rate: rate}, 0)
	burst := Params{Rate: rate}.WithDefaults().Burst
	var sent int64
	var last time.Time
	for sent < total {
		n := min(chunk, total-sent)
		last = p.Release(t0, int(n))
		sent += n
		if limit := float64(burst) + rate*last.Sub(t0).Seconds(); float64(sent) > limit+1 {
			t.Fatalf("%d bytes out by %v, bucket allows %.0f", sent, last.Sub(t0), limit)
		}
	}
	want := time.Duration((total - burst) * int64(time.Second) / rate)
	if got := last.Sub(t0); got != want {
		t.Fatalf("200 MB took %v, want %v", got, want)
	}
}

func TestRateOverTime(t *testing.T) {
	// Offered at 100 MB/s, shaped to 50 MB/s: every 100 ms window of
	// releases carries 5 MB, give or take a chunk.
	const rate, chunk = 50_000_000, 32 << 10
	p := NewPath(Params{Rate: rate, Delay: 5 * time.Millisecond}, 0)
	gap := time.Duration(chunk * int64(time.Second) / 100_000_000)
	perWindow := map[int64]int64{}
	for i := 0; i < 30_000; i++ {
		rel := p.Release(t0.Add(time.Duration(i)*gap), chunk)
		perWindow[int64(rel.Sub(t0)/(100*time.Millisecond))] += chunk
	}
	for w := int64(1); w < 15; w++ {
		if got := perWindow[w]; math.Abs(float64(got)-5e6) > chunk {
			t.Errorf("window %d: %d bytes, want 5 MB ± %d", w, got, chunk)
		}
	}
}

func TestBurst(t *testing.T) {
	const ms = time.Millisecond
	steps := []struct {
		at   time.Duration // arrival after t0
		n    int
		want time.Duration // release after t0
	}{
		{0, 10_000, 0},     // a full bucket passes the burst at once
		{0, 1_000, 1 * ms}, // then 1 MB/s: 1000 B take 1 ms
		{1 * ms, 500, 1500 * time.Microsecond},
		{100 * ms, 12_000, 102 * ms}, // refilled, capped at 10 kB: 2 kB over
		{102 * ms, 1, 102*ms + 1000}, // empty again: 1 B takes 1 µs
		{200 * ms, 9_999, 200 * ms},
	}
	p := NewPath(Params{Rate: 1_000_000, Burst: 10_000}, 0)
	for i, s := range steps {
		if got := p.Release(t0.Add(s.at), s.n).Sub(t0); got != s.want {
			t.Errorf("step %d: %d B at %v released at %v, want %v", i, s.n, s.at, got, s.want)
		}
	}
}

func TestDefaultBurst(t *testing.T) {
	// Rate 1 MB/s: the default burst is one MSS (1 ms of rate is less).
	p := NewPath(Params{Rate: 1_000_000}, 0)
	if got := p.Release(t0, MSS); !got.Equal(t0) {
		t.Errorf("one MSS from a full bucket released at +%v", got.Sub(t0))
	}
	if got := p.Release(t0, 1000); got.Sub(t0) != time.Millisecond {
		t.Errorf("next 1000 B released at +%v, want +1ms", got.Sub(t0))
	}
}

// TestWindowBound runs the window ledger and a Path as a Line does, for a
// bulk sender that always has data: each chunk arrives when the previous
// one was admitted.
func TestWindowBound(t *testing.T) {
	tests := []struct {
		name          string
		window, chunk int64
		delay, ack    time.Duration
		rate          int64
		want          float64 // bytes/s
	}{
		{"1MiB over 25ms each way", 1 << 20, 32 << 10, 25 * time.Millisecond, 25 * time.Millisecond, 0, (1 << 20) / 0.050},
		{"asymmetric 10ms+30ms", 256 << 10, 16 << 10, 10 * time.Millisecond, 30 * time.Millisecond, 0, (256 << 10) / 0.040},
		{"rate below window/rtt", 4 << 20, 32 << 10, 5 * time.Millisecond, 5 * time.Millisecond, 10e6, 10e6},
	}
	for _, tt := range tests {
		p := NewPath(Params{Delay: tt.delay, Rate: tt.rate, Window: tt.window}, 0)
		var f flight
		var seq uint64
		arrival := t0
		var total int64
		var last time.Time
		for total < 200<<20 {
			admit, k := f.admitAt(arrival, tt.chunk, tt.window)
			f.ack(k, admit, seq) // everything queued so far counts as passed on
			if f.bytes+tt.chunk > tt.window {
				t.Fatalf("%s: %d bytes in flight + %d admitted exceeds window %d", tt.name, f.bytes, tt.chunk, tt.window)
			}
			last = p.Release(admit, int(tt.chunk))
			f.push(tt.chunk, last.Add(tt.ack), seq)
			seq++
			total += tt.chunk
			arrival = admit
		}
		got := float64(total) / last.Sub(t0).Seconds()
		if math.Abs(got-tt.want) > 0.02*tt.want {
			t.Errorf("%s: throughput %.2f MB/s, want %.2f MB/s ± 2%%", tt.name, got/1e6, tt.want/1e6)
		}
	}
}

func TestWindowOversizeChunk(t *testing.T) {
	var f flight
	f.push(100, t0.Add(10*time.Millisecond), 0)
	f.push(100, t0.Add(20*time.Millisecond), 1)
	at, k := f.admitAt(t0, 1000, 500)
	if k != 2 || !at.Equal(t0.Add(20*time.Millisecond)) {
		t.Fatalf("oversize chunk admitted at +%v after %d entries, want +20ms after 2", at.Sub(t0), k)
	}
	if got := f.push(1, t0, 2); !got.Equal(t0.Add(20 * time.Millisecond)) {
		t.Fatalf("ack time went back to %v", got)
	}
}

// stalls returns the stall of each chunk in units of rto, for chunks so far
// apart that they never wait for each other.
func stalls(t *testing.T, p Params, chunk int, n int) []int64 {
	t.Helper()
	path := NewPath(p, 3)
	rto := p.WithDefaults().RTO
	out := make([]int64, n)
	for i := range out {
		arr := t0.Add(time.Duration(i) * time.Hour)
		s := path.Release(arr, chunk).Sub(arr) - p.Delay
		if s%rto != 0 {
			t.Fatalf("stall %v is not a multiple of RTO %v", s, rto)
		}
		out[i] = int64(s / rto)
	}
	return out
}

func TestLossBernoulli(t *testing.T) {
	const n, loss = 400_000, 0.01
	for _, rto := range []time.Duration{0, 50 * time.Millisecond} {
		p := Params{Delay: 10 * time.Millisecond, Loss: loss, RTO: rto, Seed: 1}
		var lost int64
		for _, s := range stalls(t, p, MSS, n) {
			lost += s
		}
		f := float64(lost) / n
		if se := math.Sqrt(loss * (1 - loss) / n); math.Abs(f-loss) > 5*se {
			t.Errorf("rto %v: loss frequency %.5f, want %.5f ± %.5f", rto, f, loss, 5*se)
		}
	}
	if got := (Params{Delay: 10 * time.Millisecond}).WithDefaults().RTO; got != 220*time.Millisecond {
		t.Errorf("default RTO for 10 ms each way = %v, want 220ms", got)
	}
	// Every segment of a 10-segment chunk lost: ten stalls.
	if s := stalls(t, Params{Loss: 1}, 10*MSS, 1)[0]; s != 10 {
		t.Errorf("10 lost segments stalled %d RTOs", s)
	}
	// A 1-byte chunk is one segment too.
	if s := stalls(t, Params{Loss: 1}, 1, 1)[0]; s != 1 {
		t.Errorf("a lost 1-byte chunk stalled %d RTOs", s)
	}
}

func TestLossStallsTheFlow(t *testing.T) {
	// A loss holds back the chunks behind it: release order is kept.
	p := NewPath(Params{Delay: time.Millisecond, Loss: 1, RTO: 100 * time.Millisecond}, 0)
	first := p.Release(t0, 1)
	p.SetParams(Params{Delay: time.Millisecond, RTO: 100 * time.Millisecond})
	second := p.Release(t0.Add(time.Millisecond), 1)
	if first.Sub(t0) != 101*time.Millisecond || !second.Equal(first) {
		t.Fatalf("releases +%v, +%v; want both +101ms", first.Sub(t0), second.Sub(t0))
	}
}

func TestLossIndependentOfChunking(t *testing.T) {
	for _, p := range []Params{
		{Loss: 0.03, Seed: 9},
		{LossModel: LossModel{Kind: GilbertElliott, P: 0.02, R: 0.3, GoodLoss: 0.001}, Seed: 9},
	} {
		var total [2]int64
		for i, chunkSegs := range []int{1, 7} {
			for _, s := range stalls(t, p, chunkSegs*MSS, 70_000/chunkSegs) {
				total[i] += s
			}
		}
		if total[0] != total[1] || total[0] == 0 {
			t.Errorf("%v: %d losses in 1-segment chunks, %d in 7-segment chunks", p.LossModel.Kind, total[0], total[1])
		}
	}
}

// runs returns the loss frequency and the mean length of runs of
// consecutive lost segments.
func runs(seq []int64) (freq, meanRun float64) {
	var lost, nruns, cur int64
	for _, s := range seq {
		if s > 0 {
			lost++
			cur++
			continue
		}
		if cur > 0 {
			nruns++
			cur = 0
		}
	}
	if cur > 0 {
		nruns++
	}
	return float64(lost) / float64(len(seq)), float64(lost) / float64(max(nruns, 1))
}

func TestGilbertElliott(t *testing.T) {
	tests := []struct {
		name     string
		m        LossModel
		n        int // segments
		wantFreq float64
		wantRun  float64 // 0: not checked
	}{
		// Every bad segment lost: runs are bad stays, 1/R long.
		{"simple gilbert", LossModel{Kind: GilbertElliott, P: 0.01, R: 0.25}, 400_000, 0.01 / 0.26, 4},
		{"r defaults to 1-p", LossModel{Kind: GilbertElliott, P: 0.1}, 200_000, 0.1, 1 / 0.9},
		{"lossy good state", LossModel{Kind: GilbertElliott, P: 0.005, R: 0.1, BadLoss: 0.5, GoodLoss: 0.002}, 1_000_000, (0.1*0.002 + 0.005*0.5) / 0.105, 0},
	}
	for _, tt := range tests {
		seq := stalls(t, Params{LossModel: tt.m, Seed: 4}, MSS, tt.n)
		freq, run := runs(seq)
		if math.Abs(freq-tt.wantFreq) > 0.1*tt.wantFreq {
			t.Errorf("%s: loss frequency %.5f, want %.5f ± 10%%", tt.name, freq, tt.wantFreq)
		}
		if tt.wantRun > 0 && math.Abs(run-tt.wantRun) > 0.1*tt.wantRun {
			t.Errorf("%s: mean burst %.3f segments, want %.3f ± 10%%", tt.name, run, tt.wantRun)
		}
	}
	// The same loss rate from a Bernoulli process comes in runs of about
	// 1/(1-p), far shorter.
	_, bern := runs(stalls(t, Params{Loss: 0.01 / 0.26, Seed: 4}, MSS, 200_000))
	if bern > 1.1 {
		t.Errorf("bernoulli mean burst %.3f, want about 1.04", bern)
	}
}

func TestNoReorderLargeJitter(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, d := range []Distribution{Uniform, Normal, Pareto, ParetoNormal} {
		p := NewPath(Params{
			Delay: 5 * time.Millisecond, Jitter: 50 * time.Millisecond, Distribution: d,
			Rate: 10e6, Loss: 0.001, Seed: 8,
		}, 1)
		arr := t0
		var prev time.Time
		held := 0
		for i := 0; i < 50_000; i++ {
			arr = arr.Add(time.Duration(r.IntN(200)) * time.Microsecond)
			n := 1 + r.IntN(8000)
			rel := p.Release(arr, n)
			if rel.Before(prev) {
				t.Fatalf("%v: chunk %d released at %v, before its predecessor at %v", d, i, rel, prev)
			}
			if rel.Before(arr) {
				t.Fatalf("%v: chunk %d released before it arrived", d, i)
			}
			if rel.Equal(prev) {
				held++
			}
			prev = rel
		}
		if held == 0 {
			t.Errorf("%v: jitter never held a chunk behind its predecessor", d)
		}
	}
}

func TestSetParamsLive(t *testing.T) {
	const ms = time.Millisecond
	p := NewPath(Params{Delay: 100 * ms}, 0)
	steps := []struct {
		set  *Params
		at   time.Duration
		n    int
		want time.Duration
	}{
		{nil, 0, 100, 100 * ms},
		{&Params{Delay: 10 * ms}, 1 * ms, 100, 100 * ms}, // may not overtake
		{nil, 200 * ms, 100, 210 * ms},
		{&Params{Delay: 10 * ms, Rate: 1e6, Burst: 1000}, 300 * ms, 3000, 312 * ms},
		{&Params{}, 400 * ms, 3000, 400 * ms},
		{&Params{Loss: 1, RTO: 50 * ms}, 500 * ms, 1, 550 * ms},
		{&Params{}, 600 * ms, 1, 600 * ms},
	}
	for i, s := range steps {
		if s.set != nil {
			p.SetParams(*s.set)
			if got := p.Params(); got != *s.set {
				t.Fatalf("step %d: Params() = %+v", i, got)
			}
		}
		if got := p.Release(t0.Add(s.at), s.n).Sub(t0); got != s.want {
			t.Errorf("step %d: released at +%v, want +%v", i, got, s.want)
		}
	}
}

func TestSetParamsReseeds(t *testing.T) {
	base := Params{Delay: 50 * time.Millisecond, Jitter: 10 * time.Millisecond, Seed: 1}
	p := NewPath(base, 5)
	for i := 0; i < 10; i++ {
		p.Release(t0.Add(time.Duration(i)*time.Hour), 1)
	}
	reseeded := base
	reseeded.Seed = 2
	p.SetParams(reseeded)
	fresh := NewPath(reseeded, 5)
	for i := 0; i < 100; i++ {
		arr := t0.Add(time.Duration(100+i) * time.Hour)
		if a, b := p.Release(arr, 1), fresh.Release(arr, 1); !a.Equal(b) {
			t.Fatalf("sample %d after reseeding: %v, fresh path %v", i, a.Sub(arr), b.Sub(arr))
		}
	}
}

func TestSeedRepeatability(t *testing.T) {
	prm := Params{
		Delay: 10 * time.Millisecond, Jitter: 5 * time.Millisecond, Distribution: ParetoNormal,
		Correlation: 0.3, Rate: 20e6, Loss: 0.01, Seed: 42,
	}
	run := func(p Params, flow int64) []time.Time {
		path := NewPath(p, flow)
		r := rand.New(rand.NewPCG(7, 7)) // the same input each run
		arr := t0
		out := make([]time.Time, 20_000)
		for i := range out {
			arr = arr.Add(time.Duration(r.IntN(1000)) * time.Microsecond)
			out[i] = path.Release(arr, 1+r.IntN(20000))
		}
		return out
	}
	a, b := run(prm, 1), run(prm, 1)
	if !slices.EqualFunc(a, b, time.Time.Equal) {
		t.Fatal("same seed gave different release sequences")
	}
	if slices.EqualFunc(a, run(prm, 2), time.Time.Equal) {
		t.Error("different flow seeds gave the same release sequence")
	}
	other := prm
	other.Seed = 43
	if slices.EqualFunc(a, run(other, 1), time.Time.Equal) {
		t.Error("different Params.Seed gave the same release sequence")
	}
}

func TestReleaseEdgeCases(t *testing.T) {
	p := NewPath(Params{Delay: 10 * time.Millisecond}, 0)
	if got := p.Release(t0, 0).Sub(t0); got != 10*time.Millisecond {
		t.Errorf("empty chunk released at +%v", got)
	}
	// An arrival before the previous one is still served in order.
	if got := p.Release(t0.Add(-time.Second), 10).Sub(t0); got != 10*time.Millisecond {
		t.Errorf("out-of-order arrival released at +%v", got)
	}
	// Huge chunks at a tiny rate saturate instead of overflowing.
	q := NewPath(Params{Rate: 1, Loss: 1, RTO: time.Hour}, 0)
	if got := q.Release(t0, math.MaxInt32); got.Before(t0) {
		t.Errorf("huge chunk released at %v, before arrival", got)
	}
}
