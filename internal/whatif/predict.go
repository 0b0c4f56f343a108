package whatif

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// App is one application over a Table's window. Means are per completed
// transaction.
type App struct {
	Protocol, User, Database, Application string
	Sessions                              int           // sessions that completed a transaction in the window
	Transactions                          int64         // completed in the window
	TPS                                   float64       // transactions per second over the window
	Concurrency                           float64       // mean sessions inside a transaction (sum of latencies / window)
	RoundTrips                            float64       // mean per transaction
	RoundTripsP95                         float64       // 95th percentile per transaction (exact up to 31)
	Latency                               time.Duration // mean per transaction (L)
	Cycle                                 time.Duration // mean per transaction incl. client time after it
	ServerTime                            time.Duration // mean per transaction
	ClientTime                            time.Duration // mean per transaction, inside it and after it
	NetworkWait                           time.Duration // mean per transaction: round trips x (ClientRTT + UpstreamRTT)
	ClientRTT                             time.Duration // mean kernel RTT of the client sockets (tcpi_min_rtt)
	UpstreamRTT                           time.Duration // mean kernel RTT of the upstream sockets (tcpi_min_rtt)
	NetworkShare                          float64       // NetworkWait / Latency, 0..1
}

// Key returns a's application key.
func (a App) Key() Key {
	return Key{Protocol: a.Protocol, User: a.User, Database: a.Database, Application: a.Application}
}

// Prediction is what an application becomes at RTT more round-trip time.
type Prediction struct {
	RTT     time.Duration // added round-trip time
	Latency time.Duration // mean transaction latency
	TPS     float64       // transactions per second, same concurrency
}

// Predict returns a's latency and throughput with added round-trip time
// on every round trip (see the package comment): latency L + r·added,
// throughput TPS·cycle/(cycle + r·added). A negative added is taken as
// 0; an application with no cycle keeps its TPS.
func Predict(a App, added time.Duration) Prediction {
	added = max(added, 0)
	extra := time.Duration(a.RoundTrips * float64(added))
	p := Prediction{RTT: added, Latency: a.Latency + extra, TPS: a.TPS}
	cycle := a.Cycle
	if cycle <= 0 {
		cycle = a.Latency
	}
	if cycle > 0 && extra > 0 {
		p.TPS = a.TPS * float64(cycle) / float64(cycle+extra)
	}
	return p
}

// JobDuration returns how long a single-stream job of n transactions of
// a takes with added round-trip time: n·(cycle + r·added).
func JobDuration(a App, n int64, added time.Duration) time.Duration {
	cycle := a.Cycle
	if cycle <= 0 {
		cycle = a.Latency
	}
	return time.Duration(float64(n) * (float64(cycle) + a.RoundTrips*float64(max(added, 0))))
}

// DefaultRTTs are the added RTTs shown when none are asked for.
var DefaultRTTs = []time.Duration{time.Millisecond, 5 * time.Millisecond, 10 * time.Millisecond, 50 * time.Millisecond}

// MaxRTT bounds an added RTT ParseRTTs accepts.
const MaxRTT = time.Hour

// maxRTTs bounds how many RTTs one list may hold.
const maxRTTs = 32

// ParseRTTs reads a comma-separated list of durations ("1ms,5ms,10ms";
// a bare number is milliseconds). Empty is DefaultRTTs. Each must be in
// 0..MaxRTT, and at most 32 are accepted.
func ParseRTTs(s string) ([]time.Duration, error) {
	if strings.TrimSpace(s) == "" {
		return append([]time.Duration(nil), DefaultRTTs...), nil
	}
	parts := strings.Split(s, ",")
	if len(parts) > maxRTTs {
		return nil, fmt.Errorf("at most %d RTTs, got %d", maxRTTs, len(parts))
	}
	out := make([]time.Duration, 0, len(parts))
	for _, p := range parts {
		p = strings.TrimSpace(p)
		var d time.Duration
		if numeric(p) {
			ms, err := strconv.ParseFloat(p, 64)
			if err != nil || ms > float64(MaxRTT/time.Millisecond) || ms < 0 {
				return nil, fmt.Errorf("invalid RTT %q: must be between 0 and %s", p, MaxRTT)
			}
			d = time.Duration(ms * float64(time.Millisecond))
		} else {
			var err error
			if d, err = time.ParseDuration(p); err != nil {
				return nil, fmt.Errorf("invalid RTT %q: want a duration such as 10ms", p)
			}
		}
		if d < 0 || d > MaxRTT {
			return nil, fmt.Errorf("invalid RTT %q: must be between 0 and %s", p, MaxRTT)
		}
		out = append(out, d)
	}
	return out, nil
}

// numeric reports whether s is a plain decimal number.
func numeric(s string) bool {
	if s == "" {
		return false
	}
	dot := false
	for i, r := range s {
		switch {
		case r >= '0' && r <= '9':
		case r == '.' && !dot:
			dot = true
		case (r == '+' || r == '-') && i == 0:
		default:
			return false
		}
	}
	return s != "." && s != "+" && s != "-"
}

// Millis renders d as float milliseconds.
func Millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
