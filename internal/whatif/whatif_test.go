package whatif

import (
	"math"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func ms(n float64) time.Duration { return time.Duration(n * float64(time.Millisecond)) }

// op is one step of a session's events.
type op struct {
	at   float64 // ms after t0
	conn int     // which session
	ev   byte    // 's' send, 'n' send of no statement, 'a' answer, 'd' done idle, 'p' done pipelined (not idle), 'c' close
	open bool    // for 'd'/'p': a transaction stays open
}

func run(tb *Table, keys []Key, ops []op) {
	conns := make([]*Conn, len(keys))
	for i, k := range keys {
		conns[i] = tb.Open(k, t0, nil)
	}
	for _, o := range ops {
		now := t0.Add(ms(o.at))
		c := conns[o.conn]
		switch o.ev {
		case 's':
			c.Send(now, true)
		case 'n':
			c.Send(now, false)
		case 'a':
			c.Answer(now)
		case 'd':
			c.Done(now, true, o.open)
		case 'p':
			c.Done(now, false, o.open)
		case 'c':
			c.Close(now)
		}
	}
}

var pgApp = Key{Protocol: "postgres", User: "u", Database: "d", Application: "app"}

func TestSteps(t *testing.T) {
	tests := []struct {
		name string
		ops  []op
		at   time.Duration // snapshot time after t0
		want App           // fields checked: Transactions, RoundTrips, Latency, ServerTime, ClientTime, Cycle, Sessions
	}{
		{
			name: "three round trips, one transaction",
			ops: []op{
				{at: 0, ev: 's'}, {at: 1, ev: 'a'}, {at: 1, ev: 'd', open: true}, // BEGIN
				{at: 2, ev: 's'}, {at: 5, ev: 'a'}, {at: 6, ev: 'd', open: true}, // UPDATE
				{at: 7, ev: 's'}, {at: 8, ev: 'a'}, {at: 8, ev: 'd'}, // COMMIT
			},
			at:   2 * time.Second,
			want: App{Sessions: 1, Transactions: 1, RoundTrips: 3, Latency: ms(8), ServerTime: ms(5), ClientTime: ms(2), Cycle: ms(8)},
		},
		{
			name: "autocommit statements, gap between them",
			ops: []op{
				{at: 0, ev: 's'}, {at: 2, ev: 'a'}, {at: 3, ev: 'd'},
				{at: 7, ev: 's'}, {at: 9, ev: 'a'}, {at: 10, ev: 'd'},
				{at: 14, ev: 's'}, {at: 16, ev: 'a'}, {at: 17, ev: 'd'},
			},
			at: 2 * time.Second,
			// Gaps 4 ms after the first two; latency 3 each.
			want: App{Sessions: 1, Transactions: 3, RoundTrips: 1, Latency: ms(3), ServerTime: ms(2), ClientTime: ms(4), Cycle: ms(7)},
		},
		{
			name: "pipelined requests count once",
			ops: []op{
				{at: 0, ev: 's'}, {at: 0.5, ev: 's'}, {at: 0.5, ev: 's'}, // BEGIN; UPDATE; COMMIT sent together
				{at: 2, ev: 'a'}, {at: 2, ev: 'p', open: true}, {at: 3, ev: 'p', open: true}, {at: 4, ev: 'd'},
			},
			at:   2 * time.Second,
			want: App{Sessions: 1, Transactions: 1, RoundTrips: 1, Latency: ms(4), ServerTime: ms(1.5), ClientTime: 0, Cycle: ms(4)},
		},
		{
			name: "open transaction at close is not counted",
			ops: []op{
				{at: 0, ev: 's'}, {at: 1, ev: 'a'}, {at: 1, ev: 'd'},
				{at: 2, ev: 's'}, {at: 3, ev: 'a'}, {at: 3, ev: 'd', open: true},
				{at: 4, ev: 'c'},
				{at: 5, ev: 's'}, {at: 6, ev: 'd'}, // after close: ignored
			},
			at: 2 * time.Second,
			// The gap before the unfinished transaction is not counted.
			want: App{Sessions: 1, Transactions: 1, RoundTrips: 1, Latency: ms(1), ServerTime: ms(1), Cycle: ms(1)},
		},
		{
			name: "answer without a request is ignored",
			ops: []op{
				{at: 0, ev: 'a'}, {at: 0, ev: 'd'},
				{at: 1, ev: 's'}, {at: 3, ev: 'd'}, // first byte and end together
			},
			at:   2 * time.Second,
			want: App{Sessions: 1, Transactions: 1, RoundTrips: 1, Latency: ms(2), ServerTime: ms(2), Cycle: ms(2)},
		},
		{
			name: "a prepare round trip outside a transaction is client time",
			ops: []op{
				{at: 0, ev: 's'}, {at: 1, ev: 'a'}, {at: 1, ev: 'd'},
				{at: 3, ev: 'n'}, {at: 4, ev: 'a'}, {at: 4, ev: 'd'}, // Parse/Sync
				{at: 6, ev: 's'}, {at: 7, ev: 'a'}, {at: 8, ev: 'd'},
			},
			at: 2 * time.Second,
			// Gap 1 -> 6 is 5 ms; one gap over two transactions.
			want: App{Sessions: 1, Transactions: 2, RoundTrips: 1, Latency: ms(1.5), ServerTime: ms(1), ClientTime: ms(5), Cycle: ms(6.5)},
		},
		{
			name: "a prepare inside a transaction is a round trip",
			ops: []op{
				{at: 0, ev: 'n'}, {at: 1, ev: 'd', open: true}, // BEGIN as COM_QUERY is a statement; here a ping in the transaction
				{at: 2, ev: 's'}, {at: 3, ev: 'd'},
			},
			at:   2 * time.Second,
			want: App{Sessions: 1, Transactions: 1, RoundTrips: 2, Latency: ms(3), ServerTime: ms(2), ClientTime: ms(1), Cycle: ms(3)},
		},
		{
			name: "out of the window",
			ops: []op{
				{at: 0, ev: 's'}, {at: 1, ev: 'd'},
			},
			at:   61 * time.Second,
			want: App{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tb := New(Options{})
			run(tb, []Key{pgApp}, tt.ops)
			apps := tb.Snapshot(t0.Add(tt.at))
			if tt.want.Transactions == 0 {
				if len(apps) != 0 {
					t.Fatalf("Snapshot = %+v, want none", apps)
				}
				return
			}
			if len(apps) != 1 {
				t.Fatalf("Snapshot has %d apps, want 1: %+v", len(apps), apps)
			}
			g, w := apps[0], tt.want
			if g.Key() != pgApp {
				t.Errorf("key %+v, want %+v", g.Key(), pgApp)
			}
			if g.Transactions != w.Transactions || g.RoundTrips != w.RoundTrips || g.Latency != w.Latency ||
				g.ServerTime != w.ServerTime || g.ClientTime != w.ClientTime || g.Cycle != w.Cycle || g.Sessions != w.Sessions {
				t.Errorf("got  %+v\nwant %+v", g, w)
			}
			// Rates over the time since the app was first seen.
			if want := float64(w.Transactions) / tt.at.Seconds(); math.Abs(g.TPS-want) > 1e-9 {
				t.Errorf("TPS = %v, want %v", g.TPS, want)
			}
		})
	}
}

func TestConcurrencyAndSessions(t *testing.T) {
	tb := New(Options{Window: 10 * time.Second})
	// Two sessions, each in a 100 ms transaction every 200 ms for 10 s.
	c1, c2 := tb.Open(pgApp, t0, nil), tb.Open(pgApp, t0, nil)
	for i := range 50 {
		for j, c := range []*Conn{c1, c2} {
			s := t0.Add(time.Duration(i)*200*time.Millisecond + time.Duration(j)*time.Millisecond)
			c.Send(s, true)
			c.Answer(s.Add(50 * time.Millisecond))
			c.Done(s.Add(100*time.Millisecond), true, false)
		}
	}
	c2.Close(t0.Add(10 * time.Second))
	a := tb.Snapshot(t0.Add(10 * time.Second))
	if len(a) != 1 {
		t.Fatalf("apps %+v", a)
	}
	g := a[0]
	if g.Sessions != 2 {
		t.Errorf("Sessions = %d, want 2", g.Sessions)
	}
	if math.Abs(g.Concurrency-1) > 0.02 {
		t.Errorf("Concurrency = %v, want about 1 (2 sessions half the time in a transaction)", g.Concurrency)
	}
	if math.Abs(g.TPS-10) > 0.2 {
		t.Errorf("TPS = %v, want about 10", g.TPS)
	}
	if g.Cycle != 200*time.Millisecond {
		t.Errorf("Cycle = %v, want 200ms", g.Cycle)
	}
	// 20 s later both are out of the window: the app is forgotten.
	if a := tb.Snapshot(t0.Add(30 * time.Second)); len(a) != 0 {
		t.Errorf("late snapshot %+v, want none", a)
	}
}

func TestMaxApps(t *testing.T) {
	tb := New(Options{MaxApps: 2})
	for i, name := range []string{"a", "b", "c", "d"} {
		c := tb.Open(Key{Protocol: "mysql", User: name}, t0, nil)
		now := t0.Add(time.Duration(i) * time.Millisecond)
		c.Send(now, true)
		c.Done(now.Add(time.Millisecond), true, false)
	}
	apps := tb.Snapshot(t0.Add(time.Second))
	if len(apps) != 3 {
		t.Fatalf("apps = %+v, want a, b and (other)", apps)
	}
	o := apps[0]
	if o.User != Other || o.Transactions != 2 || o.Sessions != 2 {
		t.Errorf("other = %+v, want 2 transactions of 2 sessions", o)
	}
}

func TestRoundTripsP95(t *testing.T) {
	tb := New(Options{})
	c := tb.Open(pgApp, t0, nil)
	now := t0
	// 19 transactions of 7 round trips, one of 40.
	for i := range 20 {
		n := 7
		if i == 10 {
			n = 40
		}
		for j := range n {
			now = now.Add(time.Millisecond)
			c.Send(now, true)
			c.Done(now.Add(time.Microsecond), true, j < n-1)
		}
	}
	a := tb.Snapshot(now)[0]
	if a.RoundTripsP95 != 7 {
		t.Errorf("p95 = %v, want 7", a.RoundTripsP95)
	}
	if want := (19*7 + 40) / 20.0; a.RoundTrips != want {
		t.Errorf("mean = %v, want %v", a.RoundTrips, want)
	}
}

func TestSampler(t *testing.T) {
	tb := New(Options{})
	calls := 0
	c := tb.Open(pgApp, t0, func() (time.Duration, time.Duration) {
		calls++
		return ms(1), ms(2)
	})
	// 100 transactions of 2 round trips within 0.5 s: one sample.
	for i := range 100 {
		s := t0.Add(time.Duration(i) * 5 * time.Millisecond)
		c.Send(s, true)
		c.Done(s.Add(ms(1)), true, true)
		c.Send(s.Add(ms(2)), true)
		c.Done(s.Add(ms(4)), true, false)
	}
	if calls != 1 {
		t.Errorf("sampled %d times, want 1", calls)
	}
	a := tb.Snapshot(t0.Add(time.Second))[0]
	if a.ClientRTT != ms(1) || a.UpstreamRTT != ms(2) {
		t.Errorf("RTTs %v %v", a.ClientRTT, a.UpstreamRTT)
	}
	// Sampled at the first answer: every transaction has 2 x 3 ms.
	if want := ms(6); a.NetworkWait != want {
		t.Errorf("NetworkWait = %v, want %v", a.NetworkWait, want)
	}
	if a.NetworkShare != 1 {
		t.Errorf("NetworkShare = %v, want 1 (clamped)", a.NetworkShare)
	}
}

func TestPredict(t *testing.T) {
	tests := []struct {
		a       App
		added   time.Duration
		latency time.Duration
		tps     float64
	}{
		// sysbench reference: 20 round trips, 49 ms cycle at 4 threads.
		{App{RoundTrips: 20, Latency: ms(49), Cycle: ms(49), TPS: 81.6}, ms(10), ms(249), 81.6 * 49 / 249},
		{App{RoundTrips: 7, Latency: ms(2), Cycle: ms(3), TPS: 1000}, ms(1), ms(9), 1000 * 3.0 / 10},
		{App{RoundTrips: 7, Latency: ms(2), TPS: 1000}, ms(1), ms(9), 1000 * 2.0 / 9},
		{App{RoundTrips: 3, Latency: ms(2), Cycle: ms(3), TPS: 5}, 0, ms(2), 5},
		{App{RoundTrips: 3, Latency: ms(2), Cycle: ms(3), TPS: 5}, -ms(1), ms(2), 5},
		{App{}, ms(10), 0, 0},
	}
	for _, tt := range tests {
		p := Predict(tt.a, tt.added)
		if p.Latency != tt.latency || math.Abs(p.TPS-tt.tps) > 1e-9 {
			t.Errorf("Predict(%+v, %v) = %+v, want latency %v tps %v", tt.a, tt.added, p, tt.latency, tt.tps)
		}
	}
	if d := JobDuration(App{RoundTrips: 20, Cycle: ms(1)}, 1000, ms(10)); d != 201*time.Second {
		t.Errorf("JobDuration = %v, want 201s", d)
	}
}

func TestParseRTTs(t *testing.T) {
	tests := []struct {
		in   string
		want []time.Duration
		bad  bool
	}{
		{in: "", want: DefaultRTTs},
		{in: "10ms", want: []time.Duration{ms(10)}},
		{in: "1ms, 5ms,0.5ms", want: []time.Duration{ms(1), ms(5), ms(0.5)}},
		{in: "10", want: []time.Duration{ms(10)}},
		{in: "2.5", want: []time.Duration{ms(2.5)}},
		{in: "-1ms", bad: true},
		{in: "2h", bad: true},
		{in: "abc", bad: true},
		{in: "1ms,", bad: true},
	}
	for _, tt := range tests {
		got, err := ParseRTTs(tt.in)
		if (err != nil) != tt.bad {
			t.Errorf("ParseRTTs(%q) error %v, want bad=%v", tt.in, err, tt.bad)
			continue
		}
		if !tt.bad && !equal(got, tt.want) {
			t.Errorf("ParseRTTs(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func equal(a, b []time.Duration) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func BenchmarkConnRoundTrip(b *testing.B) {
	tb := New(Options{})
	c := tb.Open(pgApp, t0, nil)
	now := t0
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(time.Microsecond)
		c.Send(now, true)
		if c.Awaiting() {
			c.Answer(now)
		}
		c.Done(now, true, false)
	}
}

// TestClosedSessions: sessions that closed count while their last
// transaction is in the window, whatever order they closed in.
func TestClosedSessions(t *testing.T) {
	tb := New(Options{Window: 10 * time.Second})
	late, early := tb.Open(pgApp, t0, nil), tb.Open(pgApp, t0, nil)
	txn := func(c *Conn, at time.Duration) {
		c.Send(t0.Add(at), true)
		c.Done(t0.Add(at+time.Millisecond), true, false)
	}
	txn(late, 8*time.Second)
	txn(early, 1*time.Second)
	late.Close(t0.Add(9 * time.Second)) // closes first, last transaction at 8 s
	early.Close(t0.Add(9 * time.Second))
	for _, tc := range []struct {
		at   time.Duration
		want int
	}{{9 * time.Second, 2}, {11 * time.Second, 1}, {17 * time.Second, 1}} {
		apps := tb.Snapshot(t0.Add(tc.at))
		if len(apps) != 1 || apps[0].Sessions != tc.want {
			t.Errorf("at %v: %+v, want %d sessions", tc.at, apps, tc.want)
		}
	}
}
