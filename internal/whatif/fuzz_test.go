package whatif

import (
	"testing"
	"time"
)

// FuzzEvents drives up to four sessions of two applications with any
// sequence of events (each byte: session, statement or not, time step, event) and checks
// that nothing panics and no figure is negative or out of range.
func FuzzEvents(f *testing.F) {
	f.Add([]byte{0x00, 0x11, 0x22, 0x02, 0x13})
	f.Add([]byte{0x00, 0x01, 0x02, 0x00, 0x01, 0x03, 0x04, 0x05})
	f.Add([]byte{0x40, 0x80, 0xc0, 0x41, 0x81, 0xc2, 0x07, 0x47})
	f.Fuzz(func(t *testing.T, ev []byte) {
		tb := New(Options{Window: 5 * time.Second, MaxApps: 1})
		keys := []Key{{Protocol: "postgres", User: "a"}, {Protocol: "postgres", User: "b"}}
		var conns [4]*Conn
		now := t0
		for i := range conns {
			conns[i] = tb.Open(keys[i%2], now, func() (time.Duration, time.Duration) { return time.Millisecond, 0 })
		}
		for _, b := range ev {
			c := conns[b>>6]
			now = now.Add(time.Duration(b>>3&3) * 300 * time.Millisecond)
			switch b & 7 {
			case 0:
				c.Send(now, b&0x20 == 0)
			case 1:
				c.Answer(now)
			case 2:
				c.Done(now, true, false)
			case 3:
				c.Done(now, true, true)
			case 4:
				c.Done(now, false, false)
			case 5:
				c.Done(now, false, true)
			case 6:
				c.Close(now)
			case 7:
				check(t, tb.Snapshot(now))
			}
		}
		check(t, tb.Snapshot(now))
	})
}

func check(t *testing.T, apps []App) {
	t.Helper()
	for _, a := range apps {
		if a.Transactions <= 0 || a.Sessions < 0 || a.TPS < 0 || a.Concurrency < 0 || a.RoundTrips < 0 ||
			a.RoundTripsP95 < 0 || a.Latency < 0 || a.Cycle < a.Latency || a.ServerTime < 0 ||
			a.ClientTime < 0 || a.NetworkWait < 0 || a.NetworkShare < 0 || a.NetworkShare > 1 {
			t.Fatalf("bad figures: %+v", a)
		}
		if a.ServerTime > a.Latency {
			t.Fatalf("server time %v above latency %v: %+v", a.ServerTime, a.Latency, a)
		}
		for _, x := range []time.Duration{0, time.Millisecond, time.Second} {
			p := Predict(a, x)
			if p.TPS < 0 || p.TPS > a.TPS || p.Latency < a.Latency {
				t.Fatalf("Predict(%v) = %+v for %+v", x, p, a)
			}
		}
	}
}
