package litepg

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/sluicelab/sluice/internal/testenv"
)

// TestSysbenchBinary runs sysbench 1.0's own pgsql driver (libpq, server
// prepared statements) through prepare, a short oltp_read_write run and
// cleanup.
func TestSysbenchBinary(t *testing.T) {
	sysbench := testenv.Program(t, "sysbench")
	_, url := startServer(t, Options{})
	host, port, _ := strings.Cut(addrOf(url), ":")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	common := []string{"oltp_read_write", "--db-driver=pgsql", "--pgsql-host=" + host, "--pgsql-port=" + port,
		"--pgsql-user=lab", "--pgsql-db=lab", "--tables=1", "--table-size=1000"}
	for _, step := range [][]string{
		{"prepare"},
		{"--threads=4", "--time=2", "--report-interval=0", "run"},
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
