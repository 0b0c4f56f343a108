package httpapi_test

import (
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/sluicelab/sluice/internal/whatif"
)

// TestWhatIfAPI: GET /api/whatif answers the stack's what-if table with
// predictions at the RTTs asked for (the defaults without rtt), needs
// the token like every endpoint, and refuses a bad rtt with 400 naming
// the field.
func TestWhatIfAPI(t *testing.T) {
	s := newStack(t, stackOptions{token: "tok"})
	tb := s.WhatIf()
	// One session: transactions of 2 round trips, 4 ms each with 1 ms
	// client time after, back to back.
	// The transactions end in the past of the stack's clock: a second
	// ago and on.
	now := time.Now().Add(-time.Second)
	c := tb.Open(whatif.Key{Protocol: "mysql", User: "app", Database: "shop", Application: "api"}, now, nil)
	for range 50 {
		c.Send(now, true)
		c.Done(now.Add(2*time.Millisecond), true, true)
		c.Send(now.Add(2*time.Millisecond), true)
		c.Done(now.Add(4*time.Millisecond), true, false)
		now = now.Add(5 * time.Millisecond)
	}

	var rep whatif.Report
	if err := json.Unmarshal(s.must(t, 200, "GET", "/api/whatif", nil), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.WindowSeconds != 60 || len(rep.RTTsMs) != 4 || rep.RTTsMs[3] != 50 {
		t.Errorf("window %v, rtts %v; want 60 and 1,5,10,50", rep.WindowSeconds, rep.RTTsMs)
	}
	if len(rep.Applications) != 1 {
		t.Fatalf("applications %+v, want one", rep.Applications)
	}
	a := rep.Applications[0]
	if a.Protocol != "mysql" || a.User != "app" || a.Database != "shop" || a.Application != "api" ||
		a.Transactions != 50 || a.RoundTrips != 2 || a.LatencyMs != 4 || a.CycleMs != 5 || len(a.Predictions) != 4 {
		t.Fatalf("application %+v", a)
	}
	// +10 ms per round trip: latency 4 + 20; throughput x 5 / 25.
	p := a.Predictions[2]
	if p.RTTMs != 10 || p.LatencyMs != 24 || math.Abs(p.TPS-a.TPS*5/25) > 1e-9 {
		t.Errorf("prediction at 10 ms %+v (tps %v)", p, a.TPS)
	}

	rep = whatif.Report{}
	if err := json.Unmarshal(s.must(t, 200, "GET", "/api/whatif?rtt=2ms,0.5", nil), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.RTTsMs) != 2 || rep.RTTsMs[0] != 2 || rep.RTTsMs[1] != 0.5 || len(rep.Applications[0].Predictions) != 2 {
		t.Errorf("rtt=2ms,0.5: %+v", rep)
	}
	if e := decodeError(t, s.must(t, 400, "GET", "/api/whatif?rtt=soon", nil)); e.Field != "rtt" {
		t.Errorf("bad rtt: %+v, want field rtt", e)
	}
	s.token = ""
	s.must(t, 401, "GET", "/api/whatif", nil)
}
