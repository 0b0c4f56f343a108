package main

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluicelab/sluice/internal/config"
	"github.com/sluicelab/sluice/internal/netem"
	"github.com/sluicelab/sluice/internal/stack"
	"github.com/sluicelab/sluice/internal/testenv"
)

// consoleRows runs sql on the admin console connection c with the simple
// protocol and returns its rows as text.
func consoleRows(t *testing.T, c *pgx.Conn, sql string) [][]string {
	t.Helper()
	res, err := c.PgConn().Exec(context.Background(), sql).ReadAll()
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	var out [][]string
	for _, r := range res[len(res)-1].Rows {
		row := make([]string, len(r))
		for i, v := range r {
			row[i] = string(v)
		}
		out = append(out, row)
	}
	return out
}

func TestAuditTrailE2E(t *testing.T) {
	var logs testenv.Buffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	adminAddr, httpAddr := freeAddr(t), freeAddr(t)
	fa := startForwardAppWith(t, func(c *config.Config) {
		c.Source = "sluice-test.yaml"
		c.Admin.Listen = adminAddr
		c.HTTP.Listen = httpAddr
		c.Links = []config.Link{{Name: "wan", Key: "links[0]", Options: map[string]string{"delay": "0ms"}}}
	}, log)
	ctx := context.Background()
	const role = "sluice_audit_fwd"
	dropRoles(t, fa.pgURL, role)
	ensureRole(t, fa.pgURL, role, "first-pw")

	// The console, through pgx.
	con := testenv.ConnectPG(t, "postgres://admin@"+adminAddr+"/admin?sslmode=disable")
	consoleAddr := con.PgConn().Conn().LocalAddr().String()
	for _, sql := range []string{
		"CREATE RESOURCE POOL audit_p WITH (delay='1ms')",
		"CREATE USER audit_u",
		"ALTER USER audit_u RESOURCE POOL 'audit_p' PASSWORD 'console-secret-1'",
		"ALTER ROUTE pg WITH (jitter='1ms')",
	} {
		if _, err := con.PgConn().Exec(ctx, sql).ReadAll(); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	if _, err := con.PgConn().Exec(ctx, "ALTER ROUTE nosuch WITH (delay='1ms')").ReadAll(); pgCode(err) != "42704" {
		t.Fatalf("ALTER ROUTE of a missing route: %v, want 42704", err)
	}

	// The HTTP API.
	req, _ := http.NewRequest("POST", "http://"+httpAddr+"/api/pools", strings.NewReader(`{"name": "http_p"}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("POST /api/pools: %s", resp.Status)
	}

	// Data-port forwarding, through the postgres route.
	data := testenv.ConnectPG(t, fa.routeURL(fa.pgUser, fa.pgPass))
	dataAddr := data.PgConn().Conn().LocalAddr().String()
	if err := simple(ctx, data, "ALTER USER "+role+" RESOURCE POOL 'p1' PASSWORD 'forward-secret-2'"); err != nil {
		t.Fatal(err)
	}
	if got := fa.pool(role); got != "p1" {
		t.Fatalf("forwarded ALTER USER bound %s to %q", role, got)
	}

	rows := consoleRows(t, con, "SHOW AUDIT")
	type entry struct{ surface, user, addr, statement, outcome string }
	var got []entry
	for _, r := range rows {
		if len(r) != 7 {
			t.Fatalf("SHOW AUDIT row %q: want 7 columns", r)
		}
		got = append(got, entry{r[1], r[2], r[3], r[4], r[5]})
		if r[5] == "error" && !strings.HasPrefix(r[6], "42704: ") {
			t.Errorf("failed entry's error %q, want the SQLSTATE first", r[6])
		}
	}
	want := []entry{
		{"config", "", "sluice-test.yaml", "CREATE OR ALTER LINK wan WITH (delay='0ms')", "ok"},
		{"console", "admin", consoleAddr, "CREATE RESOURCE POOL audit_p WITH (delay='1ms')", "ok"},
		{"console", "admin", consoleAddr, "CREATE USER audit_u", "ok"},
		{"console", "admin", consoleAddr, "ALTER USER audit_u RESOURCE POOL 'audit_p' PASSWORD '***'", "ok"},
		{"console", "admin", consoleAddr, "ALTER ROUTE pg WITH (jitter='1ms')", "ok"},
		{"console", "admin", consoleAddr, "ALTER ROUTE nosuch WITH (delay='1ms')", "error"},
		{"http", "", "", "CREATE RESOURCE POOL http_p", "ok"},
		{"forward", fa.pgUser, dataAddr, "ALTER USER " + role + " RESOURCE POOL 'p1' PASSWORD '***'", "ok"},
	}
	// The app's own CREATE RESOURCE POOL p1 (no actor) comes after the
	// configuration's link; the HTTP client's port is not known here.
	got = slices.DeleteFunc(got, func(e entry) bool { return e.statement == "CREATE RESOURCE POOL p1" })
	if len(got) == len(want) && strings.HasPrefix(got[6].addr, "127.0.0.1:") {
		got[6].addr = ""
	}
	if !slices.Equal(got, want) {
		t.Errorf("SHOW AUDIT:\n got %q\nwant %q", got, want)
	}
	sel := consoleRows(t, con, "SELECT surface, outcome FROM audit")
	if len(sel) != len(rows) {
		t.Errorf("SELECT FROM audit has %d rows, SHOW AUDIT %d", len(sel), len(rows))
	}

	text := logs.String()
	for _, secret := range []string{"console-secret-1", "forward-secret-2"} {
		if strings.Contains(text, secret) || strings.Contains(fmt.Sprint(rows), secret) {
			t.Errorf("password %s in the logs or the audit view", secret)
		}
	}
	for _, line := range []string{
		`level=INFO msg="catalog change" surface=console user=admin client_addr=` + consoleAddr + ` statement="ALTER USER audit_u RESOURCE POOL 'audit_p' PASSWORD '***'" outcome=ok`,
		`level=INFO msg="catalog change" surface=forward user=` + fa.pgUser + ` client_addr=` + dataAddr,
		`surface=console user=admin client_addr=` + consoleAddr + ` statement="ALTER ROUTE nosuch WITH (delay='1ms')" outcome=error code=42704`,
	} {
		if !strings.Contains(text, line) {
			t.Errorf("log lacks %s\n%s", line, text)
		}
	}
	if strings.Contains(text, `level=INFO msg="admin console: connected"`) {
		t.Error("console connects are logged at INFO")
	}
}

// roundTrip returns the median of n simple-protocol round trips of c.
func roundTrip(t *testing.T, c *pgx.Conn, n int) time.Duration {
	t.Helper()
	ds := make([]time.Duration, n)
	for i := range ds {
		start := time.Now()
		if err := simple(context.Background(), c, "SELECT 1"); err != nil {
			t.Fatal(err)
		}
		ds[i] = time.Since(start)
	}
	slices.Sort(ds)
	return ds[n/2]
}

func TestAlterRouteLiveSession(t *testing.T) {
	adminAddr := freeAddr(t)
	fa := startForwardAppWith(t, func(c *config.Config) { c.Admin.Listen = adminAddr }, nil)
	data := testenv.ConnectPG(t, fa.routeURL(fa.pgUser, fa.pgPass))
	before := roundTrip(t, data, 9)

	con := testenv.ConnectPG(t, "postgres://admin@"+adminAddr+"/admin?sslmode=disable")
	consoleRows(t, con, "ALTER ROUTE pg WITH (delay='50ms')")
	if r := consoleRows(t, con, "SHOW ROUTES"); !strings.Contains(fmt.Sprint(r), "delay=50ms") {
		t.Errorf("SHOW ROUTES = %q", r)
	}
	// 50 ms each way: the same session's round trip grows by 100 ms; at
	// least 40 ms more is asserted.
	after := roundTrip(t, data, 5)
	if after-before < 40*time.Millisecond {
		t.Errorf("round trip %v before ALTER ROUTE, %v after: want at least 40ms more", before, after)
	}
	t.Logf("round trip: %v before, %v after ALTER ROUTE pg WITH (delay='50ms')", before, after)

	consoleRows(t, con, "ALTER ROUTE pg RESET (delay)")
	if again := roundTrip(t, data, 9); again >= after {
		t.Errorf("round trip %v after RESET (delay), %v with the delay", again, after)
	}
}

// TestGilbertElliottConfig reads a Gilbert-Elliott loss model from a
// configuration file's links and route emulation, and refuses a bad
// one naming the key.
func TestGilbertElliottConfig(t *testing.T) {
	yaml := `
routes:
  - name: r
    listen: ` + freeAddr(t) + `
    upstream: 127.0.0.1:1
    protocol: tcp
    link: lossy
    emulation:
      loss: 'gemodel 2% 20% 90%'
links:
  - name: lossy
    loss: 'gemodel 1%'
`
	cfg, err := config.Parse("ge.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	st := runApp(t, cfg)
	want := netem.LossModel{Kind: netem.GilbertElliott, P: 0.02, R: 0.2, BadLoss: 0.9}
	if got := st.Manager().Runtime().Bind("r", "u").Up.LossModel; math.Abs(got.P-want.P) > 1e-12 || math.Abs(got.R-want.R) > 1e-12 || math.Abs(got.BadLoss-want.BadLoss) > 1e-12 || got.Kind != want.Kind || got.GoodLoss != 0 {
		t.Errorf("route loss model %+v, want %+v", got, want)
	}
	if got := st.Manager().Service().Catalog().Links["lossy"].Emulation.Params().LossModel; got.Kind != netem.GilbertElliott || got.P != 0.01 || got.R != 0.99 || got.BadLoss != 1 {
		t.Errorf("link loss model %+v, want P 1%%, R 99%%, 1-H 100%%", got)
	}

	bad, err := config.Parse("bad.yaml", []byte(strings.Replace(yaml, "gemodel 2% 20% 90%", "gemodel 2% 200%", 1)))
	if err != nil {
		t.Fatal(err)
	}
	_, err = stack.New(context.Background(), stack.Options{Config: bad})
	if err == nil || !strings.Contains(err.Error(), "bad.yaml") || !strings.Contains(err.Error(), "emulation") {
		t.Errorf("bad gemodel in the file: %v, want an error naming the file and the key", err)
	}
}
