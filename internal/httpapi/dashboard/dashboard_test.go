package dashboard_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sluicelab/sluice/internal/httpapi/dashboard"
	"github.com/sluicelab/sluice/internal/link"
	"github.com/sluicelab/sluice/internal/session"
	"github.com/sluicelab/sluice/internal/wlm"
	"github.com/sluicelab/sluice/internal/wlm/views"
	"github.com/sluicelab/sluice/internal/wlm/wlmtest"
)

// fixture is a manager in virtual time (wlmtest.Env) and the dashboard over it.
type fixture struct {
	*wlmtest.Env
	d *dashboard.Dashboard
}

func newFixture(t testing.TB, keep int) *fixture {
	t.Helper()
	// No low-priority limit: Low sends then pass at once in virtual time.
	e := wlmtest.New(t, `SET low_priority_bandwidth = 0;
		CREATE LINK wan WITH (capacity = '1Gbit', delay = '5ms', rate = '10MB');
		CREATE EXCEPT RULE hog WITH (bandwidth = 1, action = 'penalty');
		CREATE RESOURCE POOL bulk WITH (except_rule = 'hog', network_priority = 'low')`)
	e.SetRoute(t, "r", wlm.Route{Link: "wan", Protocol: "postgres", CanCancel: true})
	d, err := dashboard.New(dashboard.Options{Catalog: e.Manager.Service(), Runtime: e.Manager.Runtime(), Views: e.Manager.Views(), Clock: e.Clock, Keep: keep, Top: 2, Version: "v-test"})
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{Env: e, d: d}
}

func send(t testing.TB, fl *link.Flow, n int, c link.Class) {
	t.Helper()
	if _, err := fl.Send(context.Background(), n, c); err != nil {
		t.Fatal(err)
	}
}

// TestSeries steps the sampler in virtual time: rates per class and per
// pool, null delays for silent classes, the ring's size and order.
func TestSeries(t *testing.T) {
	f := newFixture(t, 3)
	def := f.Manager.Runtime().Link("default")
	normal := def.Flow(link.Down, "")
	low := def.Flow(link.Up, "bulk")
	defer normal.Close()
	defer low.Close()

	f.d.Sample(f.Clock.Now()) // first sample: counters only
	if snap := f.d.Snapshot(context.Background(), f.Clock.Now()); len(snap.Series.Times) != 0 {
		t.Fatalf("%d samples after the first call", len(snap.Series.Times))
	}
	for i := 1; i <= 5; i++ {
		send(t, normal, 1000*i, link.Normal)
		if i%2 == 0 {
			send(t, low, 500, link.Low)
		}
		f.Clock.Advance(2 * time.Second)
		f.d.Sample(f.Clock.Now())
	}
	snap := f.d.Snapshot(context.Background(), f.Clock.Now())
	s := snap.Series
	if len(s.Times) != 3 || s.Times[0] >= s.Times[1] || s.Times[1] >= s.Times[2] {
		t.Fatalf("times = %v, want the last 3 samples in order", s.Times)
	}
	// Samples 3, 4, 5: normal sent 3000, 4000, 5000 bytes over 2 s each.
	wantNormal := []float64{1500, 2000, 2500}
	wantLow := []float64{0, 250, 0}
	for i := range 3 {
		if s.Classes["normal"][i] != wantNormal[i] || s.Classes["low"][i] != wantLow[i] || s.Classes["high"][i] != 0 {
			t.Errorf("sample %d: normal %v low %v high %v", i, s.Classes["normal"][i], s.Classes["low"][i], s.Classes["high"][i])
		}
		if s.Pools["bulk"][i] != wantLow[i] || s.Pools[""][i] != wantNormal[i] {
			t.Errorf("sample %d: pools %v", i, s.Pools)
		}
		if d := s.DelayMS["normal"][i]; d == nil || *d != 0 {
			t.Errorf("sample %d: normal delay %v, want 0 (an unlimited link)", i, d)
		}
		if d := s.DelayMS["high"][i]; d != nil {
			t.Errorf("sample %d: high delay %v, want null (nothing sent)", i, *d)
		}
	}
	if (s.DelayMS["low"][0] != nil) || (s.DelayMS["low"][1] == nil) {
		t.Errorf("low delays = %v, want null where the class sent nothing", s.DelayMS["low"])
	}
	if snap.Window != 3 || snap.Interval != 1 || snap.Version != "v-test" {
		t.Errorf("window %v interval %v version %q", snap.Window, snap.Interval, snap.Version)
	}
}

// TestSnapshotFirings: the page's rule firings come from the firing
// history: a firing is listed, newest first, after thousands of ordinary
// statements have ended since, with the statement's user, pool and text.
func TestSnapshotFirings(t *testing.T) {
	f := newFixture(t, 10)
	ctx := context.Background()
	if _, err := f.Manager.Service().Exec(ctx, "CREATE USER ann RESOURCE POOL 'bulk'"); err != nil {
		t.Fatal(err)
	}
	s := f.Registry.Open(session.Info{Route: "r", Protocol: "postgres", Link: "wan"}, f.Clock.Now())
	s.SetIdentity("ann", "db", "")
	hog := s.Begin("SELECT hog", f.Clock.Now())
	for range 6 { // the rule is checked every except_check_period, 5 s
		f.Manager.Rules().Evaluate(ctx, f.Clock.Now())
		hog.AddDown(5_000_000)
		f.Clock.Advance(time.Second)
	}
	f.Manager.Rules().Evaluate(ctx, f.Clock.Now())
	if !hog.Snapshot().Penalized {
		t.Fatal("the rule did not fire")
	}
	hog.End(f.Clock.Now(), session.OK, 1, "")
	for i := range 3000 {
		s.Begin(fmt.Sprint("SELECT ", i), f.Clock.Now()).End(f.Clock.Now(), session.OK, 1, "")
	}
	snap := f.d.Snapshot(ctx, f.Clock.Now())
	if len(snap.Firings) != 1 {
		t.Fatalf("firings = %+v, want the one firing", snap.Firings)
	}
	if x := snap.Firings[0]; x["rule"] != "hog" || x["action"] != "penalty" || x["usename"] != "ann" || x["resource_pool"] != "bulk" || x["query"] != "SELECT hog" || x["statement_id"] != fmt.Sprint(hog.ID) || x["outcome"] != wlm.OutcomePenalized {
		t.Errorf("firing = %v", x)
	}
}

// TestSnapshotRuleBlockTime: a blocktime rule shows its threshold in the
// page's rules, as the console's SHOW RULES does.
func TestSnapshotRuleBlockTime(t *testing.T) {
	f := newFixture(t, 10)
	if _, err := f.Manager.Service().Exec(context.Background(), "CREATE EXCEPT RULE queued WITH (blocktime=2.5, action='abort')"); err != nil {
		t.Fatal(err)
	}
	snap := f.d.Snapshot(context.Background(), f.Clock.Now())
	for _, r := range snap.Rules {
		if r["name"] == "queued" {
			if r["blocktime"] != "2.5s" {
				t.Errorf("rule queued: blocktime %q, want 2.5s", r["blocktime"])
			}
			return
		}
	}
	t.Errorf("rules %+v lack queued", snap.Rules)
}

// TestSnapshotLists checks the statement, rule, link and setting lists.
func TestSnapshotLists(t *testing.T) {
	f := newFixture(t, 10)
	now := f.Clock.Now()
	s := f.Registry.Open(session.Info{Route: "r", Protocol: "postgres", Link: "wan"}, now)
	s.SetIdentity("ann", "db", "")
	s.SetPool("bulk")
	slow := s.Begin("SELECT slow", now)
	fast := s.Begin("SELECT fast", now)
	idle := s.Begin("SELECT idle", now)
	f.d.Sample(now)
	slow.AddDown(1000)
	fast.AddDown(50_000)
	f.Clock.Advance(time.Second)
	f.d.Sample(f.Clock.Now())
	slow.Penalize("except rule hog (penalty): bandwidth 2MB/s > 1MB/s")
	ended := s.Begin("SELECT over", f.Clock.Now())
	ended.NoteException("except rule hog (penalty): bandwidth 3MB/s > 1MB/s")
	ended.AddUp(100)
	f.Clock.Advance(time.Second)
	ended.End(f.Clock.Now(), session.OK, 1, "")

	snap := f.d.Snapshot(context.Background(), f.Clock.Now())
	if len(snap.Statements) != 2 || snap.Statements[0].ID != fast.ID || snap.Statements[1].ID != slow.ID {
		t.Fatalf("top statements = %+v, want fast then slow (Top 2)", snap.Statements)
	}
	top, pen := snap.Statements[0], snap.Statements[1]
	if top.Rate != 50_000 || top.Class != "low" || top.Pool != "bulk" || top.User != "ann" || top.State != "running" {
		t.Errorf("fast = %+v", top)
	}
	if !pen.Penalized || pen.Class != "low" || len(pen.Except) != 1 || pen.Rate != 1000 {
		t.Errorf("penalised = %+v", pen)
	}
	for _, x := range snap.Statements {
		if x.ID == idle.ID {
			t.Errorf("the idle statement is listed beyond Top")
		}
	}
	if len(snap.Firings) != 0 {
		t.Errorf("firings = %+v; no rule fired (a noted exception is not a firing)", snap.Firings)
	}
	if len(snap.Rules) != 1 || snap.Rules[0]["name"] != "hog" || snap.Rules[0]["pools"] != "bulk" || snap.Rules[0]["elapsedtime"] != "-1" {
		t.Errorf("rules = %+v", snap.Rules)
	}
	if len(snap.Links) != 2 || snap.Links[1]["name"] != "wan" || snap.Links[1]["capacity"] != "125MB/s" ||
		snap.Links[1]["emulation"] != "delay=5ms rate=10MB/s" || snap.Links[1]["routes"] != "r" {
		t.Errorf("links = %+v", snap.Links)
	}
	if snap.Settings["low_priority_bandwidth"] != "unlimited" || snap.Settings["network_control"] != "on" {
		t.Errorf("settings = %v", snap.Settings)
	}
	if snap.Sessions != 1 || snap.Running != 3 {
		t.Errorf("sessions %d running %d", snap.Sessions, snap.Running)
	}
	// The JSON the page reads.
	rec := httptest.NewRecorder()
	f.d.ServeSnapshot(rec, httptest.NewRequest("GET", "/api/snapshot", nil))
	var back map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"series", "statements", "firings", "rules", "links", "settings", "window_seconds"} {
		if _, ok := back[k]; !ok {
			t.Errorf("snapshot JSON lacks %q", k)
		}
	}
}

// TestPage checks that the page and its assets are served from the
// binary with a restrictive content security policy.
func TestPage(t *testing.T) {
	f := newFixture(t, 10)
	page := f.d.Page()
	for path, want := range map[string]string{"/": "<svg id=\"chart-classes\"", "/static/app.js": "function chart(", "/static/style.css": ".chart"} {
		rec := httptest.NewRecorder()
		page.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		if rec.Code != 200 || !strings.Contains(rec.Body.String(), want) {
			t.Errorf("GET %s: %d, body lacks %q", path, rec.Code, want)
		}
		if csp := rec.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") {
			t.Errorf("GET %s: CSP %q", path, csp)
		}
	}
	rec := httptest.NewRecorder()
	page.ServeHTTP(rec, httptest.NewRequest("GET", "/static/missing.js", nil))
	if rec.Code != 404 {
		t.Errorf("missing asset: %d", rec.Code)
	}
	// No external resource: every src and href is local.
	rec = httptest.NewRecorder()
	page.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	if strings.Contains(rec.Body.String(), "http://") || strings.Contains(rec.Body.String(), "https://") {
		t.Error("the page refers to an external resource")
	}
}

func BenchmarkSnapshot(b *testing.B) {
	f := newFixture(b, dashboard.DefaultKeep)
	fl := f.Manager.Runtime().Link("default").Flow(link.Down, "bulk")
	defer fl.Close()
	now := f.Clock.Now()
	for i := range 20 {
		s := f.Registry.Open(session.Info{Route: "r"}, now)
		s.SetIdentity("u", "db", "")
		s.Begin("SELECT "+string(rune('a'+i)), now).AddDown(i * 1000)
	}
	for range dashboard.DefaultKeep + 1 {
		send(b, fl, 10_000, link.Normal)
		f.Clock.Advance(time.Second)
		f.d.Sample(f.Clock.Now())
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		f.d.Snapshot(ctx, f.Clock.Now())
	}
}

func BenchmarkSample(b *testing.B) {
	f := newFixture(b, dashboard.DefaultKeep)
	b.ReportAllocs()
	for b.Loop() {
		f.Clock.Advance(time.Second)
		f.d.Sample(f.Clock.Now())
	}
}

// TestSnapshotNetwork: the page shows the network view's rows, as SHOW
// NETWORK does.
func TestSnapshotNetwork(t *testing.T) {
	f := newFixture(t, 10)
	f.Manager.Views().Register("network", views.NetworkSource(func() []views.NetworkRow {
		return []views.NetworkRow{{Link: "wan", Direction: "down", Side: "send", State: "bottleneck", Bottleneck: 25_000_000,
			BaseRTT: 100 * time.Microsecond, QueueDelay: time.Millisecond, LowRate: 5_000_000}}
	}))
	snap := f.d.Snapshot(context.Background(), f.Clock.Now())
	if len(snap.Network) != 1 {
		t.Fatalf("network = %+v, want one row", snap.Network)
	}
	r := snap.Network[0]
	if r["link"] != "wan" || r["state"] != "bottleneck" || r["bottleneck_bytes_per_second"] != "25000000" || r["queue_delay_ms"] != "1.000" || r["low_rate_bytes_per_second"] != "5000000" {
		t.Errorf("network row %v", r)
	}
}
