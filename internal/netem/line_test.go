package netem

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/panics"
)

// got is one dst.Write seen by a recorder.
type got struct {
	at time.Time
	b  []byte
}

// recorder is a dst that records the clock's time of every write. If gate
// is set, each write first waits for a value from it; if fail is set,
// writes fail with it.
type recorder struct {
	clk     clock.Clock
	writes  chan got
	entered chan struct{}
	gate    chan struct{}
	fail    error
}

func newRecorder(clk clock.Clock) *recorder {
	return &recorder{clk: clk, writes: make(chan got, 4096), entered: make(chan struct{}, 4096)}
}

func (r *recorder) Write(p []byte) (int, error) {
	r.entered <- struct{}{}
	if r.gate != nil {
		<-r.gate
	}
	if r.fail != nil {
		return 0, r.fail
	}
	r.writes <- got{r.clk.Now(), bytes.Clone(p)}
	return len(p), nil
}

// next returns the next write; it fails the test if none comes (the
// real-time limit only turns a hang into a failure).
func (r *recorder) next(t *testing.T) got {
	t.Helper()
	select {
	case g := <-r.writes:
		return g
	case <-time.After(10 * time.Second):
		t.Fatal("no write reached dst")
		return got{}
	}
}

func (r *recorder) none(t *testing.T) {
	t.Helper()
	select {
	case g := <-r.writes:
		t.Fatalf("unexpected write of %d bytes at %v", len(g.b), g.at)
	default:
	}
}

// overfill writes n chunks at t0, which the window must hold, then
// starts a Write of last at t0 in the background; its error comes on the
// returned channel.
func overfill(ctx context.Context, t *testing.T, l *Line, n int, chunk, last []byte) <-chan error {
	t.Helper()
	for range n {
		if err := l.Write(ctx, chunk, t0); err != nil {
			t.Fatal(err)
		}
	}
	errc := make(chan error, 1)
	go func() { errc <- l.Write(ctx, last, t0) }()
	return errc
}

func recv[T any](t *testing.T, c <-chan T) T {
	t.Helper()
	select {
	case v := <-c:
		return v
	case <-time.After(10 * time.Second):
		t.Fatal("timed out")
		var zero T
		return zero
	}
}

// fakeLine returns a fake clock at t0, a recorder and a Line on them
// through a path with p and seed.
func fakeLine(p Params, seed int64, o LineOptions) (*clock.Fake, *recorder, *Line) {
	clk := clock.NewFake(t0)
	rec := newRecorder(clk)
	return clk, rec, NewLine(clk, rec, NewPath(p, seed), o)
}

func closeLine(t *testing.T, l *Line) {
	t.Helper()
	if err := l.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}

var noSpin = LineOptions{Spin: -1}

// arrival is a write to a Line: its bytes and their arrival time.
type arrival struct {
	b   []byte
	arr time.Time
}

// lineRelease writes each chunk to a Line through a path with prm and
// seed, then moves the fake clock to each release time a twin path gives
// and checks that the chunk is written then, whole, and not before the
// one ahead of it.
func lineRelease(t *testing.T, prm Params, seed int64, chunks []arrival) {
	t.Helper()
	ctx := context.Background()
	clk, rec, l := fakeLine(prm, seed, noSpin)
	defer closeLine(t, l)
	twin := NewPath(prm, seed)
	want := make([]time.Time, len(chunks))
	for i, c := range chunks {
		if err := l.Write(ctx, c.b, c.arr); err != nil {
			t.Fatal(err)
		}
		want[i] = twin.Release(c.arr, len(c.b))
	}
	var prev time.Time
	for i, w := range want {
		if w.After(clk.Now()) {
			clk.BlockUntil(1) // the writer waits for w
			clk.Set(w)
		}
		g := rec.next(t)
		if g.at.Before(prev) || !g.at.Equal(w) || !bytes.Equal(g.b, chunks[i].b) {
			t.Fatalf("chunk %d: %d bytes at +%v after one at +%v, want %d bytes at +%v",
				i, len(g.b), g.at.Sub(t0), prev.Sub(t0), len(chunks[i].b), w.Sub(t0))
		}
		prev = g.at
	}
	rec.none(t)
}

func TestLineReleaseTimes(t *testing.T) {
	var chunks []arrival
	for i := 0; i < 50; i++ {
		chunks = append(chunks, arrival{bytes.Repeat([]byte{byte(i)}, 100+37*i), t0.Add(time.Duration(i) * time.Millisecond)})
	}
	lineRelease(t, Params{Delay: 10 * time.Millisecond, Jitter: 3 * time.Millisecond, Distribution: Normal, Rate: 1e6, Seed: 7}, 1, chunks)
}

func TestLineNoReorderLargeJitter(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 4))
	var chunks []arrival
	arr := t0
	for i := 0; i < 300; i++ {
		arr = arr.Add(time.Duration(r.IntN(500)) * time.Microsecond)
		b := make([]byte, 1+r.IntN(4000))
		for j := range b {
			b[j] = byte(r.Uint32())
		}
		chunks = append(chunks, arrival{b, arr})
	}
	lineRelease(t, Params{Delay: 2 * time.Millisecond, Jitter: 40 * time.Millisecond, Distribution: Pareto, Loss: 0.002, Seed: 3}, 9, chunks)
}

func TestLineBackpressure(t *testing.T) {
	const ms = time.Millisecond
	ctx := context.Background()
	clk, rec, l := fakeLine(Params{Delay: 10 * ms, Window: 3000}, 0, noSpin)
	defer closeLine(t, l)
	chunk := make([]byte, 1000)

	errc := overfill(ctx, t, l, 3, chunk, chunk)
	// The writer waits for t0+10ms, the blocked Write for the ack of the
	// first chunk at t0+20ms.
	clk.BlockUntil(2)
	if next, _ := clk.Next(); !next.Equal(t0.Add(10 * ms)) {
		t.Fatalf("first deadline +%v", next.Sub(t0))
	}
	select {
	case err := <-errc:
		t.Fatalf("Write returned (%v) with the window full", err)
	default:
	}
	clk.Set(t0.Add(10 * ms))
	for i := 0; i < 3; i++ {
		if g := rec.next(t); !g.at.Equal(t0.Add(10 * ms)) {
			t.Fatalf("chunk %d released at +%v", i, g.at.Sub(t0))
		}
	}
	if next, _ := clk.Next(); !next.Equal(t0.Add(20 * ms)) {
		t.Fatalf("blocked Write waits for +%v, want +20ms", next.Sub(t0))
	}
	clk.Set(t0.Add(20 * ms))
	if err := recv(t, errc); err != nil {
		t.Fatal(err)
	}
	if l.fl.bytes > 3000 {
		t.Fatalf("%d bytes in flight, window 3000", l.fl.bytes)
	}
	// The fourth chunk entered the path at +20ms.
	clk.BlockUntil(1)
	clk.Set(t0.Add(30 * ms))
	if g := rec.next(t); !g.at.Equal(t0.Add(30 * ms)) {
		t.Fatalf("fourth chunk released at +%v, want +30ms", g.at.Sub(t0))
	}
}

func TestLineAckDelay(t *testing.T) {
	const ms = time.Millisecond
	ctx := context.Background()
	clk, rec, l := fakeLine(Params{Delay: 10 * ms, Window: 1000}, 0, LineOptions{
		Spin:     -1,
		AckDelay: func() time.Duration { return 30 * ms },
	})
	defer closeLine(t, l)
	errc := overfill(ctx, t, l, 1, make([]byte, 1000), make([]byte, 10))
	clk.BlockUntil(2)
	clk.Set(t0.Add(10 * ms))
	rec.next(t)
	if next, _ := clk.Next(); !next.Equal(t0.Add(40 * ms)) {
		t.Fatalf("window frees at +%v, want +40ms (10ms there, 30ms back)", next.Sub(t0))
	}
	clk.Set(t0.Add(40 * ms))
	if err := recv(t, errc); err != nil {
		t.Fatal(err)
	}
}

func TestLineSlowDst(t *testing.T) {
	// The window frees only once chunks are passed on: a stuck dst stops
	// the writer, and so the Line never holds more than the window.
	synctest.Test(t, func(t *testing.T) {
		const ms = time.Millisecond
		ctx := context.Background()
		clk := clock.NewFake(t0)
		rec := newRecorder(clk)
		rec.gate = make(chan struct{})
		l := NewLine(clk, rec, NewPath(Params{Delay: ms, Window: 2000}, 0), noSpin)
		defer closeLine(t, l)
		chunk := make([]byte, 1000)
		errc := overfill(ctx, t, l, 2, chunk, chunk)
		clk.BlockUntil(2)
		clk.Set(t0.Add(2 * ms)) // release due at +1ms, ack at +2ms
		recv(t, rec.entered)    // the writer is stuck in dst.Write
		synctest.Wait()         // every goroutine is blocked: Write has not returned
		select {
		case err := <-errc:
			t.Fatalf("Write returned (%v) while dst held the window", err)
		default:
		}
		rec.gate <- struct{}{}
		rec.gate <- struct{}{}
		if err := recv(t, errc); err != nil {
			t.Fatal(err)
		}
		clk.BlockUntil(1)
		clk.Set(t0.Add(3 * ms))
		rec.gate <- struct{}{}
		for i := 0; i < 3; i++ {
			rec.next(t)
		}
	})
}

func TestLineWindowWaitCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	clk, rec, l := fakeLine(Params{Delay: time.Millisecond, Window: 100}, 0, noSpin)
	defer closeLine(t, l)
	errc := overfill(ctx, t, l, 1, make([]byte, 100), []byte("late"))
	clk.BlockUntil(2)
	cancel()
	if err := recv(t, errc); !errors.Is(err, context.Canceled) {
		t.Fatalf("Write = %v, want context.Canceled", err)
	}
	clk.Set(t0.Add(time.Hour))
	if err := l.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if g := rec.next(t); len(g.b) != 100 {
		t.Fatalf("released %d bytes", len(g.b))
	}
	rec.none(t) // the cancelled chunk was not written
}

func TestLineFlush(t *testing.T) {
	ctx := context.Background()
	clk, rec, l := fakeLine(Params{Delay: 10 * time.Millisecond}, 0, noSpin)
	defer closeLine(t, l)

	if err := l.Flush(ctx); err != nil {
		t.Fatalf("Flush with nothing pending: %v", err)
	}
	for i := 0; i < 3; i++ {
		if err := l.Write(ctx, []byte("abc"), t0.Add(time.Duration(i)*time.Millisecond)); err != nil {
			t.Fatal(err)
		}
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := l.Flush(cctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Flush with a cancelled context = %v", err)
	}
	errc := make(chan error, 1)
	go func() { errc <- l.Flush(ctx) }()
	for i := 0; i < 3; i++ {
		at := t0.Add(time.Duration(10+i) * time.Millisecond)
		select {
		case err := <-errc:
			t.Fatalf("Flush returned (%v) with chunk %d pending", err, i)
		default:
		}
		clk.BlockUntil(1)
		clk.Set(at)
		if g := rec.next(t); !g.at.Equal(at) {
			t.Fatalf("chunk %d released at +%v", i, g.at.Sub(t0))
		}
	}
	if err := recv(t, errc); err != nil {
		t.Fatal(err)
	}
}

func TestLineClose(t *testing.T) {
	ctx := context.Background()
	clk, rec, l := fakeLine(Params{Delay: time.Second, Window: 10}, 0, noSpin)
	errc := overfill(ctx, t, l, 1, make([]byte, 10), []byte("x"))
	clk.BlockUntil(2)
	if err := l.Close(); err != nil {
		t.Fatalf("Close = %v", err)
	}
	if err := recv(t, errc); !errors.Is(err, ErrClosed) || !errors.Is(err, net.ErrClosed) {
		t.Fatalf("blocked Write = %v, want ErrClosed", err)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("second Close = %v", err)
	}
	if err := l.Write(ctx, []byte("x"), t0); !errors.Is(err, ErrClosed) {
		t.Fatalf("Write after Close = %v", err)
	}
	if err := l.Flush(ctx); !errors.Is(err, ErrClosed) {
		t.Fatalf("Flush after Close = %v", err)
	}
	clk.Set(t0.Add(time.Hour))
	rec.none(t) // pending chunks are discarded
}

func TestLineCloseConcurrent(t *testing.T) {
	clk := clock.NewFake(t0)
	l := NewLine(clk, newRecorder(clk), NewPath(Params{Delay: time.Second}, 0), noSpin)
	done := make(chan error, 4)
	for i := 0; i < 4; i++ {
		go func() { done <- l.Close() }()
	}
	for i := 0; i < 4; i++ {
		if err := recv(t, done); err != nil {
			t.Fatal(err)
		}
	}
}

func TestLineWriteError(t *testing.T) {
	ctx := context.Background()
	boom := errors.New("boom")
	clk := clock.NewFake(t0)
	rec := newRecorder(clk)
	rec.fail = boom
	l := NewLine(clk, rec, NewPath(Params{Delay: time.Millisecond}, 0), noSpin)
	if err := l.Write(ctx, []byte("a"), t0); err != nil {
		t.Fatalf("first Write = %v", err)
	}
	if err := l.Write(ctx, []byte("b"), t0); err != nil && !errors.Is(err, boom) {
		t.Fatalf("second Write = %v", err)
	}
	clk.BlockUntil(1)
	clk.Set(t0.Add(time.Millisecond))
	if err := l.Flush(ctx); !errors.Is(err, boom) {
		t.Fatalf("Flush = %v, want the dst error", err)
	}
	if err := l.Write(ctx, []byte("c"), t0); !errors.Is(err, boom) {
		t.Fatalf("Write after the error = %v", err)
	}
	if err := l.Close(); !errors.Is(err, boom) {
		t.Fatalf("Close = %v, want the dst error", err)
	}
	if err := l.Close(); !errors.Is(err, boom) {
		t.Fatalf("second Close = %v, want the dst error", err)
	}
	if err := l.Write(ctx, []byte("d"), t0); !errors.Is(err, boom) {
		t.Fatalf("Write after Close = %v, want the first error", err)
	}
}

func TestLineShortWrite(t *testing.T) {
	clk := clock.NewFake(t0)
	l := NewLine(clk, shortWriter{}, NewPath(Params{}, 0), noSpin)
	if err := l.Write(context.Background(), []byte("abc"), t0); err != nil {
		t.Fatal(err)
	}
	if err := l.Flush(context.Background()); err == nil {
		t.Fatal("short write not reported")
	}
	l.Close()
}

type shortWriter struct{}

func (shortWriter) Write(p []byte) (int, error) { return len(p) - 1, nil }

func TestLineSpin(t *testing.T) {
	// With spinning on, the writer sleeps until one lead (1 ms assumed
	// timer lateness + 100 µs) before the deadline, then spins on the
	// clock; the release is still exactly at the deadline.
	const ms = time.Millisecond
	clk, rec, l := fakeLine(Params{Delay: 10 * ms}, 0, LineOptions{})
	defer closeLine(t, l)
	if err := l.Write(context.Background(), []byte("q"), t0); err != nil {
		t.Fatal(err)
	}
	clk.BlockUntil(1)
	if next, _ := clk.Next(); !next.Equal(t0.Add(10*ms - initialLate - spinMargin)) {
		t.Fatalf("writer wakes at +%v", next.Sub(t0))
	}
	clk.Set(t0.Add(10*ms - time.Microsecond))
	rec.none(t)
	clk.Set(t0.Add(10 * ms))
	if g := rec.next(t); !g.at.Equal(t0.Add(10 * ms)) {
		t.Fatalf("released at +%v", g.at.Sub(t0))
	}
}

func TestLineOversizeChunk(t *testing.T) {
	// A chunk larger than the window and the largest pool class passes
	// alone.
	ctx := context.Background()
	_, rec, l := fakeLine(Params{Window: 1 << 20}, 0, noSpin)
	defer closeLine(t, l)
	big := bytes.Repeat([]byte("z"), 5<<20)
	if err := l.Write(ctx, big, t0); err != nil {
		t.Fatal(err)
	}
	if err := l.Write(ctx, []byte("tail"), t0); err != nil {
		t.Fatal(err)
	}
	if g := rec.next(t); !bytes.Equal(g.b, big) {
		t.Fatalf("got %d bytes", len(g.b))
	}
	if g := rec.next(t); string(g.b) != "tail" {
		t.Fatalf("got %q", g.b)
	}
}

func TestLineSetParamsLive(t *testing.T) {
	const ms = time.Millisecond
	ctx := context.Background()
	clk := clock.NewFake(t0)
	rec := newRecorder(clk)
	path := NewPath(Params{Delay: 50 * ms}, 0)
	l := NewLine(clk, rec, path, noSpin)
	defer closeLine(t, l)
	if err := l.Write(ctx, []byte("a"), t0); err != nil {
		t.Fatal(err)
	}
	path.SetParams(Params{Delay: 5 * ms})
	if err := l.Write(ctx, []byte("b"), t0.Add(ms)); err != nil {
		t.Fatal(err)
	}
	if err := l.Write(ctx, []byte("c"), t0.Add(60*ms)); err != nil {
		t.Fatal(err)
	}
	for _, w := range []struct {
		b  string
		at time.Duration
	}{{"a", 50 * ms}, {"b", 50 * ms}, {"c", 65 * ms}} {
		if t0.Add(w.at).After(clk.Now()) {
			clk.BlockUntil(1)
			clk.Set(t0.Add(w.at))
		}
		if g := rec.next(t); string(g.b) != w.b || !g.at.Equal(t0.Add(w.at)) {
			t.Fatalf("got %q at +%v, want %q at +%v", g.b, g.at.Sub(t0), w.b, w.at)
		}
	}
}

func TestBufferPoolClasses(t *testing.T) {
	tests := []struct{ n, class int }{
		{1, 0}, {512, 0}, {513, 1}, {1024, 1}, {1025, 2}, {32 << 10, 6}, {4 << 20, 13}, {4<<20 + 1, 14},
	}
	for _, tt := range tests {
		if got := classOf(tt.n); got != tt.class {
			t.Errorf("classOf(%d) = %d, want %d", tt.n, got, tt.class)
		}
	}
	var bp BufferPool
	c := bp.get(700)
	if len(c.buf) != 1024 || c.n != 700 {
		t.Fatalf("get(700): buffer %d, n %d", len(c.buf), c.n)
	}
	bp.put(c)
	if big := bp.get(5 << 20); big.class != -1 || len(big.buf) != 5<<20 {
		t.Fatalf("oversize buffer: class %d, %d bytes", big.class, len(big.buf))
	}
}

func TestRing(t *testing.T) {
	var r ring[int]
	next := 0
	for i := 0; i < 1000; i++ {
		r.push(i)
		if i%3 == 0 {
			if v := r.pop(); v != next {
				t.Fatalf("pop = %d, want %d", v, next)
			}
			next++
		}
	}
	for r.len() > 0 {
		if v := r.pop(); v != next {
			t.Fatalf("pop = %d, want %d", v, next)
		}
		next++
	}
	if next != 1000 {
		t.Fatalf("popped %d values", next)
	}
}

// preciseFake is a virtual clock that offers precise sleeps, which it
// counts and completes by moving the clock, and no high-resolution
// timers.
type preciseFake struct {
	f      *clock.Fake
	sleeps atomic.Int32
}

func (p *preciseFake) Now() time.Time                       { return p.f.Now() }
func (p *preciseFake) NewTimer(d time.Duration) clock.Timer { return p.f.NewTimer(d) }
func (p *preciseFake) SleepPrecise(d time.Duration) {
	p.sleeps.Add(1)
	p.f.Advance(d)
}

// hrFake is a virtual clock with high-resolution timers (exact, like all
// its timers).
type hrFake struct{ *clock.Fake }

func (h hrFake) NewHighResTimer(d time.Duration) (clock.Timer, func()) {
	return h.NewTimer(d), func() {}
}

// A lone chunk's wait ends on a high-resolution timer when the clock has
// them, aimed early by the expected wake-up lateness; else in a precise
// sleep. A coarse Line releases on its ordinary timer, exactly at the
// release time of a virtual clock.
func TestLinePreciseAndCoarse(t *testing.T) {
	ctx := context.Background()
	prm := Params{Delay: 500 * time.Microsecond}

	pc := &preciseFake{f: clock.NewFake(t0)}
	rec := newRecorder(pc)
	l := NewLine(pc, rec, NewPath(prm, 1), LineOptions{})
	defer closeLine(t, l)
	if err := l.Write(ctx, []byte("q"), t0); err != nil {
		t.Fatal(err)
	}
	rec.next(t)
	if pc.sleeps.Load() == 0 {
		t.Fatal("a lone chunk was released without a precise sleep")
	}

	// Each release is also recorded once, in the histogram of its kind,
	// with its lateness against the release time.
	for _, coarse := range []bool{false, true} {
		var precise, timed Lateness
		clk := hrFake{clock.NewFake(t0)}
		rec := newRecorder(clk)
		l := NewLine(clk, rec, NewPath(prm, 1), LineOptions{Precise: &precise, Timed: &timed})
		defer closeLine(t, l)
		l.SetCoarse(coarse)
		if err := l.Write(ctx, []byte("q"), t0); err != nil {
			t.Fatal(err)
		}
		clk.BlockUntil(1)
		next, _ := clk.Next()
		clk.Set(next)
		g := rec.next(t)
		switch {
		case coarse && !g.at.Equal(t0.Add(prm.Delay)):
			t.Fatalf("coarse release at +%v, want +%v", g.at.Sub(t0), prm.Delay)
		case !coarse && !(g.at.Before(t0.Add(prm.Delay)) && g.at.After(t0)):
			t.Fatalf("high-resolution release at +%v, want just before +%v", g.at.Sub(t0), prm.Delay)
		}
		closeLine(t, l)
		want, other := &precise, &timed
		if coarse {
			want, other = &timed, &precise
		}
		if s := want.Snapshot(); s.Count != 1 || s.Sum != g.at.Sub(t0.Add(prm.Delay)) {
			t.Errorf("coarse=%v: recorded %d releases, sum %v; want 1, %v", coarse, s.Count, s.Sum, g.at.Sub(t0.Add(prm.Delay)))
		}
		if n := other.Snapshot().Count; n != 0 {
			t.Errorf("coarse=%v: %d releases in the other histogram", coarse, n)
		}
	}
}

// A response written as several chunks is only as punctual as its first
// chunk: with high-resolution timers every release of a fine Line ends
// precisely, queued behind another chunk or not; without them only a
// lone chunk's does.
func TestLineQueuedChunksPrecise(t *testing.T) {
	ctx := context.Background()
	prm := Params{Delay: 500 * time.Microsecond}
	for _, hr := range []bool{true, false} {
		var precise, timed Lateness
		f := clock.NewFake(t0)
		var clk clock.Clock = f
		if hr {
			clk = hrFake{f}
		}
		rec := newRecorder(clk)
		// Spin disabled without high-resolution timers: a spinning
		// writer would busy-wait on the virtual clock.
		opts := LineOptions{Precise: &precise, Timed: &timed}
		if !hr {
			opts.Spin = -1
		}
		l := NewLine(clk, rec, NewPath(prm, 1), opts)
		// Arrivals 1 ms apart: each release waits on a timer of its own.
		for i, b := range []string{"a", "b", "c"} {
			if err := l.Write(ctx, []byte(b), t0.Add(time.Duration(i)*time.Millisecond)); err != nil {
				t.Fatal(err)
			}
		}
		for range 3 {
			f.BlockUntil(1)
			next, _ := f.Next()
			f.Set(next)
			rec.next(t)
		}
		closeLine(t, l)
		p, tm := precise.Snapshot().Count, timed.Snapshot().Count
		switch {
		case hr && (p != 3 || tm != 0):
			t.Errorf("high-resolution clock: %d precise and %d timed releases, want 3 and 0", p, tm)
		case !hr && (p != 0 || tm != 3):
			t.Errorf("spinning disabled: %d precise and %d timed releases, want 0 and 3", p, tm)
		}
	}
}

func TestLatenessSnapshot(t *testing.T) {
	us := time.Microsecond
	tests := []struct {
		name   string
		record []time.Duration
		mean   time.Duration
		// at: cumulative count at these bounds
		at map[time.Duration]uint64
	}{
		{name: "empty", at: map[time.Duration]uint64{0: 0, 10 * time.Millisecond: 0}},
		{name: "on a bound counts in it", record: []time.Duration{0, 5 * us, -100 * us}, mean: -95 * us / 3,
			at: map[time.Duration]uint64{-100 * us: 1, -50 * us: 1, 0: 2, 5 * us: 3}},
		{name: "below every bound", record: []time.Duration{-time.Second}, mean: -time.Second,
			at: map[time.Duration]uint64{-100 * us: 1, 10 * time.Millisecond: 1}},
		{name: "above every bound is only in Count", record: []time.Duration{time.Second, us}, mean: (time.Second + us) / 2,
			at: map[time.Duration]uint64{5 * us: 1, 10 * time.Millisecond: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var h Lateness
			var sum time.Duration
			for _, d := range tt.record {
				h.Record(d)
				sum += d
			}
			s := h.Snapshot()
			if s.Count != uint64(len(tt.record)) || s.Sum != sum || s.Mean() != tt.mean {
				t.Fatalf("count %d sum %v mean %v, want %d, %v, %v", s.Count, s.Sum, s.Mean(), len(tt.record), sum, tt.mean)
			}
			bounds := s.Bounds()
			if len(bounds) != len(s.Buckets) {
				t.Fatalf("%d bounds, %d buckets", len(bounds), len(s.Buckets))
			}
			for i, b := range bounds {
				if i > 0 && (b <= bounds[i-1] || s.Buckets[i] < s.Buckets[i-1]) {
					t.Fatalf("bucket %d (%v): bounds or counts decrease", i, b)
				}
				if want, ok := tt.at[b]; ok && s.Buckets[i] != want {
					t.Errorf("bucket le %v = %d, want %d", b, s.Buckets[i], want)
				}
			}
		})
	}
}

func BenchmarkLatenessRecord(b *testing.B) {
	b.ReportAllocs()
	var h Lateness
	for i := 0; b.Loop(); i++ {
		h.Record(time.Duration(i%4000-1000) * time.Microsecond)
	}
}

// panicWriter panics on every write.
type panicWriter struct{}

func (panicWriter) Write([]byte) (int, error) { panic("dst exploded") }

// TestLineWriterPanic: a panic in the writer goroutine stops the Line and
// comes back from Flush, Write and Close as a *panics.Error, instead of
// ending the process.
func TestLineWriterPanic(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(t0)
	l := NewLine(clk, panicWriter{}, NewPath(Params{}, 0), noSpin)
	if err := l.Write(ctx, []byte("x"), t0); err != nil {
		t.Fatal(err)
	}
	err := l.Flush(ctx)
	pe := panics.As(err)
	if pe == nil || pe.Value != "dst exploded" || pe.Where != "delay line" {
		t.Fatalf("Flush = %v, want the writer's panic", err)
	}
	if err := l.Write(ctx, []byte("y"), t0); panics.As(err) == nil {
		t.Fatalf("Write after the panic = %v", err)
	}
	if err := l.Close(); panics.As(err) == nil {
		t.Fatalf("Close = %v", err)
	}
}
