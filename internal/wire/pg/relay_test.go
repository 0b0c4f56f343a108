package pg

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/session"
	"github.com/sluicelab/sluice/internal/testenv"
	"github.com/sluicelab/sluice/internal/wire"
	"github.com/sluicelab/sluice/internal/wire/wiretest"
)

// relay is a minimal stand-in for the proxy: a loopback listener that
// opens each connection with a Frontend and then pumps bytes both ways,
// each chunk through its observer before it is written. Reads use a cycle
// of odd sizes so message headers land split across chunks.
type relay struct {
	t        testing.TB
	fe       *Frontend
	reg      *session.Registry
	upstream string
	addr     string

	mu       sync.Mutex
	openErrs []error            // guarded by mu
	sessions []*session.Session // guarded by mu; every session registered
}

// readSizes are the chunk sizes the pumps read, cycled.
var readSizes = []int{1, 5, 13, 4096, 3, 32 << 10, 100}

func startRelay(t testing.TB, upstream string, o Options) *relay {
	t.Helper()
	reg := session.NewRegistry(session.Options{KeepStatements: 1 << 20})
	if o.Upstream == "" {
		o.Upstream = upstream
	}
	o.Keys = reg
	r := &relay{t: t, fe: New(o), reg: reg, upstream: upstream}
	r.addr = testenv.Serve(t, r.serve)
	return r
}

func (r *relay) serve(client net.Conn) {
	defer client.Close()
	dial := func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", r.upstream)
	}
	register := func() *session.Session {
		s := r.reg.Open(session.Info{Route: "test", Protocol: "postgres", Client: client.RemoteAddr().String(), Upstream: r.upstream}, clock.Real{}.Now())
		r.mu.Lock()
		r.sessions = append(r.sessions, s)
		r.mu.Unlock()
		return s
	}
	wc, err := r.fe.Open(context.Background(), client, register, dial)
	if err != nil {
		if !errors.Is(err, wire.ErrHandled) {
			r.mu.Lock()
			r.openErrs = append(r.openErrs, err)
			r.mu.Unlock()
		}
		return
	}
	defer wc.Session.Close(clock.Real{}.Now())
	var (
		wmu  sync.Mutex // serialises writes to the client
		once sync.Once
		wg   sync.WaitGroup
	)
	stop := func() {
		once.Do(func() {
			wc.Client.Close()
			wc.Upstream.Close()
		})
	}
	pump := func(src, dst net.Conn, o wire.Observer, toClient bool, add func(int)) {
		defer wg.Done()
		defer stop()
		buf := make([]byte, 64<<10)
		for i := 0; ; i++ {
			n, err := src.Read(buf[:readSizes[i%len(readSizes)]])
			if n > 0 {
				add(n)
				if oerr := o.Observe(buf[:n]); oerr != nil {
					var fatal *wire.Fatal
					if errors.As(oerr, &fatal) && fatal.Reply != nil {
						wmu.Lock()
						_, _ = wc.Client.Write(fatal.Reply)
						wmu.Unlock()
					}
					return
				}
				if toClient {
					wmu.Lock()
				}
				_, werr := dst.Write(buf[:n])
				if toClient {
					wmu.Unlock()
				}
				if werr != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	}
	wg.Add(2)
	go pump(wc.Client, wc.Upstream, wc.Up, false, wc.Session.AddUp)
	go pump(wc.Upstream, wc.Client, wc.Down, true, wc.Session.AddDown)
	wg.Wait()
}

// errors returns the errors Open returned so far.
func (r *relay) errors() []error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]error(nil), r.openErrs...)
}

// checkOpenErrors fails t with the errors Open returned so far, if any.
func (r *relay) checkOpenErrors(t testing.TB) {
	t.Helper()
	if errs := r.errors(); len(errs) > 0 {
		t.Errorf("open errors: %v", errs)
	}
}

// connect opens a pgx connection through r as db's user; it closes when
// the test ends.
func (r *relay) connect(t testing.TB, db *dbConfig) *pgx.Conn {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, r.url(db, ""))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(ctx) })
	return c
}

// relayToDB starts a relay with default options to the test PostgreSQL.
func relayToDB(t testing.TB) (*dbConfig, *relay) {
	t.Helper()
	db := testDB(t)
	return db, startRelay(t, db.addr(), Options{})
}

// allSessions returns every session the relay registered.
func (r *relay) allSessions() []*session.Session {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*session.Session(nil), r.sessions...)
}

// url returns a connection URL through the relay.
func (r *relay) url(db *dbConfig, extra string) string {
	u := fmt.Sprintf("postgres://%s:%s@%s/%s?sslmode=disable", db.user, db.password, r.addr, db.database)
	if extra != "" {
		u += "&" + extra
	}
	return u
}

// statements returns every statement of every session, in the order
// they began.
func (r *relay) statements() []session.Snapshot {
	return snapshots(r.reg)
}

func snapshots(reg *session.Registry) []session.Snapshot {
	sts := append(reg.Active(), reg.Recent()...)
	out := make([]session.Snapshot, 0, len(sts))
	for _, st := range sts {
		out = append(out, st.Snapshot())
	}
	sortSnapshots(out)
	return out
}

func sortSnapshots(s []session.Snapshot) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j].ID < s[j-1].ID; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

// dbConfig is where the test PostgreSQL is.
type dbConfig struct {
	url                      string
	host                     string
	port                     uint16
	user, password, database string
}

func (d *dbConfig) addr() string { return net.JoinHostPort(d.host, strconv.Itoa(int(d.port))) }

// testDB returns where the shared test PostgreSQL is.
func testDB(t testing.TB) *dbConfig {
	t.Helper()
	return dbAt(t, testenv.PostgresURL(t))
}

// dbAt returns the dbConfig of the connection URL url.
func dbAt(t testing.TB, url string) *dbConfig {
	t.Helper()
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	return &dbConfig{url: url, host: cfg.Host, port: cfg.Port, user: cfg.User, password: cfg.Password, database: cfg.Database}
}

var scratchSeq atomic.Int64

// scratchDB creates a database for one test and drops it afterwards.
func scratchDB(t testing.TB, db *dbConfig) *dbConfig {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, db.url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	name := fmt.Sprintf("sluice_wirepg_%d_%d", os.Getpid(), scratchSeq.Add(1))
	if _, err := c.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c, err := pgx.Connect(ctx, db.url)
		if err != nil {
			t.Error(err)
			return
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Error(err)
		}
	})
	d := *db
	d.database = name
	d.url = fmt.Sprintf("postgres://%s:%s@%s/%s?sslmode=disable", d.user, d.password, d.addr(), name)
	return &d
}

// counters are a client's byte counts.
type counters struct{ read, written atomic.Int64 }

// dialCounting returns a pgx DialFunc that counts into c.
func dialCounting(c *counters) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		var d net.Dialer
		conn, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return wiretest.CountingConn{Conn: conn, BytesRead: &c.read, BytesWritten: &c.written}, nil
	}
}

// waitFor polls cond (in real time) until it holds or d passes.
func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	testenv.Eventually(t, d, what, cond)
}
