package fastpath

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"

	"github.com/sluicelab/sluice/internal/testenv"
)

// relayOne relays the first client that connects to the returned address
// to upstream, pairing the sockets once opening reports the server's
// chunk that ends the opening exchange. The relay arrives on the channel
// once it runs.
func relayOne(t *testing.T, k *testKernel, upstream string, proto Proto, opening func([]byte) bool) (string, <-chan *relay) {
	t.Helper()
	front := listen(t)
	ch := make(chan *relay, 1)
	go func() {
		c, err := front.Accept()
		if err != nil {
			return
		}
		u, err := net.Dial("tcp", upstream)
		if err != nil {
			c.Close()
			return
		}
		r := &relay{conns: [2]*net.TCPConn{c.(*net.TCPConn), u.(*net.TCPConn)}, k: k, proto: proto, opening: opening, errs: make(chan error, 2)}
		t.Cleanup(func() {
			r.conns[0].Close()
			r.conns[1].Close()
			r.gate.Lock()
			if r.p != nil {
				r.p.Close()
			}
			r.gate.Unlock()
		})
		r.start()
		ch <- r
	}()
	return front.Addr().String(), ch
}

// TestPostgresClient runs pgx through a relay that hands the session to
// the kernel at the server's first ReadyForQuery: the program must count
// every simple query and every Execute the client sent, the server's
// ReadyForQuery for each and its last status, with every byte relayed in
// the kernel.
func TestPostgresClient(t *testing.T) {
	k := openKernel(t)
	cfg, err := pgx.ParseConfig(testenv.PostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	readyIdle := []byte{'Z', 0, 0, 0, 5, 'I'}
	addr, relays := relayOne(t, k, net.JoinHostPort(cfg.Host, fmt.Sprint(cfg.Port)), PostgreSQL, func(c []byte) bool { return bytes.HasSuffix(c, readyIdle) })
	host, port, _ := net.SplitHostPort(addr)
	cfg.Host = host
	fmt.Sscan(port, &cfg.Port)
	cfg.TLSConfig = nil
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	r := <-relays
	const simple, extended = 37, 23
	for i := range simple {
		var n int
		if err := conn.QueryRow(ctx, fmt.Sprintf("SELECT %d", i), pgx.QueryExecModeSimpleProtocol).Scan(&n); err != nil || n != i {
			t.Fatalf("simple query %d: %d, %v", i, n, err)
		}
	}
	for i := range extended {
		var s string
		if err := conn.QueryRow(ctx, "SELECT repeat('x', $1::int)", 1000*i).Scan(&s); err != nil || len(s) != 1000*i {
			t.Fatalf("extended query %d: %d bytes, %v", i, len(s), err)
		}
	}
	if _, err := conn.Exec(ctx, "BEGIN", pgx.QueryExecModeSimpleProtocol); err != nil {
		t.Fatal(err)
	}
	client, err := r.statsWhenPaired(0)
	if err != nil {
		t.Fatal(err)
	}
	server, err := r.statsWhenPaired(1)
	if err != nil {
		t.Fatal(err)
	}
	if got := client.Types['Q']; got != simple+1 {
		t.Errorf("client side: %d Query messages, want %d", got, simple+1)
	}
	if got := client.Types['E']; got != extended {
		t.Errorf("client side: %d Execute messages, want %d", got, extended)
	}
	// Each simple query and each extended batch (pgx's Sync) earns one
	// ReadyForQuery; the prepare of the one extended statement earns one
	// more.
	if got, want := server.Types['Z'], client.Types['Q']+client.Types['S']; got != want {
		t.Errorf("server side: %d ReadyForQuery, want %d (Query %d + Sync %d)", got, want, client.Types['Q'], client.Types['S'])
	}
	if server.Status != 'T' {
		t.Errorf("server side: status %q after BEGIN, want 'T'", server.Status)
	}
	for i, st := range []Stats{client, server} {
		// Chunks the journal holds go in the kernel, larger ones (the
		// big result) through user space.
		if st.Broken || st.Redirected == 0 || st.Redirected+st.Passed != st.Bytes {
			t.Errorf("side %d: broken %v, %d bytes, %d redirected, %d passed", i, st.Broken, st.Bytes, st.Redirected, st.Passed)
		}
	}
	conn.Close(ctx)
	if err := r.wait(); err != nil {
		t.Fatal(err)
	}
}

// TestMySQLClient runs go-sql-driver/mysql through a relay that hands the
// session to the kernel at the server's OK to the login: the program
// must count each COM_QUERY and COM_STMT_EXECUTE the client sent.
func TestMySQLClient(t *testing.T) {
	k := openKernel(t)
	cfg, err := mysql.ParseDSN(testenv.MySQLDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	ok := func(c []byte) bool {
		return len(c) >= 5 && int(c[0])|int(c[1])<<8|int(c[2])<<16 == len(c)-4 && c[4] == 0
	}
	addr, relays := relayOne(t, k, cfg.Addr, MySQL, ok)
	cfg.Addr = addr
	cfg.TLSConfig = ""
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r := <-relays
	before, err := r.statsWhenPaired(0)
	if err != nil {
		t.Fatal(err)
	}
	const queries, executes = 29, 17
	for i := range queries {
		var n int
		if err := conn.QueryRowContext(ctx, fmt.Sprintf("SELECT %d", i)).Scan(&n); err != nil || n != i {
			t.Fatalf("query %d: %d, %v", i, n, err)
		}
	}
	stmt, err := conn.PrepareContext(ctx, "SELECT REPEAT('x', ?)")
	if err != nil {
		t.Fatal(err)
	}
	for i := range executes {
		var s string
		if err := stmt.QueryRowContext(ctx, 1000*i).Scan(&s); err != nil || len(s) != 1000*i {
			t.Fatalf("execute %d: %d bytes, %v", i, len(s), err)
		}
	}
	stmt.Close()
	after, err := r.statsWhenPaired(0)
	if err != nil {
		t.Fatal(err)
	}
	if got := after.Types[0x03] - before.Types[0x03]; got != queries {
		t.Errorf("%d COM_QUERY, want %d", got, queries)
	}
	if got := after.Types[0x17] - before.Types[0x17]; got != executes {
		t.Errorf("%d COM_STMT_EXECUTE, want %d", got, executes)
	}
	if after.Broken || after.Redirected == 0 || after.Redirected+after.Passed != after.Bytes {
		t.Errorf("client side: broken %v, %d bytes, %d redirected, %d passed", after.Broken, after.Bytes, after.Redirected, after.Passed)
	}
	conn.Close()
	db.Close()
	if err := r.wait(); err != nil {
		t.Fatal(err)
	}
}

// statsWhenPaired returns side i's counts once the relay has paired.
func (r *relay) statsWhenPaired(i int) (Stats, error) {
	r.gate.RLock()
	defer r.gate.RUnlock()
	if r.p == nil {
		return Stats{}, fmt.Errorf("the session was never paired")
	}
	return r.p.Stats(i)
}
