package httpapi_test

import (
	"context"
	"io"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	dto "github.com/prometheus/client_model/go"

	"github.com/sluicelab/sluice/internal/link"
	"github.com/sluicelab/sluice/internal/testenv"
)

// lowUser is a PostgreSQL role the tests bind to a low-priority pool.
const lowUser, lowPassword = "sluice_httpapi_low", "low"

// ensureRole creates the role lowUser on the test server if needed.
func ensureRole(t testing.TB, url string) {
	t.Helper()
	ctx := context.Background()
	c := testenv.ConnectPG(t, url)
	_, err := c.Exec(ctx, `DO $$BEGIN
		IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '`+lowUser+`') THEN
			CREATE ROLE `+lowUser+` LOGIN PASSWORD '`+lowPassword+`';
		END IF;
	END$$`)
	if err != nil {
		// Another test process may have created it meanwhile.
		if _, err2 := c.Exec(ctx, "SELECT 1 FROM pg_roles WHERE rolname = '"+lowUser+"'"); err2 != nil {
			t.Fatal(err)
		}
	}
}

// repeat runs fn on one connection to url until ctx ends; name tells
// the connection's failure apart.
func repeat(ctx context.Context, t testing.TB, name, url string, wg *sync.WaitGroup, fn func(*pgx.Conn)) {
	defer wg.Done()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Errorf("%s connect: %v", name, err)
		return
	}
	defer c.Close(context.Background())
	for ctx.Err() == nil {
		fn(c)
	}
}

// bulk pulls COPY data through url until ctx ends.
func bulk(ctx context.Context, t testing.TB, url string, wg *sync.WaitGroup) {
	repeat(ctx, t, "bulk", url, wg, func(c *pgx.Conn) {
		c.PgConn().CopyTo(ctx, io.Discard, "COPY (SELECT repeat('x', 1000) FROM generate_series(1, 2000000)) TO STDOUT")
	})
}

// small runs small queries through url until ctx ends.
func small(ctx context.Context, t testing.TB, url string, wg *sync.WaitGroup) {
	repeat(ctx, t, "small", url, wg, func(c *pgx.Conn) {
		var s string
		c.QueryRow(ctx, "SELECT repeat('y', 4000)").Scan(&s)
	})
}

// startLoad runs bulk as lowUser and small through via until stop is
// called; stop waits for both to end and may be called again.
func startLoad(t testing.TB, via string) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	go bulk(ctx, t, withUser(t, via, lowUser, lowPassword), &wg)
	go small(ctx, t, via, &wg)
	return func() { cancel(); wg.Wait() }
}

// histogramDelta returns the observations and the sum added to a
// histogram between two scrapes.
func histogramDelta(a, b *dto.Metric) (count uint64, sum float64) {
	if a == nil || b == nil || a.Histogram == nil || b.Histogram == nil {
		return 0, 0
	}
	return b.Histogram.GetSampleCount() - a.Histogram.GetSampleCount(), b.Histogram.GetSampleSum() - a.Histogram.GetSampleSum()
}

// TestMetricsUnderLoad scrapes /metrics while a low-priority bulk COPY
// and normal small queries share a link with a capacity, and checks the
// numbers: the low class moves, within low_priority_bandwidth, the
// normal class moves too, both queue-delay
// histograms fill, and the normal class waits much less than the low one.
func TestMetricsUnderLoad(t *testing.T) {
	testenv.SkipShort(t, "takes 3s here")
	url := testenv.PostgresURL(t)
	ensureRole(t, url)
	s := newStack(t, stackOptions{})
	const lowRate = 5_000_000 // bytes/s
	s.must(t, 201, "POST", "/api/links", map[string]any{"name": "lab", "capacity": "50MB"})
	s.must(t, 200, "PATCH", "/api/settings/low_priority_bandwidth", map[string]any{"value": "5MB"})
	s.must(t, 200, "PATCH", "/api/settings/metrics_user_labels", map[string]any{"value": "10"})
	s.must(t, 201, "POST", "/api/pools", map[string]any{"name": "bulk", "network_priority": "low"})
	s.must(t, 201, "POST", "/api/users", map[string]any{"name": lowUser, "resource_pool": "bulk"})
	via := s.addPGRoute(t, url, "lab", "lab")

	stop := startLoad(t, via)
	defer stop()

	low := map[string]string{"link": "lab", "direction": "down", "class": "low"}
	normal := map[string]string{"link": "lab", "direction": "down", "class": "normal"}
	// The window opens once both classes flow and the low class is past
	// its first burst: half a second's worth of its limit moved.
	testenv.Eventually(t, 10*time.Second, "both classes flowing on the link", func() bool {
		m := s.scrape(t)
		return counterValue(m, "sluice_link_bytes_total", low) >= lowRate/2 && counterValue(m, "sluice_link_bytes_total", normal) > 0
	})
	a, t0 := s.scrape(t), time.Now()
	time.Sleep(2 * time.Second)
	b, t1 := s.scrape(t), time.Now()
	dt := t1.Sub(t0).Seconds()

	lowBytes := counterValue(b, "sluice_link_bytes_total", low) - counterValue(a, "sluice_link_bytes_total", low)
	normalBytes := counterValue(b, "sluice_link_bytes_total", normal) - counterValue(a, "sluice_link_bytes_total", normal)
	t.Logf("over %.2fs: low %.0f bytes (%.2f MB/s), normal %.0f bytes", dt, lowBytes, lowBytes/dt/1e6, normalBytes)
	// How much of the limit the low class reaches depends on the host's
	// load (it is measured by the flow-control bench, not here); that it
	// moves at all, and never above the limit, is the scheduler's.
	if lowBytes <= 0 {
		t.Errorf("low class moved nothing in %.2fs", dt)
	}
	if lowBytes > 1.3*lowRate*dt+(256<<10) {
		t.Errorf("low class moved %.0f bytes in %.2fs, above low_priority_bandwidth %d bytes/s", lowBytes, dt, lowRate)
	}
	if normalBytes < 20_000 {
		t.Errorf("normal class moved %.0f bytes in %.2fs", normalBytes, dt)
	}
	poolLow := map[string]string{"link": "lab", "direction": "down", "pool": "bulk", "class": "low"}
	if d := counterValue(b, "sluice_link_pool_bytes_total", poolLow) - counterValue(a, "sluice_link_pool_bytes_total", poolLow); d < 0.9*lowBytes {
		t.Errorf("pool bulk moved %.0f low bytes, the link %.0f", d, lowBytes)
	}

	ln, ls := histogramDelta(find(a, "sluice_link_queue_delay_seconds", low), find(b, "sluice_link_queue_delay_seconds", low))
	nn, ns := histogramDelta(find(a, "sluice_link_queue_delay_seconds", normal), find(b, "sluice_link_queue_delay_seconds", normal))
	if ln == 0 || nn == 0 {
		t.Fatalf("queue delay histograms: %d low and %d normal observations in the window", ln, nn)
	}
	lowMean, normalMean := ls/float64(ln), ns/float64(nn)
	t.Logf("queue delay: low %d sends, mean %.3f ms; normal %d sends, mean %.3f ms", ln, lowMean*1e3, nn, normalMean*1e3)
	if lowMean < 1e-3 {
		t.Errorf("low class mean queue delay %.3f ms: the low-priority limit should hold it back", lowMean*1e3)
	}
	if normalMean*4 > lowMean {
		t.Errorf("normal class mean queue delay %.3f ms is not small next to the low class's %.3f ms", normalMean*1e3, lowMean*1e3)
	}
	h := find(b, "sluice_link_queue_delay_seconds", low).Histogram
	var finite []float64
	for _, bk := range h.Bucket {
		if !math.IsInf(bk.GetUpperBound(), 1) {
			finite = append(finite, bk.GetUpperBound())
		}
	}
	if len(finite) != link.NumDelayBuckets-1 || finite[0] != link.DelayBound(0).Seconds() || finite[len(finite)-1] != 5 {
		t.Errorf("queue delay histogram bounds %v, want the link's (50us to 5s)", finite)
	}

	if v := counterValue(b, "sluice_sessions", map[string]string{"route": "lab", "user": lowUser, "pool": "bulk"}); v != 1 {
		t.Errorf("sluice_sessions of %s = %v, want 1", lowUser, v)
	}
	if v := counterValue(b, "sluice_link_capacity_bytes_per_second", map[string]string{"link": "lab"}); v != 50e6 {
		t.Errorf("sluice_link_capacity_bytes_per_second = %v", v)
	}
	if find(b, "sluice_route_unsent_bytes", map[string]string{"route": "lab"}) == nil {
		t.Error("no sluice_route_unsent_bytes for the route")
	}
	if find(b, "go_goroutines", nil) == nil || find(b, "process_cpu_seconds_total", nil) == nil {
		t.Error("runtime or process metrics missing")
	}
	stop()
	c := s.scrape(t)
	ok := map[string]string{"route": "lab", "user": "sluice", "pool": "", "outcome": "ok"}
	if v := counterValue(c, "sluice_statements_total", ok); v < 10 {
		t.Errorf("sluice_statements_total %v = %v", ok, v)
	}
	if m := find(c, "sluice_statement_duration_seconds", map[string]string{"route": "lab", "user": "sluice"}); m == nil || m.Histogram.GetSampleCount() < 10 {
		t.Errorf("sluice_statement_duration_seconds of user sluice: %v", m)
	}
}
