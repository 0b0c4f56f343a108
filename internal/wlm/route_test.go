package wlm

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/sluicelab/sluice/internal/netem"
	"github.com/sluicelab/sluice/internal/sqlstate"
	"github.com/sluicelab/sluice/internal/wlm/store"
)

func TestAlterRoute(t *testing.T) {
	m := newTestManager(t, ManagerOptions{})
	mustExec(t, m, "CREATE LINK wan WITH (delay='1ms'); CREATE RESOURCE POOL p")
	if err := m.Runtime().SetRoute("pg", Route{Protocol: "postgres", CanCancel: true, Emulation: map[string]string{"Jitter": "1ms"}}); err != nil {
		t.Fatal(err)
	}
	v := m.Runtime().Version()
	mustExec(t, m, "ALTER ROUTE pg WITH (link=wan, pool='p', delay='5ms', rate='10Mbit', jitter=DEFAULT)")
	if m.Runtime().Version() == v {
		t.Error("ALTER ROUTE did not bump Version: live sessions would not re-bind")
	}
	r := m.Runtime().Routes()["pg"]
	if r.Link != "wan" || r.Pool != "p" || len(r.Emulation) != 2 || r.Emulation["delay"] != "5ms" || r.Emulation["rate"] != "10Mbit" {
		t.Fatalf("route after ALTER = %+v", r)
	}
	b := m.Runtime().Bind("pg", "anyone")
	if b.Pool != "p" || b.Link != m.Runtime().Link("wan") || b.Up.Delay != 5*time.Millisecond || b.Up.Rate != 10e6/8 || b.Up.Jitter != 0 {
		t.Errorf("binding after ALTER = %+v", b)
	}
	res := mustExec(t, m, "SHOW ROUTES")
	if len(res.Rows) != 1 || !strings.Contains(strings.Join(res.Rows[0], " "), "delay=5ms") {
		t.Errorf("SHOW ROUTES = %q", res.Rows)
	}
	mustExec(t, m, "ALTER ROUTE pg RESET (delay, pool)")
	r = m.Runtime().Routes()["pg"]
	if r.Pool != "" || r.Emulation["delay"] != "" || r.Emulation["rate"] != "10Mbit" {
		t.Errorf("route after RESET = %+v", r)
	}
	if b := m.Runtime().Bind("pg", "anyone"); b.Up.Delay != time.Millisecond {
		t.Errorf("after RESET (delay) the link's delay applies: got %v", b.Up.Delay)
	}
	mustExec(t, m, "ALTER ROUTE pg WITH (link=DEFAULT)")
	if r := m.Runtime().Routes()["pg"]; r.linkName() != DefaultLink {
		t.Errorf("link=DEFAULT left %q", r.Link)
	}

	errs := []struct {
		sql, code, mention string
	}{
		{"ALTER ROUTE nosuch WITH (delay='1ms')", sqlstate.UndefinedObject, `route "nosuch"`},
		{"ALTER ROUTE pg WITH (speed='1ms')", sqlstate.InvalidParameterValue, `"speed"`},
		{"ALTER ROUTE pg WITH (delay='soon')", sqlstate.InvalidParameterValue, `"delay"`},
		{"ALTER ROUTE pg WITH (loss='gemodel 200%')", sqlstate.InvalidParameterValue, `"loss"`},
		{"ALTER ROUTE pg WITH (link=nolink)", sqlstate.UndefinedObject, `link "nolink"`},
		{"ALTER ROUTE pg WITH (pool=nopool)", sqlstate.UndefinedObject, `pool "nopool"`},
	}
	for _, e := range errs {
		got := execErr(t, m, e.sql)
		if got.Code != e.code || !strings.Contains(got.Message, e.mention) {
			t.Errorf("%s: %v, want %s naming %s", e.sql, got, e.code, e.mention)
		}
	}
	if r := m.Runtime().Routes()["pg"]; r.Emulation["rate"] != "10Mbit" || len(r.Emulation) != 1 {
		t.Errorf("failed statements changed the route: %+v", r)
	}
}

func TestAlterRouteAbort(t *testing.T) {
	m := newTestManager(t, ManagerOptions{})
	mustExec(t, m, "CREATE EXCEPT RULE slow WITH (elapsedtime=60); CREATE RESOURCE POOL p WITH (except_rule='slow')")
	if err := m.Runtime().SetRoute("my", Route{Protocol: "mysql"}); err != nil {
		t.Fatal(err)
	}
	if e := execErr(t, m, "ALTER ROUTE my WITH (pool=p)"); e.Code != sqlstate.FeatureNotSupported {
		t.Errorf("making an abort rule reachable on a route that cannot cancel: %v", e)
	}
}

// lossRuns returns the loss frequency and mean run of consecutive lost
// segments of n one-segment chunks through a path with p, in virtual
// time: the chunks are an hour apart, so a stall is all they wait for.
func lossRuns(p netem.Params, n int) (freq, meanRun float64) {
	path := netem.NewPath(p, 7)
	rto := p.WithDefaults().RTO
	var lost, runs, cur int
	t0 := time.Unix(1_700_000_000, 0)
	for i := range n {
		arr := t0.Add(time.Duration(i) * time.Hour)
		if path.Release(arr, netem.MSS).Sub(arr)-p.Delay >= rto {
			lost++
			cur++
			continue
		}
		if cur > 0 {
			runs++
			cur = 0
		}
	}
	if cur > 0 {
		runs++
	}
	return float64(lost) / float64(n), float64(lost) / float64(max(runs, 1))
}

func TestGilbertElliottOptions(t *testing.T) {
	m := newTestManager(t, ManagerOptions{})
	// A configuration file's link and route options.
	if err := m.Service().DefineLink(t.Context(), "lossy", map[string]string{"loss": "gemodel 1% 25%"}); err != nil {
		t.Fatal(err)
	}
	if err := m.Runtime().SetRoute("r", Route{Link: "lossy", Emulation: map[string]string{"delay": "1ms"}}); err != nil {
		t.Fatal(err)
	}
	if err := m.Runtime().SetRoute("bad", Route{Emulation: map[string]string{"loss": "gemodel"}}); err == nil {
		t.Error("gemodel without P accepted")
	}
	// P 1%, R 25%, every bad segment lost: loss rate P/(P+R), bursts of 1/R.
	b := m.Runtime().Bind("r", "u")
	if b.Up.LossModel.Kind != netem.GilbertElliott || b.Up.Delay != time.Millisecond {
		t.Fatalf("binding %+v", b.Up)
	}
	freq, run := lossRuns(b.Up, 400_000)
	if want := 0.01 / 0.26; math.Abs(freq-want) > 0.1*want {
		t.Errorf("loss frequency %.5f, want %.5f ± 10%%", freq, want)
	}
	if math.Abs(run-4) > 0.4 {
		t.Errorf("mean burst %.3f segments, want 4 ± 10%%", run)
	}

	// The console, on a route: all four parameters, fractions or percents.
	mustExec(t, m, "ALTER ROUTE r WITH (loss='gemodel 0.5% 10% 50% 0.2%')")
	b = m.Runtime().Bind("r", "u")
	want := netem.LossModel{Kind: netem.GilbertElliott, P: 0.005, R: 0.1, BadLoss: 0.5, GoodLoss: 0.002}
	if math.Abs(b.Up.LossModel.P-want.P) > 1e-12 || math.Abs(b.Up.LossModel.GoodLoss-want.GoodLoss) > 1e-12 || b.Up.LossModel.R != want.R || b.Up.LossModel.BadLoss != want.BadLoss {
		t.Fatalf("loss model %+v, want %+v", b.Up.LossModel, want)
	}
	freq, _ = lossRuns(b.Up, 1_000_000)
	if want := (0.1*0.002 + 0.005*0.5) / 0.105; math.Abs(freq-want) > 0.1*want {
		t.Errorf("loss frequency %.5f, want %.5f ± 10%%", freq, want)
	}
	// tc's spelling: bare numbers are percentages.
	mustExec(t, m, "ALTER ROUTE r WITH (loss='gemodel 1 25')")
	if b := m.Runtime().Bind("r", "u"); b.Up.LossModel.Kind != netem.GilbertElliott || math.Abs(b.Up.LossModel.P-0.01) > 1e-12 || b.Up.LossModel.R != 0.25 || b.Up.LossModel.BadLoss != 1 {
		t.Fatalf("gemodel 1 25: %+v, want P 0.01, R 0.25, 1-H 1", b.Up.LossModel)
	}
	for _, c := range []struct {
		loss string
		want float64
	}{{"1", 0.01}, {"0.5", 0.005}, {"2 %", 0.02}} {
		mustExec(t, m, "ALTER ROUTE r WITH (loss='"+c.loss+"')")
		if b := m.Runtime().Bind("r", "u"); b.Up.LossModel.Kind != netem.Bernoulli || math.Abs(b.Up.Loss-c.want) > 1e-12 {
			t.Fatalf("loss=%q: %+v, want Bernoulli %g as tc netem reads it", c.loss, b.Up, c.want)
		}
	}
	// Bernoulli loss on the route replaces the link's model.
	mustExec(t, m, "ALTER ROUTE r WITH (loss='1%')")
	if b := m.Runtime().Bind("r", "u"); b.Up.LossModel.Kind != netem.Bernoulli || b.Up.Loss != 0.01 {
		t.Errorf("route Bernoulli over link gemodel: %+v", b.Up)
	}
	// A pool and the console's link statements take it too, and SHOW
	// LINKS writes it back.
	mustExec(t, m, "CREATE RESOURCE POOL gp WITH (loss='gemodel 2% 30%'); ALTER LINK lossy WITH (loss='gemodel 3%')")
	res := mustExec(t, m, "SHOW LINKS")
	if !strings.Contains(strings.Join(res.Rows[1], " "), "gemodel 3% 97% 100% 0%") {
		t.Errorf("SHOW LINKS: %q", res.Rows)
	}
	// The catalog file keeps the model.
	data, err := store.Marshal(m.Service().Catalog())
	if err != nil {
		t.Fatal(err)
	}
	back, err := store.Unmarshal("catalog.json", data)
	if err != nil {
		t.Fatalf("%v\n%s", err, data)
	}
	if got, want := back.Pools["gp"].Emulation.Params(), m.Service().Catalog().Pools["gp"].Emulation.Params(); got != want || got.LossModel.Kind != netem.GilbertElliott {
		t.Errorf("stored pool emulation %+v, want %+v", got, want)
	}
}

// TestDelayBounded: a delay, jitter or rto above netem.MaxDelay is
// refused, from the console with 22023 and in a catalog read from a
// store (a file or etcd), so no mistyped value holds a link's bytes for
// years. A space before the unit is accepted, as in '20 MB'.
func TestDelayBounded(t *testing.T) {
	m := newTestManager(t, ManagerOptions{})
	for _, sql := range []string{
		"ALTER LINK default WITH (delay='1000000h')",
		"ALTER LINK default WITH (jitter='61s')",
		"CREATE RESOURCE POOL slow WITH (delay='2 min')",
		"ALTER LINK default WITH (rto='1h')",
	} {
		if e := execErr(t, m, sql); e.Code != sqlstate.InvalidParameterValue {
			t.Errorf("%s: %v (%s), want 22023", sql, e, e.Code)
		}
	}
	mustExec(t, m, "ALTER LINK default WITH (delay='60 s', jitter='1 ms')")
	if b := m.Runtime().Bind("r", "u"); b.Up.Delay != time.Minute || b.Up.Jitter != time.Millisecond {
		t.Fatalf("delay '60 s', jitter '1 ms': %v, %v", b.Up.Delay, b.Up.Jitter)
	}
	data, err := store.Marshal(m.Service().Catalog())
	if err != nil {
		t.Fatal(err)
	}
	bad := strings.Replace(string(data), `"delay": "1m0s"`, `"delay": "1000000h"`, 1)
	if bad == string(data) {
		t.Fatalf("no delay to replace in %s", data)
	}
	if _, err := store.Unmarshal("etcd", []byte(bad)); err == nil || !strings.Contains(err.Error(), "maximum") {
		t.Fatalf("a stored delay of 1000000h: %v, want it refused", err)
	}
}

// TestEmulationLevelsReplace: a session's emulation is its link's, then
// its route's, then its pool's, option by option: each level replaces
// the options it sets and keeps the others; delays do not add up.
func TestEmulationLevelsReplace(t *testing.T) {
	m := newTestManager(t, ManagerOptions{})
	mustExec(t, m, "ALTER LINK default WITH (delay='5ms', jitter='1ms'); CREATE RESOURCE POOL slow WITH (delay='20ms'); CREATE USER reporting RESOURCE POOL 'slow'")
	if err := m.Runtime().SetRoute("pg", Route{Protocol: "postgres", CanCancel: true}); err != nil {
		t.Fatal(err)
	}
	mustExec(t, m, "ALTER ROUTE pg WITH (delay='25ms', loss='1%')")
	for _, c := range []struct {
		user          string
		delay, jitter time.Duration
		loss          float64
	}{
		{"someone", 25 * time.Millisecond, time.Millisecond, 0.01},   // the route's delay replaces the link's
		{"reporting", 20 * time.Millisecond, time.Millisecond, 0.01}, // the pool's replaces the route's
	} {
		b := m.Runtime().Bind("pg", c.user)
		if b.Up.Delay != c.delay || b.Up.Jitter != c.jitter || b.Up.Loss != c.loss {
			t.Errorf("%s through pg: delay %v, jitter %v, loss %g; want %v, %v, %g", c.user, b.Up.Delay, b.Up.Jitter, b.Up.Loss, c.delay, c.jitter, c.loss)
		}
	}
}
