package pg

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicelab/sluice/internal/session"
	"github.com/sluicelab/sluice/internal/testenv"
)

// runTool runs a client program against the relay and returns its output.
func runTool(t *testing.T, r *relay, db *dbConfig, name string, args ...string) string {
	t.Helper()
	path := testenv.Program(t, name)
	cmd := exec.CommandContext(context.Background(), path, args...)
	_, port, _ := strings.Cut(r.Addr, ":")
	cmd.Env = append(os.Environ(),
		"PGHOST=127.0.0.1", "PGPORT="+port, "PGUSER="+db.user, "PGPASSWORD="+db.password,
		"PGDATABASE="+db.database, "PGAPPNAME=wirepg-"+name, "PGCONNECT_TIMEOUT=10")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out.String())
	}
	return out.String()
}

// checkAttribution checks that the statements of the relay's sessions
// hold all the bytes the sessions moved, but for each session's startup
// exchange (authentication, parameters: under maxUnattributed bytes).
func checkAttribution(t *testing.T, r *relay, maxUnattributed int64) {
	t.Helper()
	bySession := map[uint64][2]int64{}
	for _, st := range r.statements() {
		b := bySession[st.SessionID]
		b[0] += st.BytesUp
		b[1] += st.BytesDown
		bySession[st.SessionID] = b
	}
	var totalUp, totalDown, heldUp, heldDown int64
	for _, s := range closedSessions(r) {
		b := bySession[s.ID]
		if up, down := s.BytesUp()-b[0], s.BytesDown()-b[1]; up < 0 || down < 0 || up > maxUnattributed || down > maxUnattributed {
			t.Errorf("session %d moved %d/%d bytes, its statements hold %d/%d", s.ID, s.BytesUp(), s.BytesDown(), b[0], b[1])
		}
		totalUp += s.BytesUp()
		totalDown += s.BytesDown()
		heldUp += b[0]
		heldDown += b[1]
	}
	t.Logf("sessions moved %d bytes up, %d down; statements hold %d (%.2f%%) and %d (%.2f%%)",
		totalUp, totalDown, heldUp, 100*float64(heldUp)/float64(max(totalUp, 1)), heldDown, 100*float64(heldDown)/float64(max(totalDown, 1)))
}

// closedSessions waits for every session of the relay to end and
// returns them.
func closedSessions(r *relay) []*session.Session {
	waitFor(r.t, 10*time.Second, "sessions to close", func() bool { return len(r.Reg.Sessions()) == 0 })
	return r.Sessions()
}

func TestPsqlCopyBothWays(t *testing.T) {
	db, r := relayToDB(t)
	dir := t.TempDir()
	in, out := filepath.Join(dir, "in.tsv"), filepath.Join(dir, "out.tsv")
	var data bytes.Buffer
	for i := range 1000 {
		fmt.Fprintf(&data, "%d\tname %d %s\n", i, i, strings.Repeat("x", i%50))
	}
	if err := os.WriteFile(in, data.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(dir, "script.sql")
	if err := os.WriteFile(script, []byte(fmt.Sprintf(`CREATE TEMP TABLE wirepg_psql (id int, name text);
\copy wirepg_psql from '%s'
\copy (SELECT * FROM wirepg_psql ORDER BY id) to '%s'
SELECT count(*) FROM wirepg_psql;
`, in, out)), 0o644); err != nil {
		t.Fatal(err)
	}
	output := runTool(t, r, db, "psql", "-X", "-v", "ON_ERROR_STOP=1", "-At", "-f", script)
	if !strings.Contains(output, "1000") {
		t.Errorf("psql output %q", output)
	}
	got, err := os.ReadFile(out)
	if err != nil || !bytes.Equal(got, data.Bytes()) {
		t.Fatalf("copied out %d bytes, want the %d copied in (%v)", len(got), data.Len(), err)
	}
	sts := r.statements()
	if len(sts) != 4 {
		t.Fatalf("%d statements: %+v", len(sts), sts)
	}
	for i, st := range sts {
		if st.Outcome != session.OK {
			t.Errorf("statement %d %q: %v %s", i, st.SQL, st.Outcome, st.Code)
		}
	}
	copyIn, copyOut := sts[1], sts[2]
	if !strings.Contains(strings.ToUpper(copyIn.SQL), "FROM STDIN") || copyIn.Rows != 1000 || copyIn.BytesUp < int64(data.Len()) {
		t.Errorf("copy in: %+v", copyIn)
	}
	if !strings.Contains(strings.ToUpper(copyOut.SQL), "TO STDOUT") || copyOut.Rows != 1000 || copyOut.BytesDown < int64(data.Len()) {
		t.Errorf("copy out: %+v", copyOut)
	}
	if sts[3].Rows != 1 {
		t.Errorf("count: %+v", sts[3])
	}
	if sess := r.Sessions(); len(sess) != 1 || sess[0].Application() != "wirepg-psql" || sess[0].User() != db.user {
		t.Errorf("sessions %v", sess)
	}
	checkAttribution(t, r, 2048)
}

func TestPgbench(t *testing.T) {
	testenv.SkipShort(t, "takes 3s here")
	db := scratchDB(t, testDB(t))
	init := startRelay(t, db.addr(), Options{})
	runTool(t, init, db, "pgbench", "-i", "-s", "1", "-q")
	var copied bool
	for _, st := range init.statements() {
		if strings.HasPrefix(strings.ToLower(st.SQL), "copy pgbench_accounts") {
			copied = st.Rows == 100000 && st.BytesUp > 100000*10 && st.Outcome == session.OK
		}
	}
	if !copied {
		t.Errorf("no COPY of 100000 pgbench_accounts rows recorded")
	}
	checkAttribution(t, init, 4096)

	const prepared = "UPDATE pgbench_accounts SET abalance = abalance + $1 WHERE aid = $2;"
	processed := regexp.MustCompile(`number of transactions actually processed: (\d+)/(\d+)`)
	for _, mode := range []string{"simple", "extended", "prepared"} {
		t.Run(mode, func(t *testing.T) {
			r := startRelay(t, db.addr(), Options{})
			out := runTool(t, r, db, "pgbench", "-n", "-M", mode, "-c", "2", "-j", "1", "-t", "100")
			m := processed.FindStringSubmatch(out)
			if m == nil || m[1] != "200" || m[2] != "200" {
				t.Fatalf("pgbench did not finish 200 transactions:\n%s", out)
			}
			counts := map[string]int{}
			for _, st := range r.statements() {
				if st.Outcome != session.OK {
					t.Errorf("%q: %v %s", st.SQL, st.Outcome, st.Code)
				}
				switch {
				case mode != "simple" && st.SQL == prepared:
					counts["update accounts"]++
				case mode == "simple" && strings.HasPrefix(st.SQL, "UPDATE pgbench_accounts SET abalance = abalance + ") && !strings.Contains(st.SQL, "$"):
					counts["update accounts"]++
				case st.SQL == "BEGIN;":
					counts["begin"]++
				case st.SQL == "END;":
					counts["end"]++
				case strings.HasPrefix(st.SQL, "SELECT abalance FROM pgbench_accounts"):
					counts["select"]++
					if st.Rows != 1 {
						t.Errorf("select: %+v", st)
					}
				}
			}
			for _, k := range []string{"update accounts", "begin", "end", "select"} {
				if counts[k] != 200 {
					t.Errorf("%d %q statements, want 200 (all: %v)", counts[k], k, counts)
				}
			}
			checkAttribution(t, r, 4096)
		})
	}
}

func TestSysbench(t *testing.T) {
	testenv.SkipShort(t, "takes 6s here")
	db := scratchDB(t, testDB(t))
	common := func(r *relay, cmd string, extra ...string) []string {
		_, port, _ := strings.Cut(r.Addr, ":")
		args := []string{"oltp_read_write", "--db-driver=pgsql", "--pgsql-host=127.0.0.1", "--pgsql-port=" + port,
			"--pgsql-user=" + db.user, "--pgsql-password=" + db.password, "--pgsql-db=" + db.database,
			"--tables=1", "--table-size=1000"}
		return append(append(args, extra...), cmd)
	}
	prep := startRelay(t, db.addr(), Options{})
	runTool(t, prep, db, "sysbench", common(prep, "prepare")...)

	r := startRelay(t, db.addr(), Options{})
	out := runTool(t, r, db, "sysbench", common(r, "run", "--time=5", "--threads=2")...)
	stat := func(name string) int {
		m := regexp.MustCompile(name + `:\s+(\d+)`).FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("no %q in sysbench output:\n%s", name, out)
		}
		n, _ := strconv.Atoi(m[1])
		return n
	}
	total, txns, ignored := stat("total"), stat("transactions"), stat("ignored errors")
	t.Logf("sysbench: %d transactions, %d queries, %d ignored errors", txns, total, ignored)
	if txns == 0 {
		t.Fatalf("no transactions:\n%s", out)
	}
	const point = "SELECT c FROM sbtest1 WHERE id=$1"
	var points, failed, statements int
	for _, st := range r.statements() {
		if strings.HasPrefix(st.SQL, "SELECT") || strings.HasPrefix(st.SQL, "UPDATE") || strings.HasPrefix(st.SQL, "DELETE") ||
			strings.HasPrefix(st.SQL, "INSERT") || st.SQL == "BEGIN" || st.SQL == "COMMIT" || st.SQL == "ROLLBACK" {
			statements++
		}
		if st.SQL == point {
			points++
		}
		if st.Outcome != session.OK {
			failed++
		}
	}
	t.Logf("%d statements recorded (%d point selects, %d failed)", statements, points, failed)
	// sysbench counts neither a query that failed with an ignored error
	// nor the ROLLBACK it then sends.
	if statements < total || statements > total+2*ignored {
		t.Errorf("%d statements recorded, sysbench ran %d queries and ignored %d errors", statements, total, ignored)
	}
	if points < 10*txns {
		t.Errorf("%d point selects recorded with SQL %q, want at least %d", points, point, 10*txns)
	}
	if failed != ignored {
		t.Errorf("%d statements failed, sysbench ignored %d errors", failed, ignored)
	}
	checkAttribution(t, r, 4096)

	clean := startRelay(t, db.addr(), Options{})
	runTool(t, clean, db, "sysbench", common(clean, "cleanup")...)
}
