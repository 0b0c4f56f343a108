package main

import (
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/config"
	"github.com/sluicelab/sluice/internal/testenv"
)

// TestRouteTimeoutsFromConfig: startup_timeout and connect_timeout from
// the configuration file reach the routes' front ends. A client that
// stalls in the opening exchange of a postgres or mysql route is closed
// at its route's startup_timeout, and a mysql route whose upstream never
// greets answers at its connect_timeout.
func TestRouteTimeoutsFromConfig(t *testing.T) {
	pgUpstream, myCfg := testenv.PostgresAddr(t), testenv.MySQLConfig(t)
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	go func() { // accepts and never writes
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	pgRoute, myRoute, deadRoute := freeAddr(t), freeAddr(t), freeAddr(t)
	c, err := config.Parse("timeouts.yaml", []byte(fmt.Sprintf(`
routes:
  - name: pg
    listen: %s
    upstream: %s
    protocol: postgres
    startup_timeout: 300ms
  - name: my
    listen: %s
    upstream: %s
    protocol: mysql
    startup_timeout: 300ms
  - name: silent
    listen: %s
    upstream: %s
    protocol: mysql
    connect_timeout: 300ms
`, pgRoute, pgUpstream, myRoute, myCfg.Addr, deadRoute, silent.Addr())))
	if err != nil {
		t.Fatal(err)
	}
	runApp(t, c)

	for _, addr := range []string{pgRoute, myRoute} {
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		// Well before the 30 s default: the configured 300 ms, and a margin.
		nc.SetReadDeadline(clock.Real{}.Now().Add(10 * time.Second))
		if _, err := io.ReadAll(nc); errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("route %s: a stalled client is still open after 10 s", addr)
		}
	}

	mc := myCfg.Clone()
	mc.Addr, mc.Timeout, mc.ReadTimeout = deadRoute, 10*time.Second, 10*time.Second
	conn, err := mysql.NewConnector(mc)
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(conn)
	defer db.Close()
	err = db.Ping()
	var me *mysql.MySQLError
	if !errors.As(err, &me) || me.Number != 9001 || !strings.Contains(me.Message, silent.Addr().String()) {
		t.Fatalf("ping through a route to a silent upstream: %v", err)
	}
}
