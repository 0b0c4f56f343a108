package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/sluicelab/sluice/internal/httpapi"
	"github.com/sluicelab/sluice/internal/testenv"
)

// chromium returns the path of the Chromium binary.
func chromium(t *testing.T) string {
	t.Helper()
	for _, p := range []string{"/usr/bin/chromium", "/usr/bin/chromium-browser"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p, err := exec.LookPath("chromium"); err == nil {
		return p
	}
	testenv.Missing(t, "chromium (apt-get install chromium)")
	return ""
}

// artifactDir is where the test leaves its screenshot: $SLUICE_ARTIFACTS
// if set, else a temporary directory.
func artifactDir(t *testing.T) string {
	if d := os.Getenv("SLUICE_ARTIFACTS"); d != "" {
		if err := os.MkdirAll(d, 0o755); err == nil {
			return d
		}
	}
	return t.TempDir()
}

// TestDashboardInBrowser opens the dashboard in headless Chromium while a
// penalised bulk statement and normal queries flow: the page loads with
// no console error, the bandwidth chart changes while traffic flows, and
// the penalised statement is listed with its pool. It leaves a
// screenshot in the artifact directory and at /tmp/sluice-dashboard.png.
func TestDashboardInBrowser(t *testing.T) {
	testenv.SkipShort(t, "takes 7s here")
	bin := chromium(t)
	url := testenv.PostgresURL(t)
	ensureRole(t, url)
	s := newStack(t, stackOptions{token: "dash-token"})
	s.must(t, 201, "POST", "/api/links", map[string]any{"name": "dash", "capacity": "20MB", "delay": "1ms"})
	s.must(t, 200, "PATCH", "/api/settings", map[string]any{"except_check_period": "100ms", "low_priority_bandwidth": "2MB"})
	s.must(t, 201, "POST", "/api/rules", map[string]any{"name": "hog", "bandwidth": 0.001, "elapsedtime": 0.5, "action": "penalty"})
	s.must(t, 201, "POST", "/api/pools", map[string]any{"name": "hogs", "except_rule": "hog"})
	s.must(t, 201, "POST", "/api/users", map[string]any{"name": lowUser, "resource_pool": "hogs"})
	via := s.addPGRoute(t, url, "dash", "dash")

	stop := startLoad(t, via)
	defer stop()

	// Wait for the evaluator to penalise the bulk statement.
	var penalized httpapi.Statement
	testenv.Eventually(t, 20*time.Second, "a penalised statement", func() bool {
		var sts []httpapi.Statement
		json.Unmarshal(s.must(t, 200, "GET", "/api/statements?state=running&user="+lowUser, nil), &sts)
		for _, st := range sts {
			if st.Penalized {
				penalized = st
			}
		}
		return penalized.ID != 0
	})

	bctx, problems := openBrowser(t, bin)

	rowSel := chromedp.CSS(fmt.Sprintf(`#statements tbody tr[data-id="%d"]`, penalized.ID))
	if err := chromedp.Do(bctx,
		chromedp.Navigate(s.url+"/?token=dash-token"),
		chromedp.WaitVisible(chromedp.CSS(`#chart-classes path[data-series="low"]`)),
		chromedp.WaitVisible(rowSel),
	); err != nil {
		t.Fatalf("load the dashboard: %v", err)
	}
	row, err := chromedp.Run(bctx, chromedp.Text(rowSel))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(row, "penalized") || !strings.Contains(row, "hogs") || !strings.Contains(row, lowUser) {
		t.Errorf("row of the penalised statement %d = %q, want its user, pool hogs and the penalized badge", penalized.ID, row)
	}

	// The chart moves while traffic flows.
	pathD := func() string {
		t.Helper()
		a, err := chromedp.Run(bctx, chromedp.AttributeValue(chromedp.CSS(`#chart-classes path[data-series="low"]`), "d"))
		if err != nil {
			t.Fatal(err)
		}
		return a.Value
	}
	d1 := pathD()
	if err := chromedp.Do(bctx, chromedp.Sleep(2500*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	d2 := pathD()
	if d1 == d2 || strings.Count(d2, "L") < 2 {
		t.Errorf("the low class path did not move while traffic flowed:\n before %q\n after  %q", d1, d2)
	}

	// Rule firings and link settings are on the page too.
	text, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS(`main`)))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"hog", "penalty", "dash", "20MB/s", "1ms", "except_check_period"} {
		if !strings.Contains(text, want) {
			t.Errorf("page text lacks %q", want)
		}
	}

	shot, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	dir := artifactDir(t)
	path := filepath.Join(dir, "sluice-dashboard.png")
	if err := os.WriteFile(path, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile("/tmp/sluice-dashboard.png", shot, 0o644); err != nil {
		t.Logf("copy the screenshot to /tmp: %v", err)
	}
	t.Logf("screenshot: %s (%d bytes)", path, len(shot))

	if p := problems(); len(p) > 0 {
		t.Errorf("the page reported %d problems:\n%s", len(p), strings.Join(p, "\n"))
	}
}

// openBrowser starts headless Chromium for the test (closed when it
// ends) and returns its context, bounded to 90 s, and a function that
// returns the console errors, warnings and exceptions the pages reported
// so far.
func openBrowser(t *testing.T, bin string) (context.Context, func() []string) {
	t.Helper()
	var mu sync.Mutex
	var problems []string
	note := func(format string, args ...any) {
		mu.Lock()
		problems = append(problems, fmt.Sprintf(format, args...))
		mu.Unlock()
	}
	actx, acancel := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(bin),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 1700),
	)
	t.Cleanup(acancel)
	bctx, bcancel := chromedp.NewContext(actx, chromedp.WithListener(func(ev any) {
		switch ev := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			if ev.Type == runtime.ConsoleAPICalledTypeError || ev.Type == runtime.ConsoleAPICalledTypeAssert || ev.Type == runtime.ConsoleAPICalledTypeWarning {
				var args []string
				for _, a := range ev.Args {
					args = append(args, string(a.Value)+a.Description)
				}
				note("console.%s: %s", ev.Type, strings.Join(args, " "))
			}
		case *runtime.EventExceptionThrown:
			d := ev.ExceptionDetails
			msg := d.Text
			if d.Exception != nil {
				msg += " " + d.Exception.Description
			}
			note("exception: %s (%s:%d)", msg, d.URL, d.LineNumber)
		case *cdplog.EventEntryAdded:
			if ev.Entry.Level == cdplog.EntryLevelError || ev.Entry.Level == cdplog.EntryLevelWarning {
				note("log %s/%s: %s %s", ev.Entry.Source, ev.Entry.Level, ev.Entry.Text, ev.Entry.URL)
			}
		}
	}))
	t.Cleanup(bcancel)
	bctx, tcancel := context.WithTimeout(bctx, 90*time.Second)
	t.Cleanup(tcancel)
	return bctx, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(problems)
	}
}
