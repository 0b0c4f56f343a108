package bench

import (
	"context"
	"errors"
	"io"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicelab/sluice/internal/bench/sbrand"
	"github.com/sluicelab/sluice/internal/clock"
)

var epoch = time.Unix(1_700_000_000, 0)

// virtualRun runs o with fake connections whose every statement takes
// step of virtual time.
func virtualRun(t *testing.T, o Options, step time.Duration, mk func(n int, c *fakeConn)) (Result, *fakeDialer, string, error) {
	t.Helper()
	f := clock.NewFake(epoch)
	o.Clock = f
	d := &fakeDialer{mk: func(n int) *fakeConn {
		c := &fakeConn{clk: f, step: step}
		if mk != nil {
			mk(n, c)
		}
		return c
	}}
	var out strings.Builder
	res, err := run(context.Background(), &o, d, &out)
	return res, d, out.String(), err
}

func TestTimeLimitVirtual(t *testing.T) {
	o := testOptions("oltp_point_select", "--events=0", "--time=1")
	res, _, out, err := virtualRun(t, o, time.Millisecond, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Events start at 0, 1, ..., 999 ms; the one starting at 1 s does not.
	if res.Transactions != 1000 || res.TotalTime != time.Second {
		t.Fatalf("transactions %d in %v, want 1000 in 1s", res.Transactions, res.TotalTime)
	}
	l := res.Latency
	if l.Min != time.Millisecond || l.Max != time.Millisecond || l.Avg != time.Millisecond || l.Sum != time.Second {
		t.Fatalf("latency %+v", l)
	}
	if ms(l.PercentileValue) < 0.99 || ms(l.PercentileValue) > 1.01 {
		t.Fatalf("95th percentile %v", l.PercentileValue)
	}
	if res.Fairness.EventsAvg != 1000 || res.Fairness.EventsStddev != 0 || res.Fairness.TimeAvg != time.Second {
		t.Fatalf("fairness %+v", res.Fairness)
	}
	if res.Histogram.TotalCount() != 1000 {
		t.Fatalf("histogram count %d", res.Histogram.TotalCount())
	}
	for _, want := range []string{
		"Number of threads: 1\n",
		"Initializing random number generator from seed (7).\n",
		"    transactions:                        1000   (1000.00 per sec.)\n",
		"    total time:                          1.0000s\n",
		"    per transaction:                     1.00\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestWarmupIsNotCounted(t *testing.T) {
	o := testOptions("oltp_point_select", "--events=0", "--time=1", "--warmup-time=0.5")
	res, d, _, err := virtualRun(t, o, time.Millisecond, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Transactions != 1000 || res.TotalTime != time.Second || res.Reads != 1000 {
		t.Fatalf("transactions %d reads %d in %v", res.Transactions, res.Reads, res.TotalTime)
	}
	if n := len(d.conn(0).workCalls()); n != 1500 {
		t.Fatalf("executed %d statements, want 1500 (500 warm-up)", n)
	}
}

func TestEventsLimitAcrossThreads(t *testing.T) {
	res, d := runFake(t, "oltp_read_only", "--events=100", "--threads=4")
	if res.Transactions != 100 || res.Reads != 1400 || res.Other != 200 {
		t.Fatalf("transactions %d reads %d other %d", res.Transactions, res.Reads, res.Other)
	}
	total := 0
	for n := 0; n < 4; n++ {
		total += len(d.conn(n).workCalls())
		if !d.conn(n).closed {
			t.Errorf("connection %d left open", n)
		}
	}
	if total != 1600 {
		t.Fatalf("%d statements executed, want 1600", total)
	}
}

func TestIgnorableErrorRestartsTransaction(t *testing.T) {
	for _, reconnect := range []bool{false, true} {
		o := testOptions("oltp_read_write")
		d := &fakeDialer{mk: func(int) *fakeConn {
			return &fakeConn{fail: func(n int, st *Statement) error {
				if n == 4 { // the third point select (call 0 is the table probe)
					return &SQLError{Code: "1213", Message: "Deadlock found", Ignorable: true, Reconnected: reconnect}
				}
				return nil
			}}
		}}
		res, err := run(context.Background(), &o, d, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		got := d.conn(0).sqls()
		want := seq(one("BEGIN"), rep(sqlPoint, 3), one("BEGIN"), rep(sqlPoint, 10),
			one(sqlSimple, sqlSum, sqlOrder, sqlDistinct, sqlIdxUpd, sqlNonIdx, sqlDelete, sqlInsert, "COMMIT"))
		if strings.Join(got, "|") != strings.Join(want, "|") {
			t.Fatalf("statements %q", got)
		}
		// The failed attempt's statements count, as in sysbench.
		if res.Transactions != 1 || res.Reads != 16 || res.Writes != 4 || res.Other != 3 || res.RoundTrips != 24 {
			t.Fatalf("counts %+v", res)
		}
		if reconnect && (res.Reconnects != 1 || res.IgnoredErrors != 0) || !reconnect && (res.IgnoredErrors != 1 || res.Reconnects != 0) {
			t.Fatalf("reconnect=%v: ignored %d reconnects %d", reconnect, res.IgnoredErrors, res.Reconnects)
		}
	}
}

func TestFatalErrorEndsRun(t *testing.T) {
	o := testOptions("oltp_read_write", "--events=0", "--time=0", "--threads=3")
	boom := &SQLError{Code: "1064", Message: "syntax error"}
	d := &fakeDialer{mk: func(n int) *fakeConn {
		return &fakeConn{fail: func(i int, st *Statement) error {
			if n == 1 && i == 50 {
				return boom
			}
			return nil
		}}
	}}
	var out strings.Builder
	_, err := run(context.Background(), &o, d, &out)
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v", err)
	}
	if strings.Contains(out.String(), "SQL statistics") {
		t.Fatal("report printed after a fatal error")
	}
}

func TestMissingTableIsExplained(t *testing.T) {
	o := testOptions("oltp_read_write", "--tables=2")
	d := &fakeDialer{mk: func(int) *fakeConn {
		return &fakeConn{fail: func(i int, st *Statement) error {
			if st.SQL == "SELECT 1 FROM sbtest2 WHERE 1=0" {
				return &SQLError{Code: "42P01", MissingTable: "sbtest2"}
			}
			return nil
		}}
	}}
	_, err := run(context.Background(), &o, d, io.Discard)
	if err == nil || err.Error() != "table sbtest2 does not exist (run `sluice bench oltp_read_write prepare` first)" {
		t.Fatalf("err = %v", err)
	}
}

func TestDialErrorIsReturned(t *testing.T) {
	o := testOptions("oltp_read_write", "--threads=4")
	d := &fakeDialer{err: errors.New("cannot connect to mysql at h:1: refused")}
	if _, err := run(context.Background(), &o, d, io.Discard); err == nil || !strings.Contains(err.Error(), "cannot connect") {
		t.Fatalf("err = %v", err)
	}
}

func TestCancelEndsEndlessRun(t *testing.T) {
	o := testOptions("oltp_point_select", "--events=0", "--time=0")
	ctx, cancel := context.WithCancel(context.Background())
	d := &fakeDialer{mk: func(int) *fakeConn {
		return &fakeConn{fail: func(i int, st *Statement) error {
			if i == 200 {
				cancel()
			}
			return nil
		}}
	}}
	res, err := run(ctx, &o, d, io.Discard)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
	if res.Transactions < 199 {
		t.Fatalf("transactions %d", res.Transactions)
	}
}

func TestIntervalReportsVirtual(t *testing.T) {
	o := testOptions("oltp_point_select", "--events=0", "--time=3", "--report-interval=1")
	// Each statement waits until the reporter's timer is armed, so the
	// reporter reads the clock exactly at each second (an event ending on
	// the second may be counted on either side of it).
	var f *clock.Fake
	res, _, out, err := virtualRun(t, o, time.Millisecond, func(n int, c *fakeConn) {
		f = c.clk
		c.before = func(st *Statement) {
			if !strings.HasPrefix(st.SQL, "SELECT 1 FROM") {
				f.BlockUntil(1)
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	line := regexp.MustCompile(`(?m)^\[ (\d)s \] thds: [01] tps: (999|1000|1001)\.00 qps: (999|1000|1001)\.00 \(r/w/o: (999|1000|1001)\.00/0\.00/0\.00\) lat \(ms,95%\): 1\.01 err/s: 0\.00 reconn/s: 0\.00$`)
	m := line.FindAllStringSubmatch(out, -1)
	// The line at 3 s races the end of the run.
	if len(m) < 2 || m[0][1] != "1" || m[1][1] != "2" {
		t.Fatalf("interval lines:\n%s", out)
	}
	if len(res.Intervals) != len(m) || res.Intervals[0].Time != time.Second || res.Intervals[1].Time != 2*time.Second {
		t.Fatalf("intervals %+v", res.Intervals)
	}
}

// driveClock advances f in steps of d, in real time, until stop closes,
// so that goroutines waiting on virtual timers make progress.
func driveClock(f *clock.Fake, d time.Duration, stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		default:
		}
		f.Advance(d)
		time.Sleep(20 * time.Microsecond)
	}
}

func TestRateGeneratorIsPoisson(t *testing.T) {
	f := clock.NewFake(epoch)
	o := testOptions("oltp_point_select", "--rate=200")
	r := &runner{o: &o, clk: f, t0: epoch, stop: make(chan struct{}), queue: make(chan time.Time, 100000), out: io.Discard}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { r.generate(context.Background(), sbrand.New(42, o.Rand), stop) })
	// Step virtual time from timer to timer for 10 s.
	end := epoch.Add(10 * time.Second)
	for {
		f.BlockUntil(1)
		next, _ := f.Next()
		if next.After(end) {
			break
		}
		f.Set(next)
	}
	close(stop)
	wg.Wait()
	n := len(r.queue)
	// 2000 expected; a Poisson count's standard deviation is about 45.
	if n < 1800 || n > 2200 {
		t.Fatalf("%d arrivals in 10 s at 200/s", n)
	}
	var prev time.Time
	for len(r.queue) > 0 {
		at := <-r.queue
		if at.Before(prev) || at.After(end) {
			t.Fatalf("arrival at %v after %v", at, prev)
		}
		prev = at
	}
}

func TestRateQueueOverflowEndsRun(t *testing.T) {
	f := clock.NewFake(epoch)
	o := testOptions("oltp_point_select", "--rate=1000")
	var out strings.Builder
	r := &runner{o: &o, clk: f, t0: epoch, stop: make(chan struct{}), queue: make(chan time.Time, 5), out: &out}
	done := make(chan struct{})
	go func() {
		r.generate(context.Background(), sbrand.New(1, o.Rand), make(chan struct{}))
		close(done)
	}()
	go driveClock(f, time.Millisecond, done)
	<-done
	select {
	case <-r.stop:
	default:
		t.Fatal("overflow did not stop the run")
	}
	if !r.queueFull.Load() || !strings.Contains(out.String(), "FATAL: The event queue is full.") {
		t.Fatalf("queueFull %v, output %q", r.queueFull.Load(), out.String())
	}
}

func TestRateRunCountsQueueTime(t *testing.T) {
	f := clock.NewFake(epoch)
	o := testOptions("oltp_point_select", "--events=0", "--time=2", "--rate=100", "--threads=2", "--report-interval=1")
	o.Clock = f
	d := &fakeDialer{mk: func(int) *fakeConn { return &fakeConn{} }}
	stop := make(chan struct{})
	go driveClock(f, 5*time.Millisecond, stop)
	var out strings.Builder
	res, err := run(context.Background(), &o, d, &out)
	close(stop)
	if err != nil {
		t.Fatal(err)
	}
	// About 200 arrivals (sd 14) in 2 virtual seconds.
	if res.Transactions < 120 || res.Transactions > 280 {
		t.Fatalf("%d transactions at 100/s for 2 s", res.Transactions)
	}
	if !strings.Contains(out.String(), "Target transaction rate: 100/sec\n") || !regexp.MustCompile(`\[ 1s \] queue length: \d+, concurrency: \d+\n`).MatchString(out.String()) {
		t.Fatalf("output:\n%s", out.String())
	}
}

func BenchmarkRunPointSelect(b *testing.B) {
	o := testOptions("oltp_point_select", "--events=0", "--time=0")
	o.Events = int64(b.N)
	b.ReportAllocs()
	if _, err := run(context.Background(), &o, &fakeDialer{mk: func(int) *fakeConn { return &fakeConn{} }}, io.Discard); err != nil {
		b.Fatal(err)
	}
}
