package litepg

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

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

func TestPsql(t *testing.T) {
	psql := testenv.Program(t, "psql")
	_, url := startServer(t, Options{})
	host, port, _ := strings.Cut(addrOf(url), ":")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
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
