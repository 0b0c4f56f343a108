package stack_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluicelab/sluice/internal/testenv"
	"github.com/sluicelab/sluice/internal/whatif"
)

// whatifRow is one row of SHOW WHATIF.
type whatifRow struct {
	protocol, user, database, application string
	sessions                              int
	tps, roundTrips, rttMs, predTPS       float64
	predLatencyMs, latencyMs              float64
}

// TestWhatIfPgbenchSysbench runs a live pgbench tpcb-like (4 clients)
// and a live sysbench oltp_read_write (4 threads) through one sluice
// stack; while both run, SHOW WHATIF rtt '10ms' over the console lists
// both applications with 7 and 20 round trips per transaction (within
// 0.5), a positive TPS and a lower predicted TPS, and GET /api/whatif
// returns the same applications.
func TestWhatIfPgbenchSysbench(t *testing.T) {
	testenv.SkipShort(t, "takes 9s here")
	pgbench, sysbench := testenv.Program(t, "pgbench"), testenv.Program(t, "sysbench")
	pgc, myc := testenv.PostgresConfig(t), testenv.MySQLConfig(t)
	ctx := context.Background()
	name := fmt.Sprintf("whatif_%d", time.Now().UnixNano())

	// A database of the test's own on each server.
	direct := testenv.ConnectPG(t, testenv.PostgresURL(t))
	if _, err := direct.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { direct.Exec(context.Background(), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)") })
	my := testenv.OpenMySQL(t, testenv.MySQLConfig(t))
	if _, err := my.Exec("CREATE DATABASE " + name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { my.Exec("DROP DATABASE IF EXISTS " + name) })

	pgRoute, myRoute := testenv.DeadAddr(t), testenv.DeadAddr(t)
	st, _ := configStack(t, "catalog: \"\"\nadmin:\n  listen: 127.0.0.1:0\nhttp:\n  listen: 127.0.0.1:0\nroutes:\n"+
		"  - name: pg\n    listen: "+pgRoute+"\n    upstream: "+testenv.PostgresAddr(t)+"\n    protocol: postgres\n"+
		"  - name: my\n    listen: "+myRoute+"\n    upstream: "+myc.Addr+"\n    protocol: mysql\n")

	pgEnv := append(os.Environ(), "PGPASSWORD="+pgc.Password, "PGUSER="+pgc.User, "PGDATABASE="+name)
	run := func(env []string, bin string, args ...string) ([]byte, error) {
		cmd := exec.Command(bin, args...)
		cmd.Env = env
		return cmd.CombinedOutput()
	}
	if out, err := run(pgEnv, pgbench, "-i", "-s", "1", "-q", "-h", pgc.Host, "-p", strconv.Itoa(int(pgc.Port))); err != nil {
		t.Fatalf("pgbench -i: %v\n%s", err, out)
	}
	myHost, myPort, _ := strings.Cut(myc.Addr, ":")
	sbArgs := func(host, port string, more ...string) []string {
		return append([]string{"oltp_read_write", "--db-driver=mysql", "--mysql-host=" + host, "--mysql-port=" + port,
			"--mysql-user=" + myc.User, "--mysql-password=" + myc.Passwd, "--mysql-db=" + name,
			"--tables=1", "--table-size=2000"}, more...)
	}
	if out, err := run(os.Environ(), sysbench, sbArgs(myHost, myPort, "prepare")...); err != nil {
		t.Fatalf("sysbench prepare: %v\n%s", err, out)
	}
	t.Cleanup(func() { run(os.Environ(), sysbench, sbArgs(myHost, myPort, "cleanup")...) })

	// Both benchmarks through sluice, at once.
	const seconds = 8
	var wg sync.WaitGroup
	var pgOut, sbOut []byte
	var pgErr, sbErr error
	wg.Add(2)
	go func() {
		defer wg.Done()
		host, port, _ := strings.Cut(pgRoute, ":")
		pgOut, pgErr = run(pgEnv, pgbench, "-n", "-c", "4", "-j", "2", "-T", strconv.Itoa(seconds), "-h", host, "-p", port)
	}()
	go func() {
		defer wg.Done()
		host, port, _ := strings.Cut(myRoute, ":")
		sbOut, sbErr = run(os.Environ(), sysbench, sbArgs(host, port, "--threads=4", "--time="+strconv.Itoa(seconds), "run")...)
	}()

	console := testenv.ConnectPG(t, fmt.Sprintf("postgres://admin@%s/sluice?sslmode=disable", st.AdminAddr()))
	defer console.Close(ctx)
	var rows []whatifRow
	var pgRow, myRow *whatifRow
	deadline := time.Now().Add(seconds * time.Second)
	// Wait until both have run a while, then read the console once more
	// near the end of the runs.
	testenv.Eventually(t, seconds*time.Second, "both benchmarks in SHOW WHATIF", func() bool {
		rows = readWhatIf(ctx, t, console, "SHOW WHATIF rtt '10ms'")
		pgRow, myRow = findApp(rows, "postgres", name), findApp(rows, "mysql", name)
		return pgRow != nil && myRow != nil && pgRow.tps > 0 && myRow.tps > 0
	})
	time.Sleep(max(time.Until(deadline)-3*time.Second, 0))
	rows = readWhatIf(ctx, t, console, "SHOW WHATIF rtt '10ms'")
	pgRow, myRow = findApp(rows, "postgres", name), findApp(rows, "mysql", name)

	// The whatif view, in SQL: the default RTTs, 10 ms among them.
	var viewApp string
	var viewRT float64
	if err := console.QueryRow(ctx, "SELECT application, round_trips FROM whatif WHERE protocol = 'postgres' AND database = '"+name+"' AND rtt_ms = 10").
		Scan(&viewApp, &viewRT); err != nil {
		t.Errorf("SELECT FROM whatif: %v", err)
	}
	req, _ := http.NewRequest(http.MethodGet, "http://"+st.HTTPAddr().String()+"/api/whatif?rtt=1ms,10ms", nil)
	code, body := testenv.Fetch(t, req)
	wg.Wait()
	if pgErr != nil || sbErr != nil {
		t.Fatalf("pgbench: %v\n%s\nsysbench: %v\n%s", pgErr, pgOut, sbErr, sbOut)
	}
	t.Logf("SHOW WHATIF rtt '10ms': %+v", rows)
	if pgRow == nil || myRow == nil {
		t.Fatalf("SHOW WHATIF lacks pgbench or sysbench: %+v", rows)
	}
	for _, c := range []struct {
		what string
		row  *whatifRow
		rt   float64
	}{{"pgbench tpcb-like", pgRow, 7}, {"sysbench oltp_read_write", myRow, 20}} {
		r := c.row
		if math.Abs(r.roundTrips-c.rt) > 0.5 {
			t.Errorf("%s: round_trips = %v, want %v within 0.5", c.what, r.roundTrips, c.rt)
		}
		if r.tps <= 0 || r.predTPS >= r.tps || r.rttMs != 10 {
			t.Errorf("%s: tps %v, predicted_tps %v at rtt_ms %v; want 0 < predicted < tps at 10", c.what, r.tps, r.predTPS, r.rttMs)
		}
		if r.predLatencyMs < r.latencyMs+r.roundTrips*10-0.01 {
			t.Errorf("%s: predicted latency %v ms, want at least %v + %v x 10", c.what, r.predLatencyMs, r.latencyMs, r.roundTrips)
		}
		// pgbench's first connection (it checks the tables) counts too.
		if r.sessions < 4 || r.sessions > 5 {
			t.Errorf("%s: sessions = %d, want 4 (or 5)", c.what, r.sessions)
		}
	}

	if viewApp != "pgbench" || math.Abs(viewRT-7) > 0.5 {
		t.Errorf("SELECT FROM whatif WHERE ...: %q with %v round trips, want pgbench with 7", viewApp, viewRT)
	}
	if code != http.StatusOK {
		t.Fatalf("GET /api/whatif: %d %s", code, body)
	}
	var rep whatif.Report
	if err := json.Unmarshal(body, &rep); err != nil {
		t.Fatalf("GET /api/whatif: %v\n%s", err, body)
	}
	if rep.WindowSeconds != 60 || len(rep.RTTsMs) != 2 || rep.RTTsMs[0] != 1 || rep.RTTsMs[1] != 10 {
		t.Errorf("report window %v, rtts %v; want 60 s and [1 10]", rep.WindowSeconds, rep.RTTsMs)
	}
	got := map[string]whatif.ReportApp{}
	for _, a := range rep.Applications {
		if a.Database == name {
			got[a.Protocol] = a
		}
	}
	for proto, want := range map[string]*whatifRow{"postgres": pgRow, "mysql": myRow} {
		a, ok := got[proto]
		if !ok {
			t.Errorf("/api/whatif lacks the %s application: %s", proto, body)
			continue
		}
		t.Logf("/api/whatif %s: %+v", proto, a)
		if a.User != want.user || a.Application != want.application || math.Abs(a.RoundTrips-want.roundTrips) > 0.5 ||
			len(a.Predictions) != 2 || a.Predictions[1].TPS >= a.TPS {
			t.Errorf("/api/whatif %s: %+v; console had %+v", proto, a, *want)
		}
		// Both sockets are TCP over loopback: the kernel has an RTT for
		// each, and the network takes a small share of the latency.
		if a.ClientRTTMs <= 0 || a.UpstreamRTTMs <= 0 || a.NetworkShare <= 0 || a.NetworkShare >= 0.5 {
			t.Errorf("/api/whatif %s: client RTT %v ms, upstream %v ms, network share %v; want both > 0, share in (0, 0.5)",
				proto, a.ClientRTTMs, a.UpstreamRTTMs, a.NetworkShare)
		}
	}
}

// readWhatIf runs a SHOW WHATIF on the console.
func readWhatIf(ctx context.Context, t *testing.T, console *pgx.Conn, q string) []whatifRow {
	t.Helper()
	rs, err := console.Query(ctx, q)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rs.Close()
	want := "protocol user database application sessions tps concurrency round_trips round_trips_p95 " +
		"latency_ms network_share rtt_ms predicted_latency_ms predicted_tps"
	var names []string
	for _, f := range rs.FieldDescriptions() {
		names = append(names, f.Name)
	}
	if got := strings.Join(names, " "); got != want {
		t.Fatalf("%s: columns %q, want %q", q, got, want)
	}
	var out []whatifRow
	for rs.Next() {
		v, err := rs.Values()
		if err != nil {
			t.Fatal(err)
		}
		s := make([]string, len(v))
		for i := range v {
			s[i] = fmt.Sprint(v[i])
		}
		f := func(i int) float64 {
			x, err := strconv.ParseFloat(s[i], 64)
			if err != nil {
				t.Fatalf("%s: column %s = %q: %v", q, names[i], s[i], err)
			}
			return x
		}
		out = append(out, whatifRow{protocol: s[0], user: s[1], database: s[2], application: s[3],
			sessions: int(f(4)), tps: f(5), roundTrips: f(7), latencyMs: f(9), rttMs: f(11),
			predLatencyMs: f(12), predTPS: f(13)})
	}
	if err := rs.Err(); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return out
}

// findApp returns the row of the application of protocol on database.
func findApp(rows []whatifRow, protocol, database string) *whatifRow {
	for i := range rows {
		if rows[i].protocol == protocol && rows[i].database == database {
			return &rows[i]
		}
	}
	return nil
}
