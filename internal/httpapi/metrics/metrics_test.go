package metrics_test

import (
	"context"
	"math"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/sluicelab/sluice/internal/httpapi/metrics"
	"github.com/sluicelab/sluice/internal/link"
	"github.com/sluicelab/sluice/internal/netem"
	"github.com/sluicelab/sluice/internal/session"
	"github.com/sluicelab/sluice/internal/whatif"
	"github.com/sluicelab/sluice/internal/wlm"
	"github.com/sluicelab/sluice/internal/wlm/wlmtest"
)

// fixture is a manager in virtual time (wlmtest.Env) and the metrics over it.
type fixture struct {
	*wlmtest.Env
	m *metrics.Metrics
}

func newFixture(t testing.TB, unsent metrics.Unsent) *fixture {
	t.Helper()
	e := wlmtest.New(t, `
		SET low_priority_bandwidth = 0;
		SET metrics_user_labels = 10;
		CREATE LINK lab WITH (capacity = '1MB', delay = '10ms', jitter = '1ms', rate = '2MB');
		CREATE EXCEPT RULE slow WITH (elapsedtime = 1, action = 'penalty');
		CREATE RESOURCE POOL p WITH (except_rule = 'slow', network_priority = 'high');
		CREATE USER u RESOURCE POOL 'p'`)
	e.SetRoute(t, "rt", wlm.Route{Protocol: "postgres", CanCancel: true})
	return &fixture{Env: e, m: newMetrics(t, e, func(o *metrics.Options) { o.Unsent = unsent })}
}

// newMetrics returns metrics over e's manager, without the process
// collectors, with the options edit sets (nil: none); they close when
// the test ends.
func newMetrics(t testing.TB, e *wlmtest.Env, edit func(*metrics.Options)) *metrics.Metrics {
	t.Helper()
	o := metrics.Options{Catalog: e.Manager.Service(), Runtime: e.Manager.Runtime(), Rules: e.Manager.Rules(), Admission: e.Manager.Admission(), NoProcess: true}
	if edit != nil {
		edit(&o)
	}
	m, err := metrics.New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// checkExposes fails t for each line of want that body lacks.
func checkExposes(t testing.TB, body string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(body, w) {
			t.Errorf("exposition lacks %q", w)
		}
	}
}

// scrape returns m's answer to GET /metrics.
func scrape(m *metrics.Metrics) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	return rec
}

func (f *fixture) gather(t testing.TB) map[string]*dto.MetricFamily {
	t.Helper()
	fams, err := f.m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*dto.MetricFamily{}
	for _, fam := range fams {
		out[fam.GetName()] = fam
	}
	return out
}

// value returns the value of the metric of family name with exactly the
// given labels; ok is false if there is none.
func value(fams map[string]*dto.MetricFamily, name string, labels ...string) (v float64, ok bool) {
	fam := fams[name]
	if fam == nil {
		return 0, false
	}
next:
	for _, m := range fam.Metric {
		if len(m.Label)*2 != len(labels) {
			continue
		}
		for i := 0; i < len(labels); i += 2 {
			found := false
			for _, l := range m.Label {
				if l.GetName() == labels[i] && l.GetValue() == labels[i+1] {
					found = true
				}
			}
			if !found {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount()), true
		}
	}
	return 0, false
}

// sample is the value a metric should have: the family's name, the
// metric's label pairs, and the value (a histogram's is its count).
type sample struct {
	name   string
	labels []string
	want   float64
}

// checkSamples fails t for each sample that fams does not hold, or holds
// with another value (more than 1e-9 off).
func checkSamples(t *testing.T, fams map[string]*dto.MetricFamily, samples []sample) {
	t.Helper()
	for _, c := range samples {
		if v, ok := value(fams, c.name, c.labels...); !ok || math.Abs(v-c.want) > 1e-9 {
			t.Errorf("%s%v = %v (found %v), want %v", c.name, c.labels, v, ok, c.want)
		}
	}
}

type unsent map[string]int64

func (u unsent) UnsentBytes() map[string]int64 { return u }

// TestMetrics steps traffic, a session, a statement and a rule firing in
// virtual time and checks every metric family's numbers.
func TestMetrics(t *testing.T) {
	f := newFixture(t, unsent{"rt": 4096, "gone": 7})
	ctx := context.Background()
	t0 := f.Clock.Now()

	down := f.Manager.Runtime().Link("default").Flow(link.Down, "p")
	up := f.Manager.Runtime().Link("default").Flow(link.Up, "")
	defer down.Close()
	defer up.Close()
	for _, c := range []struct {
		fl *link.Flow
		n  int
		cl link.Class
	}{{down, 1000, link.High}, {down, 3000, link.Low}, {up, 200, link.Normal}} {
		if _, err := c.fl.Send(ctx, c.n, c.cl); err != nil {
			t.Fatal(err)
		}
	}

	s := f.Registry.Open(session.Info{Route: "rt", Protocol: "postgres", Link: "default"}, t0)
	s.SetIdentity("u", "db", "")
	s.SetPool("p")
	rs := f.Registry.Open(session.Info{Route: "repl", Protocol: "postgres", Link: "default"}, t0)
	rs.SetIdentity("rep", "", "walreceiver")
	rs.SetKind(session.KindReplication)
	st := s.Begin("SELECT 1", t0)
	f.Clock.Advance(time.Second)
	f.Manager.Rules().Evaluate(ctx, f.Clock.Now())
	if !st.Snapshot().Penalized {
		t.Fatal("the rule did not penalise the statement")
	}

	fams := f.gather(t)
	checkSamples(t, fams, []sample{
		{"sluice_link_bytes_total", []string{"link", "default", "direction", "down", "class", "high"}, 1000},
		{"sluice_link_bytes_total", []string{"link", "default", "direction", "down", "class", "low"}, 3000},
		{"sluice_link_bytes_total", []string{"link", "default", "direction", "up", "class", "normal"}, 200},
		{"sluice_link_bytes_total", []string{"link", "lab", "direction", "up", "class", "normal"}, 0},
		{"sluice_link_pool_bytes_total", []string{"link", "default", "direction", "down", "pool", "p", "class", "low"}, 3000},
		{"sluice_link_pool_bytes_total", []string{"link", "default", "direction", "up", "pool", "", "class", "normal"}, 200},
		{"sluice_link_queue_delay_seconds", []string{"link", "default", "direction", "down", "class", "high"}, 1},
		{"sluice_link_waiting_bytes", []string{"link", "default", "direction", "down", "class", "low"}, 0},
		{"sluice_link_device_queue_bytes", []string{"link", "lab", "direction", "down", "class", "normal"}, 0},
		{"sluice_link_capacity_bytes_per_second", []string{"link", "lab"}, 1e6},
		{"sluice_link_capacity_bytes_per_second", []string{"link", "default"}, 0},
		{"sluice_link_delay_seconds", []string{"link", "lab"}, 0.01},
		{"sluice_link_jitter_seconds", []string{"link", "lab"}, 0.001},
		{"sluice_link_rate_bytes_per_second", []string{"link", "lab"}, 2e6},
		{"sluice_sessions", []string{"route", "rt", "user", "u", "pool", "p"}, 1},
		{"sluice_sessions", []string{"route", "repl", "user", "rep", "pool", ""}, 1},
		{"sluice_sessions_by_kind", []string{"kind", "client"}, 1},
		{"sluice_sessions_by_kind", []string{"kind", "replication"}, 1},
		{"sluice_sessions_by_kind", []string{"kind", "basebackup"}, 0},
		{"sluice_sessions_by_kind", []string{"kind", "logical"}, 0},
		{"sluice_statements_running", []string{"route", "rt", "user", "u", "pool", "p"}, 1},
		{"sluice_statements_penalized", []string{"route", "rt", "user", "u", "pool", "p"}, 1},
		{"sluice_statements_penalized_total", []string{"route", "rt", "user", "u", "pool", "p"}, 1},
		{"sluice_rule_firings_total", []string{"rule", "slow", "action", "penalty"}, 1},
		{"sluice_rule_checks_total", nil, 1},
		{"sluice_rule_cancel_failures_total", nil, 0},
		{"sluice_route_unsent_bytes", []string{"route", "rt"}, 4096},
		{"sluice_route_unsent_bytes", []string{"route", "gone"}, 7},
	})
	if _, ok := value(fams, "sluice_link_pool_bytes_total", "link", "default", "direction", "down", "pool", "p", "class", "normal"); ok {
		t.Error("a pool byte counter is exposed for a class the pool never sent in")
	}
	for name := range fams {
		if strings.HasPrefix(name, "go_") || strings.HasPrefix(name, "process_") {
			t.Errorf("NoProcess still exposes %s", name)
		}
	}

	f.Clock.Advance(1500 * time.Millisecond)
	st.End(f.Clock.Now(), session.OK, 1, "")
	fams = f.gather(t)
	if v, _ := value(fams, "sluice_statements_total", "route", "rt", "user", "u", "pool", "p", "outcome", "ok"); v != 1 {
		t.Errorf("sluice_statements_total = %v, want 1", v)
	}
	h := fams["sluice_statement_duration_seconds"].Metric[0].Histogram
	if h.GetSampleCount() != 1 || math.Abs(h.GetSampleSum()-2.5) > 1e-9 {
		t.Errorf("duration histogram: %d observations, sum %v; want 1 of 2.5 s", h.GetSampleCount(), h.GetSampleSum())
	}
	if v, _ := value(fams, "sluice_statements_penalized", "route", "rt", "user", "u", "pool", "p"); v != 0 {
		t.Errorf("penalised gauge after the statement ended = %v", v)
	}

	// After Close, events are no longer counted.
	f.m.Close()
	s.Begin("SELECT 2", f.Clock.Now()).End(f.Clock.Now(), session.Failed, -1, "57014")
	fams = f.gather(t)
	if _, ok := value(fams, "sluice_statements_total", "route", "rt", "user", "u", "pool", "p", "outcome", "error"); ok {
		t.Error("a statement ended after Close was counted")
	}
}

// TestUserLabels checks the bound on user labels: the first users seen
// up to metrics_user_labels keep their name, the others are "other",
// and the per-route and per-pool counters do not depend on it.
func TestUserLabels(t *testing.T) {
	f := newFixture(t, nil)
	if _, err := f.Manager.Service().Exec(context.Background(), "SET metrics_user_labels = 2"); err != nil {
		t.Fatal(err)
	}
	now := f.Clock.Now()
	for i, u := range []string{"a", "b", "c", "d", "a"} {
		s := f.Registry.Open(session.Info{Route: "rt"}, now)
		s.SetIdentity(u, "db", "")
		s.SetPool("p")
		s.AddUp(100 * (i + 1))
		s.Begin("SELECT", now).End(now, session.OK, 1, "")
		if i < 4 {
			s.Close(now)
		}
	}
	fams := f.gather(t)
	checkSamples(t, fams, []sample{
		{"sluice_statements_total", []string{"route", "rt", "user", "a", "pool", "p", "outcome", "ok"}, 2},
		{"sluice_statements_total", []string{"route", "rt", "user", "b", "pool", "p", "outcome", "ok"}, 1},
		{"sluice_statements_total", []string{"route", "rt", "user", "other", "pool", "p", "outcome", "ok"}, 2},
		{"sluice_sessions", []string{"route", "rt", "user", "a", "pool", "p"}, 1},
		{"sluice_route_statements_total", []string{"route", "rt", "outcome", "ok"}, 5},
		{"sluice_pool_statements_total", []string{"pool", "p", "outcome", "ok"}, 5},
		// Closed sessions' bytes and the open one's.
		{"sluice_route_bytes_total", []string{"route", "rt", "direction", "up"}, 1500},
		{"sluice_route_bytes_total", []string{"route", "rt", "direction", "down"}, 0},
	})
	if _, ok := value(fams, "sluice_statements_total", "route", "rt", "user", "c", "pool", "p", "outcome", "ok"); ok {
		t.Error("a third user got a label of its own")
	}
	// 0 labels nobody, whoever was seen before.
	if _, err := f.Manager.Service().Exec(context.Background(), "SET metrics_user_labels = 0"); err != nil {
		t.Fatal(err)
	}
	if _, ok := value(f.gather(t), "sluice_sessions", "route", "rt", "user", "other", "pool", "p"); !ok {
		t.Error("with metrics_user_labels 0 the open session is not user other")
	}
}

// TestExposition checks that the handler serves the text format with the
// conventional names and help.
func TestExposition(t *testing.T) {
	f := newFixture(t, nil)
	rec := scrape(f.m)
	body := rec.Body.String()
	if rec.Code != 200 || !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/plain") {
		t.Fatalf("status %d, type %q", rec.Code, rec.Header().Get("Content-Type"))
	}
	checkExposes(t, body,
		"# TYPE sluice_link_bytes_total counter",
		"# TYPE sluice_link_queue_delay_seconds histogram",
		`sluice_link_queue_delay_seconds_bucket{class="normal",direction="up",link="default",le="5e-05"} 0`,
		`sluice_link_queue_delay_seconds_bucket{class="normal",direction="up",link="default",le="+Inf"} 0`,
		"# HELP sluice_link_capacity_bytes_per_second",
	)
	if strings.Contains(body, "sluice_route_unsent_bytes") {
		t.Error("unsent bytes exposed without Options.Unsent")
	}
}

// lateness serves fixed histograms as proxy.Server does.
type lateness map[[3]string]*netem.Lateness

func (l lateness) ReleaseLateness(f func(route, direction, wait string, h netem.LatenessSnapshot)) {
	for k, h := range l {
		f(k[0], k[1], k[2], h.Snapshot())
	}
}

// TestReleaseLateness checks the delay lines' lateness histograms:
// buckets in seconds, negative ones included, and no series for a
// histogram that recorded nothing.
func TestReleaseLateness(t *testing.T) {
	f := newFixture(t, nil)
	var used, empty netem.Lateness
	for _, d := range []time.Duration{-30 * time.Microsecond, 10 * time.Microsecond, 3 * time.Millisecond} {
		used.Record(d)
	}
	m := newMetrics(t, f.Env, func(o *metrics.Options) {
		o.Lateness = lateness{
			{"rt", "up", "precise"}: &used,
			{"rt", "down", "timer"}: &empty,
		}
	})
	body := scrape(m).Body.String()
	name := "sluice_emulation_release_lateness_seconds"
	checkExposes(t, body,
		"# TYPE "+name+" histogram",
		name+`_bucket{direction="up",route="rt",wait="precise",le="-5e-05"} 0`,
		name+`_bucket{direction="up",route="rt",wait="precise",le="-2e-05"} 1`,
		name+`_bucket{direction="up",route="rt",wait="precise",le="1e-05"} 2`,
		name+`_bucket{direction="up",route="rt",wait="precise",le="0.005"} 3`,
		name+`_bucket{direction="up",route="rt",wait="precise",le="+Inf"} 3`,
		name+`_sum{direction="up",route="rt",wait="precise"} 0.00298`,
		name+`_count{direction="up",route="rt",wait="precise"} 3`,
	)
	if strings.Contains(body, name+`_count{direction="down"`) {
		t.Error("a histogram that recorded nothing is exposed")
	}
	if strings.Contains(scrape(f.m).Body.String(), name) {
		t.Error("release lateness exposed without Options.Lateness")
	}
}

type panicCounts map[string]uint64

func (p panicCounts) SessionPanics() map[string]uint64 { return p }

type loopCounts struct{ taken, handed uint64 }

func (l loopCounts) LoopSessions() (uint64, uint64) { return l.taken, l.handed }

type resetCount uint64

func (r resetCount) Resets() uint64 { return uint64(r) }

// TestOptionalCounters checks the counters fed by an optional source,
// and that each is absent without its source.
func TestOptionalCounters(t *testing.T) {
	for _, tc := range []struct {
		name   string // the counter
		source string // the Options field that feeds it
		set    func(*metrics.Options)
		want   []string // series besides the TYPE line, without the name
	}{
		{"sluice_session_panics_total", "Panics",
			func(o *metrics.Options) { o.Panics = panicCounts{"pg": 3, "my": 1} },
			[]string{`{route="pg"} 3`, `{route="my"} 1`}},
		{"sluice_event_loop_sessions_total", "Loops",
			func(o *metrics.Options) { o.Loops = loopCounts{taken: 7, handed: 2} },
			[]string{`{event="taken"} 7`, `{event="handed"} 2`}},
		{"sluice_catalog_store_resets_total", "StoreResets",
			func(o *metrics.Options) { o.StoreResets = resetCount(2) },
			[]string{" 2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, nil)
			body := scrape(newMetrics(t, f.Env, tc.set)).Body.String()
			want := []string{"# TYPE " + tc.name + " counter"}
			for _, w := range tc.want {
				want = append(want, tc.name+w)
			}
			checkExposes(t, body, want...)
			if strings.Contains(scrape(f.m).Body.String(), tc.name) {
				t.Errorf("%s exposed without Options.%s", tc.name, tc.source)
			}
		})
	}
}

func BenchmarkGather(b *testing.B) {
	f := newFixture(b, unsent{"rt": 1})
	now := f.Clock.Now()
	for i := range 50 {
		s := f.Registry.Open(session.Info{Route: "rt"}, now)
		s.SetIdentity("u", "db", "")
		s.SetPool("p")
		if i%2 == 0 {
			s.Begin("SELECT", now)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := f.m.Registry().Gather(); err != nil {
			b.Fatal(err)
		}
	}
}

// TestCatalogRevisionAndStale: sluice_catalog_revision follows the
// manager's applied revision through a change; the stale-since gauge is
// 0 while the store answers and the unix time it stopped otherwise.
func TestCatalogRevisionAndStale(t *testing.T) {
	f := newFixture(t, nil)
	fams := f.gather(t)
	rev, ok := value(fams, "sluice_catalog_revision")
	if !ok || rev != float64(f.Manager.Service().AppliedRevision()) || rev == 0 {
		t.Fatalf("revision %v (%v), manager %d", rev, ok, f.Manager.Service().AppliedRevision())
	}
	if _, err := f.Manager.Service().Exec(context.Background(), "CREATE LINK more"); err != nil {
		t.Fatal(err)
	}
	if got, _ := value(f.gather(t), "sluice_catalog_revision"); got != rev+1 {
		t.Errorf("revision after a change %v, want %v", got, rev+1)
	}
	if got, ok := value(fams, "sluice_catalog_stale_since_seconds"); !ok || got != 0 {
		t.Errorf("stale since %v (%v) while fresh", got, ok)
	}
	since := time.Date(2026, 3, 4, 5, 6, 7, 500e6, time.UTC)
	f.Manager.Service().SetStale(since)
	if got, _ := value(f.gather(t), "sluice_catalog_stale_since_seconds"); got != float64(since.UnixNano())/1e9 {
		t.Errorf("stale since %v, want %v", got, float64(since.UnixNano())/1e9)
	}
}

// TestWhatIf: an application's round trips per transaction and network
// share, from the manager's what-if table, appear as gauges with its
// four labels; an application with nothing in the window does not.
func TestWhatIf(t *testing.T) {
	f := newFixture(t, nil)
	if fams := f.gather(t); fams["sluice_whatif_round_trips_per_transaction"] != nil {
		t.Fatal("what-if gauges without a table")
	}
	tb := whatif.New(whatif.Options{})
	f.m = newMetrics(t, f.Env, func(o *metrics.Options) { o.WhatIf, o.Clock = tb, f.Clock })
	key := whatif.Key{Protocol: "postgres", User: "u", Database: "d", Application: "pgbench"}
	// 3 round trips of 10 ms each, with 1 ms client and 1 ms upstream RTT:
	// network share 3 x 2 / 30.
	c := tb.Open(key, f.Clock.Now(), func() (time.Duration, time.Duration) { return time.Millisecond, time.Millisecond })
	now := f.Clock.Now()
	c.Send(now, true)
	c.Done(now.Add(time.Millisecond), true, true) // sampled here
	for i := range 2 {
		now = now.Add(10 * time.Millisecond)
		c.Send(now, true)
		c.Done(now.Add(10*time.Millisecond), true, i == 0)
	}
	f.Clock.Advance(time.Second)
	labels := []string{"protocol", "postgres", "user", "u", "database", "d", "application", "pgbench"}
	fams := f.gather(t)
	if v, ok := value(fams, "sluice_whatif_round_trips_per_transaction", labels...); !ok || v != 3 {
		t.Errorf("round trips %v (%v), want 3", v, ok)
	}
	// Latency: 0 to 30 ms.
	if v, ok := value(fams, "sluice_whatif_network_share", labels...); !ok || math.Abs(v-6.0/30) > 1e-9 {
		t.Errorf("network share %v (%v), want 0.2", v, ok)
	}
	f.Clock.Advance(2 * time.Minute)
	if fams := f.gather(t); fams["sluice_whatif_round_trips_per_transaction"] != nil {
		t.Error("what-if gauges for an application out of the window")
	}
}
