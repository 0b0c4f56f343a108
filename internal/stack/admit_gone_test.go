package stack_test

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sluicelab/sluice/internal/stack"
	"github.com/sluicelab/sluice/internal/testenv"
)

// goneClients is how many held clients go away in the tests below (16,
// 6 with -short): half with a FIN, half with a reset.
func goneClients() int {
	if testing.Short() {
		return 6
	}
	return 16
}

// leave closes c: with a reset when rst (SO_LINGER 0), else with a FIN.
func leave(t *testing.T, c net.Conn, rst bool) {
	t.Helper()
	if tc, ok := c.(*net.TCPConn); ok && rst {
		if err := tc.SetLinger(0); err != nil {
			t.Fatal(err)
		}
	}
	c.Close()
}

// routeSessions counts the open sessions of route.
func routeSessions(st *stack.Stack, route string) int {
	n := 0
	for _, s := range st.Registry().Sessions() {
		if s.Info.Route == route {
			n++
		}
	}
	return n
}

// TestAdmitPGClientsGoneWhileHeld: while one session sits idle in a
// transaction holding the only slot, goneClients() sessions send a
// statement each and go away (half FIN, half reset) while it is held.
// Their sluice sessions and their PostgreSQL backends end at once, not
// when the holder's transaction ends; the holder then commits.
func TestAdmitPGClientsGoneWhileHeld(t *testing.T) {
	st, lim, _ := admitStack(t, "postgres", testenv.PostgresAddr(t), 1, "")
	direct := testenv.ConnectPG(t, testenv.PostgresURL(t))
	commit := holdSlot(t, lim)
	app := fmt.Sprintf("admw_gone_%d", time.Now().UnixNano())
	conns := make([]net.Conn, goneClients())
	done := make(chan error, goneClients())
	for i := range conns {
		c := testenv.ConnectPGConfig(t, pgViaNoCancel(t, lim, app))
		conns[i] = c.PgConn().Conn()
		go func() { _, err := c.Exec(context.Background(), "SELECT 1"); done <- err }()
	}
	checkGoneWhileHeld(t, st, conns, done, "backends", pgBackends(t, direct, app))
	commit()
}

// checkGoneWhileHeld waits up to 10 s until goneClients() statements are
// held, checks that serverSide (the server's sessions of the held
// clients, named by what) counts every one, closes conns (the held
// clients' sockets: every second one with a reset, the others with a
// FIN) and takes an end from done for each. The gone clients' sluice
// sessions and server sessions must end within 10 s, leaving one
// session of route lim (the holder's) and admission running only the
// holder's slot of pool admw_lim.
func checkGoneWhileHeld(t *testing.T, st *stack.Stack, conns []net.Conn, done <-chan error, what string, serverSide func() int) {
	t.Helper()
	testenv.Eventually(t, 10*time.Second, "every statement held", func() bool { return heldCount(st) == goneClients() })
	if n := serverSide(); n != goneClients() {
		t.Fatalf("%d %s of the held clients, want %d", n, what, goneClients())
	}
	left := time.Now()
	for i, c := range conns {
		leave(t, c, i%2 == 1)
	}
	for range conns {
		<-done
	}
	testenv.Eventually(t, 10*time.Second, "the gone clients' sessions and "+what+" ended", func() bool {
		return routeSessions(st, "lim") == 1 && serverSide() == 0
	})
	t.Logf("%d sessions and %s gone %v after their clients left", goneClients(), what, time.Since(left).Round(time.Millisecond))
	if s := st.Manager().Admission().AdmissionStats()["admw_lim"]; s.Running != 1 || s.Waiting != 0 {
		t.Fatalf("admission %+v, want the holder's slot only", s)
	}
}

// TestAdmitMySQLClientsGoneWhileHeld is TestAdmitPGClientsGoneWhileHeld
// against MariaDB, through go-sql-driver/mysql: the server's connections
// of the gone clients leave its process list at once.
func TestAdmitMySQLClientsGoneWhileHeld(t *testing.T) {
	st, lim, _ := admitStack(t, "mysql", testenv.MySQLConfig(t).Addr, 1, "")
	direct := testenv.OpenMySQL(t, testenv.MySQLConfig(t))
	bg := context.Background()
	conns := make([]net.Conn, goneClients())
	held := make([]*sql.Conn, goneClients())
	ids := make([]string, goneClients())
	for i := range conns {
		db := mysqlKeepingSocket(t, lim, func(c net.Conn) { conns[i] = c })
		held[i] = mysqlConn(t, db)
		var id int64
		if err := held[i].QueryRowContext(bg, "SELECT CONNECTION_ID()").Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids[i] = fmt.Sprint(id)
	}
	connections := func() int {
		var n int
		if err := direct.QueryRow("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID IN (" + strings.Join(ids, ",") + ")").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	tx := mysqlBegin(t, mysqlConn(t, mysqlVia(t, lim, 1)), "SELECT 1")
	done := make(chan error, goneClients())
	for _, c := range held {
		go func() { _, err := c.ExecContext(bg, "SELECT 1"); done <- err }()
	}
	checkGoneWhileHeld(t, st, conns, done, "server connections", connections)
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

// mysqlKeepingSocket opens a one-connection pool of go-sql-driver/mysql
// to the test MariaDB through addr, handing keep the socket it dials, so
// that a test can reset or close it under the driver. The pool closes
// when the test ends.
func mysqlKeepingSocket(t *testing.T, addr string, keep func(net.Conn)) *sql.DB {
	t.Helper()
	cfg := testenv.MySQLConfig(t)
	cfg.Addr = addr
	cfg.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		var d net.Dialer
		c, err := d.DialContext(ctx, network, addr)
		if err == nil {
			keep(c)
		}
		return c, err
	}
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(connector)
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	return db
}
