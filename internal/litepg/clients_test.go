package litepg

// This file runs real clients against litepg: psql, sysbench's own pgsql
// driver and sluice's bench.

import (
	"context"
	"io"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/sluicelab/sluice/internal/bench"
	"github.com/sluicelab/sluice/internal/testenv"
)

// psqlScript is the sysbench statement mix as psql sends it, with
// literal values, a \copy and a transaction block.
const psqlScript = sbCreate + `;
CREATE INDEX k_1 ON sbtest1(k);
INSERT INTO sbtest1(k, c, pad) VALUES (1,'a','x'),(2,'b','y');
\copy sbtest1 (id,k,c,pad) from stdin
10	100	ten	pad
\.
BEGIN;
SELECT c FROM sbtest1 WHERE id=1;
SELECT c FROM sbtest1 WHERE id BETWEEN 1 AND 2;
SELECT SUM(k) FROM sbtest1 WHERE id BETWEEN 1 AND 10;
SELECT c FROM sbtest1 WHERE id BETWEEN 1 AND 10 ORDER BY c;
SELECT DISTINCT c FROM sbtest1 WHERE id BETWEEN 1 AND 10 ORDER BY c;
UPDATE sbtest1 SET k=k+1 WHERE id=1;
UPDATE sbtest1 SET c='z' WHERE id=2;
DELETE FROM sbtest1 WHERE id=2;
INSERT INTO sbtest1 (id, k, c, pad) VALUES (2, 5, 'b2', 'y2');
COMMIT;
SELECT 1;
SHOW server_version;
SELECT k FROM sbtest1 ORDER BY id;
SELECT pg_sleep(0.01);
DROP TABLE IF EXISTS sbtest1;
`

// startForClient finds the client program, starts a server for it and
// returns the program's path, the server's host and port, and a context
// that ends after timeout.
func startForClient(t *testing.T, program string, timeout time.Duration) (path, host, port string, ctx context.Context) {
	t.Helper()
	path = testenv.Program(t, program)
	_, url := startServer(t, Options{})
	host, port, _ = strings.Cut(addrOf(url), ":")
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	return path, host, port, ctx
}

func TestPsql(t *testing.T) {
	psql, host, port, ctx := startForClient(t, "psql", 60*time.Second)
	cmd := exec.CommandContext(ctx, psql, "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1",
		"-h", host, "-p", port, "-U", "lab", "-d", "lab", "-f", "-")
	cmd.Stdin = strings.NewReader(psqlScript)
	cmd.Env = append(cmd.Environ(), "PGCONNECT_TIMEOUT=10", "PGAPPNAME=psql-test")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("psql: %v\n%s", err, out)
	}
	want := strings.Join([]string{"a", "a", "b", "103", "a", "b", "ten", "a", "b", "ten", "1", "15.0 (litepg)", "2", "5", "100", "", ""}, "\n")
	if string(out) != want {
		t.Fatalf("psql output:\n%s\nwant:\n%s", out, want)
	}

	// An unsupported statement reaches psql as an error with its SQLSTATE.
	cmd = exec.CommandContext(ctx, psql, "-X", "-q", "-v", "ON_ERROR_STOP=1", "-v", "VERBOSITY=verbose",
		"-h", host, "-p", port, "-U", "lab", "-d", "lab", "-c", "LISTEN channel")
	out, err = cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "0A000") {
		t.Fatalf("psql LISTEN: %v\n%s", err, out)
	}
}

// TestSysbenchBinary runs sysbench 1.0's own pgsql driver (libpq, server
// prepared statements) through prepare, an oltp_read_write run of 2 s
// (200 transactions with -short) and cleanup.
func TestSysbenchBinary(t *testing.T) {
	sysbench, host, port, ctx := startForClient(t, "sysbench", 2*time.Minute)
	common := []string{"oltp_read_write", "--db-driver=pgsql", "--pgsql-host=" + host, "--pgsql-port=" + port,
		"--pgsql-user=lab", "--pgsql-db=lab", "--tables=1", "--table-size=1000"}
	run := []string{"--threads=4", "--time=2", "--report-interval=0", "run"}
	if testing.Short() {
		run = []string{"--threads=4", "--time=0", "--events=200", "--report-interval=0", "run"}
	}
	for _, step := range [][]string{
		{"prepare"},
		run,
		{"cleanup"},
	} {
		args := append(append([]string{}, common...), step...)
		out, err := exec.CommandContext(ctx, sysbench, args...).CombinedOutput()
		if err != nil || strings.Contains(string(out), "FATAL") {
			t.Fatalf("sysbench %s: %v\n%s", step[len(step)-1], err, out)
		}
		if step[len(step)-1] == "run" {
			for _, line := range strings.Split(string(out), "\n") {
				if strings.Contains(line, "transactions:") || strings.Contains(line, "ignored errors:") {
					t.Log(strings.TrimSpace(line))
				}
			}
		}
	}
}

// TestBenchPrepareDefaults runs `sluice bench oltp_read_write prepare` with
// sysbench's default options against litepg: SERIAL ids loaded by COPY,
// the primary key added afterwards, setval on the serial sequence, then a
// short run inserting new rows after the loaded ids.
func TestBenchPrepareDefaults(t *testing.T) {
	_, addr := startServer(t, Options{})
	args := []string{"--db-driver=pgsql", "--dsn=" + addr,
		"--tables=1", "--table-size=500", "--threads=2", "--events=200", "--time=0", "oltp_read_write"}
	o, _, _, err := bench.ParseArgs(append(args, "prepare"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := bench.Prepare(ctx, o, io.Discard); err != nil {
		t.Fatalf("prepare with default options: %v", err)
	}
	o, _, _, _ = bench.ParseArgs(append(args, "run"))
	res, err := bench.Run(ctx, o, io.Discard)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if res.Transactions == 0 || res.Writes == 0 {
		t.Fatalf("run did nothing: %+v", res)
	}
	if err := bench.Cleanup(ctx, o); err != nil {
		t.Fatal(err)
	}
}
