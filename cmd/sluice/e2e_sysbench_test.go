package main

import (
	"net"
	"os/exec"
	"regexp"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/sluicelab/sluice/internal/config"
	"github.com/sluicelab/sluice/internal/session"
	"github.com/sluicelab/sluice/internal/testenv"
)

var sbTotalRE = regexp.MustCompile(`total:\s+(\d+)`)

// runSysbench runs real sysbench with args and returns its output.
func runSysbench(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command(testenv.Program(t, "sysbench"), args...).CombinedOutput()
	if err != nil {
		t.Fatalf("sysbench %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// TestSysbenchThroughRoutes runs real sysbench oltp_read_write for 20 s
// through a postgres and a mysql route (default --db-ps-mode=auto) and
// checks that it completes without errors and that sluice recorded one
// statement per query sysbench counted.
func TestSysbenchThroughRoutes(t *testing.T) {
	testenv.SkipShort(t, "takes 41s here")
	dsn := testenv.MySQLDSN(t)
	mcfg, _ := mysql.ParseDSN(dsn)
	myRoute := freeAddr(t)
	ta := startApp(t, config.Route{Name: "my", Listen: myRoute, Upstream: mcfg.Addr, Protocol: "mysql"})
	var ended [2]atomic.Int64 // pg, mysql
	unwatch := ta.Proxy().Registry().Watch(session.WatcherFunc(func(e session.Event) {
		if e.Kind != session.StatementEnded {
			return
		}
		switch e.Session.Info.Route {
		case "pg":
			ended[0].Add(1)
		case "my":
			ended[1].Add(1)
		}
	}))
	defer unwatch()
	pgHost, pgPort, _ := net.SplitHostPort(ta.route)
	myHost, myPort, _ := net.SplitHostPort(myRoute)
	drivers := []struct {
		name string
		idx  int
		args []string
	}{
		{"pgsql", 0, []string{"--db-driver=pgsql", "--pgsql-host=" + pgHost, "--pgsql-port=" + pgPort, "--pgsql-user=sluice", "--pgsql-password=sluice", "--pgsql-db=sluice"}},
		{"mysql", 1, []string{"--db-driver=mysql", "--mysql-host=" + myHost, "--mysql-port=" + myPort, "--mysql-user=" + mcfg.User, "--mysql-password=" + mcfg.Passwd, "--mysql-db=" + mcfg.DBName}},
	}
	for _, d := range drivers {
		t.Run(d.name, func(t *testing.T) {
			sb := func(extra ...string) string {
				args := append(append([]string{}, d.args...), "--tables=1", "--table-size=10000")
				return runSysbench(t, append(args, extra...)...)
			}
			sb("oltp_read_write", "cleanup")
			sb("oltp_read_write", "prepare")
			defer sb("oltp_read_write", "cleanup")
			before := ended[d.idx].Load()
			out := sb("--threads=4", "--time=20", "oltp_read_write", "run")
			m := sbTotalRE.FindStringSubmatch(out)
			if m == nil {
				t.Fatalf("no query total in sysbench output:\n%s", out)
			}
			total, _ := strconv.ParseInt(m[1], 10, 64)
			got := ended[d.idx].Load() - before
			// sysbench counts queries; sluice counts statements, plus a few
			// per connection (prepares, set-up) that sysbench does not.
			if total == 0 || got < total || got > total+total/100+200 {
				t.Fatalf("sluice recorded %d statements, sysbench reported %d queries", got, total)
			}
			t.Logf("%s: sysbench %d queries, sluice %d statements", d.name, total, got)
		})
	}
}
