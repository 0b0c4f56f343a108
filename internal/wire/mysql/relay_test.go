package mysql

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/session"
	"github.com/sluicelab/sluice/internal/testenv"
	"github.com/sluicelab/sluice/internal/wire"
	"github.com/sluicelab/sluice/internal/wire/wiretest"
)

// relay is a minimal stand-in for the proxy: it accepts clients on a
// loopback port, opens each with the Frontend, and copies bytes both ways
// through the observers (Observe, then Write), as the proxy does.
type relay struct {
	fe    *Frontend
	reg   *session.Registry
	addr  string
	up    string // upstream address
	real  bool   // the upstream is the test server
	split bool   // cut every read into pseudo-random chunks before observing

	clientUp, clientDown atomic.Int64 // bytes read from / written to clients in the command phase
	openRead, openWrote  atomic.Int64 // bytes the Frontend read from / wrote to clients, from accept on

	mu      sync.Mutex
	openErr []error // guarded by mu
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
	r := &relay{fe: New(o), reg: session.NewRegistry(regOpts), up: o.Upstream, real: real}
	r.addr = testenv.Serve(t, r.serve)
	return r
}

func (r *relay) errors() []error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]error(nil), r.openErr...)
}

func (r *relay) serve(c net.Conn) {
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	register := func() *session.Session {
		return r.reg.Open(session.Info{Route: "test", Protocol: "mysql", Client: c.RemoteAddr().String(), Upstream: r.up}, clock.Real{}.Now())
	}
	dial := func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", r.up)
	}
	wc, err := r.fe.Open(ctx, wiretest.CountingConn{Conn: c, BytesRead: &r.openRead, BytesWritten: &r.openWrote}, register, dial)
	cancel()
	if err != nil {
		r.mu.Lock()
		r.openErr = append(r.openErr, err)
		r.mu.Unlock()
		return
	}
	defer wc.Upstream.Close()
	defer wc.Client.Close()
	var seed atomic.Uint64
	seed.Store(uint64(len(r.errors())) + 1)
	pump := func(src, dst net.Conn, o wire.Observer, first []byte, count *atomic.Int64, client bool) error {
		var rng *rand.Rand
		if r.split {
			rng = rand.New(rand.NewPCG(seed.Add(1), 7))
		}
		send := func(b []byte) error {
			for len(b) > 0 {
				n := len(b)
				if rng != nil {
					n = 1 + rng.IntN(min(n, 300))
				}
				if err := o.Observe(b[:n]); err != nil {
					return err
				}
				if _, err := dst.Write(b[:n]); err != nil {
					return err
				}
				count.Add(int64(n))
				b = b[n:]
			}
			return nil
		}
		if err := send(first); err != nil {
			return err
		}
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				if err := send(buf[:n]); err != nil {
					return err
				}
			}
			if err != nil {
				return err
			}
		}
	}
	done := make(chan error, 2)
	go func() {
		err := pump(wc.Client, wc.Upstream, wc.Up, wc.Buffered, &r.clientUp, true)
		var f *wire.Fatal
		if errors.As(err, &f) && f.Reply != nil {
			wc.Client.Write(f.Reply)
		}
		done <- err
	}()
	go func() { done <- pump(wc.Upstream, wc.Client, wc.Down, nil, &r.clientDown, false) }()
	<-done
	wc.Client.Close()
	wc.Upstream.Close()
	<-done
	if wc.Close != nil {
		wc.Close()
	}
	wc.Session.Close(clock.Real{}.Now())
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
	cfg.Net, cfg.Addr = "tcp", r.addr
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
