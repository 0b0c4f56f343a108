package main

import (
	"context"
	"math"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluicelab/sluice/internal/testenv"
)

// whatIfTraffic runs, through url, one session named app that loops over
// BEGIN, two SELECTs and COMMIT (four round trips a transaction) until
// the test ends.
func whatIfTraffic(t *testing.T, url, app string) {
	t.Helper()
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.RuntimeParams["application_name"] = app
	ctx, cancel := context.WithCancel(context.Background())
	c, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer c.Close(context.Background())
		for ctx.Err() == nil {
			for _, q := range []string{"BEGIN", "SELECT 1", "SELECT 2", "COMMIT"} {
				if _, err := c.Exec(ctx, q, pgx.QueryExecModeSimpleProtocol); err != nil {
					if ctx.Err() == nil {
						t.Errorf("%s: %v", q, err)
					}
					return
				}
			}
		}
	}()
	t.Cleanup(func() { cancel(); wg.Wait() })
}

// TestWhatIfCommand runs `sluice whatif` against a running stack's admin
// console while an application loops over transactions through its
// route: the application gets a block with today's figures and a row
// per RTT, in the order asked, whose predicted latency grows by round
// trips x RTT as the printed figures say.
func TestWhatIfCommand(t *testing.T) {
	ta := startApp(t)
	whatIfTraffic(t, ta.userURL("sluice", "sluice"), "wi-cli")
	t.Setenv("SLUICE_ADMIN_PASSWORD", "adminpw")
	whatif := func() string {
		var b strings.Builder
		if code := run(context.Background(), []string{"whatif", "--admin", ta.admin, "--rtt", "10ms,1,2.5ms"}, &b, &b); code != 0 {
			t.Fatalf("exit %d: %s", code, b.String())
		}
		return b.String()
	}
	// Rates are over the last second or more: wait until the
	// application's rate has settled (two readings within 25 %).
	todayRE := regexp.MustCompile(`today: \d+ sessions?, ([\d.]+) TPS`)
	var out string
	prev := 0.0
	testenv.Eventually(t, 20*time.Second, "a settled rate of the application in sluice whatif", func() bool {
		out = whatif()
		m := todayRE.FindStringSubmatch(out)
		if m == nil || !strings.Contains(out, "postgres wi-cli") {
			return false
		}
		tps, _ := strconv.ParseFloat(m[1], 64)
		settled := tps > 0 && prev > 0 && math.Abs(tps-prev) <= 0.25*prev
		prev = tps
		return settled
	})
	t.Logf("sluice whatif:\n%s", out)
	block := strings.TrimSpace(out[strings.Index(out, "postgres wi-cli"):])
	if i := strings.Index(block, "\n\n"); i >= 0 {
		block = block[:i]
	}
	lines := strings.Split(block, "\n")
	if len(lines) != 2+2+3 {
		t.Fatalf("block of %d lines, want a title, today, a header, a rule and 3 RTTs:\n%s", len(lines), block)
	}
	if !strings.Contains(lines[0], "user sluice") || !strings.Contains(lines[0], "database sluice") {
		t.Errorf("title %q", lines[0])
	}
	today := regexp.MustCompile(`today: (\d+) sessions?, ([\d.]+) TPS, concurrency [\d.]+, latency ([\d.]+) ms, ([\d.]+) round trips/txn \(p95 [\d.]+\), network share [\d.]+%`).FindStringSubmatch(lines[1])
	if today == nil {
		t.Fatalf("today line %q", lines[1])
	}
	num := func(s string) float64 {
		v, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimPrefix(s, "+"), "%"), 64)
		if err != nil {
			t.Fatalf("%q is not a number", s)
		}
		return v
	}
	tps, lat, rt := num(today[2]), num(today[3]), num(today[4])
	if today[1] != "1" || math.Abs(rt-4) > 0.1 || tps <= 0 {
		t.Errorf("today: %s sessions, %.3f round trips, %.3f TPS; want 1 session of 4 round trips a transaction", today[1], rt, tps)
	}
	if h := strings.Fields(lines[2]); strings.Join(h, " ") != "added RTT (ms) latency (ms) TPS TPS change" {
		t.Errorf("header %q", lines[2])
	}
	var prevTPS float64
	for i, want := range []float64{10, 1, 2.5} {
		f := strings.Fields(lines[4+i])
		if len(f) != 4 || num(f[0]) != want {
			t.Fatalf("row %d %q, want +%v first", i, lines[4+i], want)
		}
		// latency' = L + r x RTT, from the figures the command printed.
		if got, model := num(f[1]), lat+rt*want; math.Abs(got-model) > 0.01+0.002*model {
			t.Errorf("+%v ms: latency %v, want %.3f + %.3f x %v = %.3f", want, got, lat, rt, want, model)
		}
		if p := num(f[2]); p >= tps || (i > 0 && p <= prevTPS) {
			t.Errorf("+%v ms: TPS %v against %v today and %v at +10 ms", want, p, tps, prevTPS)
		} else if change, tol := num(f[3]), 100*(p/tps)*(halfULP(f[2])/p+halfULP(today[2])/tps)+0.05; math.Abs(change-100*(p/tps-1)) > tol {
			t.Errorf("+%v ms: change %v%%, want %.1f%%", want, change, 100*(p/tps-1))
		}
		if i == 0 {
			prevTPS = num(f[2])
		}
	}
}

func TestWhatIfCommandErrors(t *testing.T) {
	ta := startApp(t)
	for _, tt := range []struct {
		args     []string
		password string
		code     int
		want     string
	}{
		{[]string{"whatif"}, "adminpw", 2, "--admin"},
		{[]string{"whatif", "--admin", ta.admin, "--rtt", "soon"}, "adminpw", 2, "--rtt"},
		{[]string{"whatif", "--admin", ta.admin, "--rtt", "-5ms"}, "adminpw", 2, "--rtt"},
		{[]string{"whatif", "--admin", ta.admin}, "wrong", 1, "password"},
		{[]string{"whatif", "--admin", freeAddr(t), "--timeout", "2s"}, "adminpw", 1, "whatif through"},
	} {
		t.Setenv("SLUICE_ADMIN_PASSWORD", tt.password)
		var b strings.Builder
		if code := run(context.Background(), tt.args, &b, &b); code != tt.code || !strings.Contains(b.String(), tt.want) {
			t.Errorf("%v: exit %d, %q; want exit %d mentioning %s", tt.args, code, b.String(), tt.code, tt.want)
		}
	}
	// No traffic yet: a line says so.
	t.Setenv("SLUICE_ADMIN_PASSWORD", "adminpw")
	var b strings.Builder
	if code := run(context.Background(), []string{"whatif", "--admin", ta.admin}, &b, &b); code != 0 || !strings.Contains(b.String(), "no application") {
		t.Errorf("idle: exit %d, %q", code, b.String())
	}
}

// halfULP is half a unit of the last digit a printed number has: how
// far the value it was rounded from can be.
func halfULP(s string) float64 {
	_, frac, ok := strings.Cut(s, ".")
	if !ok {
		return 0.5
	}
	return 0.5 * math.Pow(10, -float64(len(frac)))
}
