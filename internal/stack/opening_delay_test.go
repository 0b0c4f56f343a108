package stack_test

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sluicelab/sluice/internal/testenv"
)

// openingDelay is the one-way delay of the routes the opening tests use.
const openingDelay = 20 * time.Millisecond

// TestOpeningDelayedMySQL: through a mysql route with a 20 ms delay each
// way, the server's greeting reaches a client that has just connected
// one delay later, as it does through tc netem or Toxiproxy, and a login
// and a query through go-sql-driver/mysql work as before.
func TestOpeningDelayedMySQL(t *testing.T) {
	my := testenv.MySQLConfig(t)
	addr := testenv.DeadAddr(t)
	configStack(t, fmt.Sprintf("catalog: \"\"\nroutes:\n  - name: myd\n    listen: %s\n    upstream: %s\n    protocol: mysql\n    emulation:\n      delay: %s\n",
		addr, my.Addr, openingDelay))
	start := time.Now()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var hdr [4]byte
	if _, err := io.ReadFull(c, hdr[:]); err != nil {
		t.Fatalf("reading the greeting: %v", err)
	}
	greeting := time.Since(start)
	if n := int(hdr[0]) | int(hdr[1])<<8 | int(hdr[2])<<16; hdr[3] != 0 || n == 0 {
		t.Fatalf("first packet header %v: not a greeting", hdr)
	}
	t.Logf("greeting after %v through a %v route", greeting, openingDelay)
	if greeting < openingDelay {
		t.Errorf("greeting after %v, before the route's %v delay", greeting, openingDelay)
	}

	cfg := my.Clone()
	cfg.Addr = addr
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(conn)
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var one int
	if err := db.QueryRowContext(ctx, "SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Fatalf("SELECT 1 through the delayed route: %d, %v", one, err)
	}
}

// TestOpeningDelayedPostgres: through a postgres route with a 20 ms delay
// each way, the answer to an SSLRequest, the first byte of the opening
// exchange a client reads, comes one round trip after the request, and a
// pgx connection and a query work as before.
func TestOpeningDelayedPostgres(t *testing.T) {
	pg := testenv.PostgresConfig(t)
	addr := testenv.DeadAddr(t)
	configStack(t, fmt.Sprintf("catalog: \"\"\nroutes:\n  - name: pgd\n    listen: %s\n    upstream: %s:%d\n    protocol: postgres\n    emulation:\n      delay: %s\n",
		addr, pg.Host, pg.Port, openingDelay))
	raw, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	raw.SetDeadline(time.Now().Add(10 * time.Second))
	start := time.Now()
	if _, err := raw.Write([]byte{0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f}); err != nil { // SSLRequest
		t.Fatal(err)
	}
	var answer [1]byte
	if _, err := io.ReadFull(raw, answer[:]); err != nil {
		t.Fatalf("reading the SSLRequest's answer: %v", err)
	}
	rtt := time.Since(start)
	t.Logf("SSLRequest answered %q after %v through a %v route", answer[0], rtt, openingDelay)
	if answer[0] != 'N' && answer[0] != 'S' {
		t.Fatalf("SSLRequest answered %q", answer[0])
	}
	if rtt < openingDelay {
		t.Errorf("SSLRequest answered after %v, before the route's %v delay", rtt, openingDelay)
	}
	c := testenv.ConnectPGConfig(t, pgVia(t, addr, "opening_delay"))
	var one int
	if err := c.QueryRow(context.Background(), "SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Fatalf("SELECT 1 through the delayed route: %d, %v", one, err)
	}
}
