package mysql

import (
	"context"
	"database/sql"
	"log/slog"
	"net"
	"sync/atomic"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/sluicelab/sluice/internal/session"
	"github.com/sluicelab/sluice/internal/testenv"
	"github.com/sluicelab/sluice/internal/wire"
	"github.com/sluicelab/sluice/internal/wire/wiretest"
)

// relay is the shared test relay (wiretest.Relay) with a Frontend.
type relay struct {
	*wiretest.Relay
	fe   *Frontend
	real bool // the upstream is the test server

	openRead, openWrote atomic.Int64 // bytes the Frontend read from / wrote to clients, from accept on
}

// startRelay starts a relay to the test server (or to o.Upstream if set).
func startRelay(t testing.TB, o Options, regOpts session.Options) *relay {
	t.Helper()
	real := o.Upstream == ""
	if real {
		o.Upstream = testenv.MySQLConfig(t).Addr
	}
	if o.Logger == nil {
		o.Logger = testenv.Logger(slog.LevelDebug)
	}
	r := &relay{fe: New(o), real: real}
	r.Relay = &wiretest.Relay{Protocol: "mysql", Upstream: o.Upstream, Reg: session.NewRegistry(regOpts), Open: r.open}
	r.Addr = testenv.Serve(t, r.Serve)
	return r
}

// open opens client with the Frontend, counting the bytes of the
// opening exchange.
func (r *relay) open(ctx context.Context, client net.Conn, register wire.Register, dial wire.Dialer) (wire.Conn, error) {
	return r.fe.Open(ctx, wiretest.CountingConn{Conn: client, BytesRead: &r.openRead, BytesWritten: &r.openWrote}, register, dial)
}

// client is a go-sql-driver pool through a relay, with one connection
// whose bytes are counted.
type client struct {
	db       *sql.DB
	up, down atomic.Int64
	last     atomic.Pointer[net.Conn] // the latest raw connection
}

// openClient opens a database/sql pool through r; tweak edits the driver
// configuration.
func (r *relay) openClient(t testing.TB, tweak func(*gomysql.Config)) *client {
	t.Helper()
	cfg := gomysql.NewConfig()
	cfg.User, cfg.Passwd, cfg.DBName = "sluice", "sluice", "sluice"
	if r.real {
		cfg = testenv.MySQLConfig(t).Clone()
	}
	cfg.Net, cfg.Addr = "tcp", r.Addr
	c := &client{}
	cfg.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		var d net.Dialer
		nc, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		var raw net.Conn = nc
		c.last.Store(&raw)
		return wiretest.CountingConn{Conn: nc, BytesRead: &c.down, BytesWritten: &c.up}, nil
	}
	if tweak != nil {
		tweak(cfg)
	}
	conn, err := gomysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c.db = sql.OpenDB(conn)
	t.Cleanup(func() { c.db.Close() })
	return c
}

// sessionRecords returns the records of statements of session id.
func sessionRecords(reg *session.Registry, id uint64) []session.Snapshot {
	var out []session.Snapshot
	for _, st := range reg.Recent() {
		if s := st.Snapshot(); s.SessionID == id {
			out = append(out, s)
		}
	}
	return out
}

// onlySession returns the single open session of reg, once the sessions
// of earlier subtests, whose clients have closed, have ended too.
func onlySession(t testing.TB, reg *session.Registry) *session.Session {
	t.Helper()
	var ss []*session.Session
	testenv.Eventually(t, 10*time.Second, "one session open", func() bool {
		ss = reg.Sessions()
		return len(ss) == 1
	})
	return ss[0]
}

// waitFor polls cond until it holds or 10 s pass.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	testenv.Eventually(t, 10*time.Second, what, cond)
}
