package pg

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/sluicelab/sluice/internal/session"
	"github.com/sluicelab/sluice/internal/testenv"
	"github.com/sluicelab/sluice/internal/wire/wiretest"
)

// relay is the shared test relay (wiretest.Relay) with a Frontend.
type relay struct {
	*wiretest.Relay
	t  testing.TB
	fe *Frontend
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
	fe := New(o)
	r := &relay{t: t, fe: fe, Relay: &wiretest.Relay{Protocol: "postgres", Upstream: upstream, Reg: reg, Open: fe.Open, ReadSizes: readSizes}}
	r.Addr = testenv.Serve(t, r.Serve)
	return r
}

// checkOpenErrors fails t with the errors Open returned so far, if any.
func (r *relay) checkOpenErrors(t testing.TB) {
	t.Helper()
	if errs := r.Errors(); len(errs) > 0 {
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

// url returns a connection URL through the relay.
func (r *relay) url(db *dbConfig, extra string) string {
	u := fmt.Sprintf("postgres://%s:%s@%s/%s?sslmode=disable", db.user, db.password, r.Addr, db.database)
	if extra != "" {
		u += "&" + extra
	}
	return u
}

// statements returns every statement of every session, in the order
// they began.
func (r *relay) statements() []session.Snapshot {
	return snapshots(r.Reg)
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
