package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5"

	"github.com/sluicelab/sluice/internal/testenv"
)

// whatIfLoad runs two applications through via until stop: wi-txn, a
// session running transactions of BEGIN, three statements and COMMIT
// (five round trips each), and wi-auto, a session of autocommit SELECTs
// (one each).
func whatIfLoad(t *testing.T, via string) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	run := func(app string, stmts ...string) {
		cfg, err := pgx.ParseConfig(via)
		if err != nil {
			t.Fatal(err)
		}
		cfg.RuntimeParams["application_name"] = app
		c, err := pgx.ConnectConfig(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close(context.Background())
			for ctx.Err() == nil {
				for _, q := range stmts {
					if _, err := c.Exec(ctx, q, pgx.QueryExecModeSimpleProtocol); err != nil {
						if ctx.Err() == nil {
							t.Errorf("%s: %s: %v", app, q, err)
						}
						return
					}
				}
			}
		}()
	}
	run("wi-txn", "BEGIN", "SELECT 1", "SELECT 2", "SELECT 3", "COMMIT")
	run("wi-auto", "SELECT 1")
	return func() { cancel(); wg.Wait() }
}

// whatIfApps returns the applications of GET /api/whatif by name.
func whatIfApps(t *testing.T, s *stack, query string) map[string]map[string]any {
	t.Helper()
	var w struct {
		Applications []map[string]any `json:"applications"`
	}
	if err := json.Unmarshal(s.must(t, 200, "GET", "/api/whatif"+query, nil), &w); err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]any{}
	for _, a := range w.Applications {
		out[fmt.Sprint(a["application"])] = a
	}
	return out
}

// pathPoints reads the points of an SVG path of M and L commands.
func pathPoints(t *testing.T, d string) [][2]float64 {
	t.Helper()
	var pts [][2]float64
	f := strings.Fields(strings.NewReplacer("M", " ", "L", " ").Replace(d))
	if len(f)%2 != 0 {
		t.Fatalf("path %q has an odd number of coordinates", d)
	}
	for i := 0; i < len(f); i += 2 {
		x, err1 := strconv.ParseFloat(f[i], 64)
		y, err2 := strconv.ParseFloat(f[i+1], 64)
		if err1 != nil || err2 != nil {
			t.Fatalf("path %q: bad point %q %q", d, f[i], f[i+1])
		}
		pts = append(pts, [2]float64{x, y})
	}
	return pts
}

// TestWhatIfPanelInBrowser opens the dashboard in headless Chromium while
// two applications run through a route: the what-if panel lists both,
// plots a latency and a throughput line per application with a point at
// today's figures and one per added RTT (latency rising, throughput
// falling, the chattier application falling further), and replots at
// the RTTs typed into its input.
func TestWhatIfPanelInBrowser(t *testing.T) {
	testenv.SkipShort(t, "takes 5s here")
	bin := chromium(t)
	url := testenv.PostgresURL(t)
	s := newStack(t, stackOptions{token: "wi-token"})
	s.must(t, 201, "POST", "/api/links", map[string]any{"name": "wi"})
	via := s.addPGRoute(t, url, "wi", "wi")
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	key := func(app string) string { return "postgres/" + cfg.User + "/" + cfg.Database + "/" + app }

	stop := whatIfLoad(t, via)
	defer stop()
	testenv.Eventually(t, 20*time.Second, "GET /api/whatif to list wi-txn and wi-auto", func() bool {
		apps := whatIfApps(t, s, "")
		return apps["wi-txn"] != nil && apps["wi-auto"] != nil
	})

	bctx, problems := openBrowser(t, bin)
	tpsPath := func(app string) string {
		return fmt.Sprintf(`#chart-whatif-tps path[data-app=%q]`, key(app))
	}
	latPath := func(app string) string {
		return fmt.Sprintf(`#chart-whatif-latency path[data-app=%q]`, key(app))
	}
	if err := chromedp.Do(bctx,
		chromedp.Navigate(s.url+"/?token=wi-token"),
		chromedp.WaitVisible(chromedp.CSS(tpsPath("wi-txn"))),
		chromedp.WaitVisible(chromedp.CSS(tpsPath("wi-auto"))),
		chromedp.WaitVisible(chromedp.CSS(latPath("wi-txn"))),
	); err != nil {
		t.Fatalf("load the dashboard: %v", err)
	}
	points := func(sel string) [][2]float64 {
		t.Helper()
		a, err := chromedp.Run(bctx, chromedp.AttributeValue(chromedp.CSS(sel), "d"))
		if err != nil {
			t.Fatal(err)
		}
		return pathPoints(t, a.Value)
	}
	// Today plus the default RTTs (1, 5, 10 and 50 ms); SVG's y grows
	// downwards.
	for _, app := range []string{"wi-txn", "wi-auto"} {
		tp, lp := points(tpsPath(app)), points(latPath(app))
		if len(tp) != 5 || len(lp) != 5 {
			t.Fatalf("%s: %d throughput and %d latency points, want 5 each", app, len(tp), len(lp))
		}
		for i := 1; i < len(tp); i++ {
			if tp[i][0] <= tp[i-1][0] || tp[i][1] <= tp[i-1][1] || lp[i][1] >= lp[i-1][1] {
				t.Errorf("%s: throughput %v does not fall or latency %v does not rise with RTT", app, tp, lp)
				break
			}
		}
	}
	// At +50 ms the five round trips of a wi-txn transaction cost five
	// times what wi-auto's one does: its latency point is higher.
	if txn, auto := points(latPath("wi-txn")), points(latPath("wi-auto")); txn[4][1] >= auto[4][1] {
		t.Errorf("latency at +50 ms: wi-txn drawn at y=%.1f, wi-auto at y=%.1f; want wi-txn higher", txn[4][1], auto[4][1])
	}
	row, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS(fmt.Sprintf(`#whatif tbody tr[data-app=%q]`, key("wi-txn")))))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(row, "wi-txn") || !strings.Contains(row, cfg.User) || !strings.Contains(row, "5.0") {
		t.Errorf("table row of wi-txn = %q, want its name, user and 5.0 round trips", row)
	}

	// Other RTTs: the lines are drawn again with a point each.
	if err := chromedp.Do(bctx,
		chromedp.SetValue(chromedp.CSS(`#whatif-rtt`), "2ms,20ms"),
		chromedp.Click(chromedp.CSS(`#whatif-form button`)),
	); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "3 points on the throughput line after asking for 2ms,20ms", func() bool {
		return len(points(tpsPath("wi-txn"))) == 3
	})
	axis, err := chromedp.Run(bctx, chromedp.TextContent(chromedp.CSS(`#chart-whatif-tps`)))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(axis, "+20.0 ms") {
		t.Errorf("throughput chart text %q lacks the +20.0 ms axis label", axis)
	}
	// A bad list is reported beside the input, and the lines stay.
	if err := chromedp.Do(bctx,
		chromedp.SetValue(chromedp.CSS(`#whatif-rtt`), "soon"),
		chromedp.Click(chromedp.CSS(`#whatif-form button`)),
		chromedp.WaitVisible(chromedp.CSS(`#whatif-status.bad`)),
	); err != nil {
		t.Fatal(err)
	}
	if len(points(tpsPath("wi-txn"))) != 3 {
		t.Error("a refused RTT list cleared the chart")
	}

	shot, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(artifactDir(t), "sluice-dashboard-whatif.png")
	if err := os.WriteFile(path, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s (%d bytes)", path, len(shot))
	// The refused list answers 400, which the browser logs as a failed
	// request: that one is expected.
	var unexpected []string
	for _, p := range problems() {
		if !strings.Contains(p, "/api/whatif?rtt=soon") {
			unexpected = append(unexpected, p)
		}
	}
	if len(unexpected) > 0 {
		t.Errorf("the page reported %d problems:\n%s", len(unexpected), strings.Join(unexpected, "\n"))
	}
}
