package toxics_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"syscall"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2/client"
	"github.com/jackc/pgx/v5"

	"github.com/sluicelab/sluice/internal/httpapi/toxics"
	"github.com/sluicelab/sluice/internal/proxy"
	"github.com/sluicelab/sluice/internal/stack"
	"github.com/sluicelab/sluice/internal/testenv"
	"github.com/sluicelab/sluice/internal/wlm"
)

func testLogger() *slog.Logger { return testenv.Logger(slog.LevelDebug) }

type env struct {
	client *toxiproxy.Client
	svc    *toxics.Service
	srv    *proxy.Server
	mgr    *wlm.Manager
	url    string
}

// newEnv runs the stack of sluice serve and the Toxiproxy API on a real
// listener, and returns the real Toxiproxy client for it.
func newEnv(t *testing.T, rnd func() float64) *env {
	t.Helper()
	st, err := stack.New(context.Background(), stack.Options{Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	srv, mgr := st.Proxy(), st.Manager()
	svc, err := toxics.New(toxics.Options{Server: srv, Catalog: mgr.Service(), Routes: mgr.Runtime(), Logger: testLogger(), Version: "test", Rand: rnd})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	svc.Register(mux)
	hs := httptest.NewServer(mux)
	t.Cleanup(func() {
		hs.Close()
		svc.Close()
		st.Close()
	})
	return &env{client: toxiproxy.NewClient(hs.URL), svc: svc, srv: srv, mgr: mgr, url: hs.URL}
}

// proxy creates a proxy named name to upstream on the default listen
// address (DefaultListen, a free loopback port); an error fails t.
func (e *env) proxy(t *testing.T, name, upstream string) *toxiproxy.Proxy {
	t.Helper()
	px, err := e.client.CreateProxy(name, "", upstream)
	if err != nil {
		t.Fatal(err)
	}
	return px
}

func upstreamOf(t *testing.T, url string) string {
	t.Helper()
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	return net.JoinHostPort(cfg.Host, fmt.Sprint(cfg.Port))
}

func viaProxy(t *testing.T, url, addr string) string {
	t.Helper()
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("postgres://%s:%s@%s/%s?sslmode=disable", cfg.User, cfg.Password, addr, cfg.Database)
}

// fastest returns the shortest of n runs of a query.
func fastest(t *testing.T, c *pgx.Conn, n int) time.Duration {
	t.Helper()
	best := time.Duration(1<<63 - 1)
	for range n {
		start := time.Now()
		var one int
		if err := c.QueryRow(context.Background(), "SELECT 1").Scan(&one); err != nil {
			t.Fatal(err)
		}
		best = min(best, time.Since(start))
	}
	return best
}

// TestLatencyThroughToxiproxyClient drives sluice with Toxiproxy's own Go
// client in front of the real PostgreSQL: a latency toxic slows a query
// by at least its latency, on a live connection and a new one, and
// removing it removes the delay.
func TestLatencyThroughToxiproxyClient(t *testing.T) {
	url := testenv.PostgresURL(t)
	e := newEnv(t, nil)
	px, err := e.client.CreateProxy("pg", "127.0.0.1:0", upstreamOf(t, url))
	if err != nil {
		t.Fatal(err)
	}
	if !px.Enabled || px.Listen == "127.0.0.1:0" {
		t.Fatalf("proxy = %+v, want enabled with its bound address", px)
	}
	ctx := context.Background()
	live, err := pgx.Connect(ctx, viaProxy(t, url, px.Listen))
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close(ctx)
	fastest(t, live, 1)

	const latency = 150 * time.Millisecond
	tx, err := px.AddToxic("lag", "latency", "downstream", 1, toxiproxy.Attributes{"latency": latency.Milliseconds()})
	if err != nil {
		t.Fatal(err)
	}
	if tx.Name != "lag" || tx.Stream != "downstream" || tx.Attributes["latency"] != float64(150) {
		t.Fatalf("toxic = %+v", tx)
	}
	if d := fastest(t, live, 2); d < latency {
		t.Fatalf("live connection: query took %v with a %v latency toxic", d, latency)
	}
	fresh, err := pgx.Connect(ctx, viaProxy(t, url, px.Listen))
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close(ctx)
	if d := fastest(t, fresh, 2); d < latency {
		t.Fatalf("new connection: query took %v with a %v latency toxic", d, latency)
	}
	ts, err := px.Toxics()
	if err != nil || len(ts) != 1 || ts[0].Type != "latency" {
		t.Fatalf("toxics = %+v, %v", ts, err)
	}
	if err := px.RemoveToxic("lag"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []*pgx.Conn{live, fresh} {
		if d := fastest(t, c, 5); d >= latency {
			t.Fatalf("query took %v after the latency toxic was removed", d)
		}
	}
	proxies, err := e.client.Proxies()
	if err != nil || len(proxies) != 1 || proxies["pg"] == nil || len(proxies["pg"].ActiveToxics) != 0 {
		t.Fatalf("proxies = %v, %v", proxies, err)
	}
	if l := e.mgr.Runtime().Link("pg"); l == nil {
		t.Fatal("the proxy has no link named after it")
	}
	if err := px.Delete(); err != nil {
		t.Fatal(err)
	}
	if l := e.mgr.Runtime().Link("pg"); l != nil {
		t.Fatal("the proxy's link survived the proxy")
	}
}

// setTimeout sets the timeout attribute of px's toxic to d, in whole
// milliseconds.
func setTimeout(t *testing.T, px *toxiproxy.Proxy, toxic string, d time.Duration) {
	t.Helper()
	if _, err := px.UpdateToxic(toxic, 1, toxiproxy.Attributes{"timeout": d.Milliseconds()}); err != nil {
		t.Fatal(err)
	}
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(20 * time.Second))
	return c
}

// TestLimitData checks that limit_data passes exactly its bytes and then
// closes the connection, and that a limit on the upstream stream cuts
// what the server receives.
func TestLimitData(t *testing.T) {
	e := newEnv(t, nil)
	big := bytes.Repeat([]byte("0123456789"), 10000)
	upstream := testenv.Serve(t, func(c net.Conn) { c.Write(big); io.Copy(io.Discard, c) })
	px := e.proxy(t, "lim", upstream)
	if _, err := px.AddToxic("", "limit_data", "", 1, toxiproxy.Attributes{"bytes": 1234}); err != nil {
		t.Fatal(err)
	}
	c := dial(t, px.Listen)
	got, err := io.ReadAll(c)
	if len(got) != 1234 || !bytes.Equal(got, big[:1234]) {
		t.Fatalf("read %d bytes (%v), want the first 1234", len(got), err)
	}

	received := make(chan int, 1)
	counting := testenv.Serve(t, func(c net.Conn) {
		n, _ := io.Copy(io.Discard, c)
		received <- int(n)
	})
	up := e.proxy(t, "limup", counting)
	if _, err := up.AddToxic("cut", "limit_data", "upstream", 1, toxiproxy.Attributes{"bytes": 500}); err != nil {
		t.Fatal(err)
	}
	c2 := dial(t, up.Listen)
	c2.Write(big[:300])
	c2.Write(big[300:2000])
	if n := testenv.Receive(t, received, 10*time.Second, "the server's connection to close after the limit"); n != 500 {
		t.Fatalf("server received %d bytes, want 500", n)
	}
}

// TestResetPeer checks that reset_peer answers the first data with a TCP
// RST, after its timeout.
func TestResetPeer(t *testing.T) {
	e := newEnv(t, nil)
	px := e.proxy(t, "rst", testenv.Echo(t))
	c := dial(t, px.Listen)
	if _, err := c.Write([]byte("before")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 6)
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "before" {
		t.Fatalf("echo before the toxic: %q, %v", buf, err)
	}
	const timeout = 200 * time.Millisecond
	if _, err := px.AddToxic("rp", "reset_peer", "downstream", 1, toxiproxy.Attributes{"timeout": timeout.Milliseconds()}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	c.Write([]byte("after"))
	n, err := c.Read(buf)
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("read after reset_peer: %d bytes, err %v; want connection reset by peer", n, err)
	}
	if d := time.Since(start); d < timeout {
		t.Fatalf("reset after %v, before the toxic's timeout %v", d, timeout)
	}
	// A new connection is reset at its first data, at once.
	setTimeout(t, px, "rp", 0)
	c2 := dial(t, px.Listen)
	c2.Write([]byte("x"))
	if _, err := c2.Read(buf); !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("new connection: err %v, want connection reset by peer", err)
	}
}

// TestTimeout checks both forms of the timeout toxic: with a timeout the
// connection closes after it and no data passes; with 0 the data is held
// until the toxic is removed, then delivered.
func TestTimeout(t *testing.T) {
	e := newEnv(t, nil)
	px := e.proxy(t, "to", testenv.Echo(t))
	const timeout = 200 * time.Millisecond
	if _, err := px.AddToxic("t", "timeout", "downstream", 1, toxiproxy.Attributes{"timeout": timeout.Milliseconds()}); err != nil {
		t.Fatal(err)
	}
	c := dial(t, px.Listen)
	start := time.Now()
	c.Write([]byte("lost"))
	got, _ := io.ReadAll(c)
	if len(got) != 0 {
		t.Fatalf("read %q through a timeout toxic", got)
	}
	if d := time.Since(start); d < timeout {
		t.Fatalf("closed after %v, before the timeout %v", d, timeout)
	}

	setTimeout(t, px, "t", 0)
	c2 := dial(t, px.Listen)
	c2.Write([]byte("held"))
	c2.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	buf := make([]byte, 4)
	if n, err := c2.Read(buf); n != 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read %q, %v while the timeout toxic holds the data", buf[:n], err)
	}
	if err := px.RemoveToxic("t"); err != nil {
		t.Fatal(err)
	}
	c2.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(c2, buf); err != nil || string(buf) != "held" {
		t.Fatalf("after removing the toxic: %q, %v", buf, err)
	}
}

// TestSlicerBandwidthSlowClose checks that slicer keeps the bytes exact,
// bandwidth holds a stream to its rate (lower bound on the time), and
// slow_close delays the end of the stream.
func TestSlicerBandwidthSlowClose(t *testing.T) {
	e := newEnv(t, nil)
	data := make([]byte, 100_000)
	for i := range data {
		data[i] = byte(i * 7)
	}
	px := e.proxy(t, "misc", testenv.Serve(t, func(c net.Conn) {
		io.Copy(c, io.LimitReader(c, int64(len(data))))
	}))
	if _, err := px.AddToxic("sl", "slicer", "upstream", 1, toxiproxy.Attributes{"average_size": 100, "size_variation": 40, "delay": 10}); err != nil {
		t.Fatal(err)
	}
	if _, err := px.AddToxic("bw", "bandwidth", "downstream", 1, toxiproxy.Attributes{"rate": 200}); err != nil {
		t.Fatal(err)
	}
	const delay = 300 * time.Millisecond
	if _, err := px.AddToxic("sc", "slow_close", "downstream", 1, toxiproxy.Attributes{"delay": delay.Milliseconds()}); err != nil {
		t.Fatal(err)
	}
	c := dial(t, px.Listen)
	start := time.Now()
	go func() { c.Write(data) }()
	got := make([]byte, len(data))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatal(err)
	}
	transfer := time.Since(start)
	if !bytes.Equal(got, data) {
		t.Fatal("bytes changed through slicer and bandwidth")
	}
	// 100 kB at 200 kB/s is 500 ms, less one millisecond of burst.
	if transfer < 450*time.Millisecond {
		t.Fatalf("100 kB through a 200 KB/s bandwidth toxic took %v", transfer)
	}
	closeStart := time.Now()
	if n, err := c.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		t.Fatalf("after the data: %d bytes, %v; want EOF", n, err)
	}
	if d := time.Since(closeStart); d < delay-50*time.Millisecond {
		t.Fatalf("EOF after %v with a %v slow_close", d, delay)
	}
}

// TestToxicity uses a fixed draw: a toxic with a toxicity below it does
// not act, one above it does.
func TestToxicity(t *testing.T) {
	e := newEnv(t, func() float64 { return 0.6 })
	px := e.proxy(t, "tox", testenv.Serve(t, func(c net.Conn) { c.Write(bytes.Repeat([]byte("z"), 1000)) }))
	if _, err := px.AddToxic("lim", "limit_data", "downstream", 0.5, toxiproxy.Attributes{"bytes": 10}); err != nil {
		t.Fatal(err)
	}
	if got, _ := io.ReadAll(dial(t, px.Listen)); len(got) != 1000 {
		t.Fatalf("toxicity 0.5 with a draw of 0.6: read %d bytes, want 1000 (toxic inactive)", len(got))
	}
	if _, err := px.UpdateToxic("lim", 0.7, toxiproxy.Attributes{}); err != nil {
		t.Fatal(err)
	}
	if got, _ := io.ReadAll(dial(t, px.Listen)); len(got) != 10 {
		t.Fatalf("toxicity 0.7 with a draw of 0.6: read %d bytes, want 10", len(got))
	}
}

// TestProxyLifecycle covers disable/enable on the same address, /reset,
// /populate and the errors.
func TestProxyLifecycle(t *testing.T) {
	e := newEnv(t, nil)
	up := testenv.Echo(t)
	px := e.proxy(t, "life", up)
	addr := px.Listen
	if _, err := px.AddToxic("", "latency", "", 1, toxiproxy.Attributes{"latency": 1}); err != nil {
		t.Fatal(err)
	}
	c := dial(t, addr)
	if err := px.Disable(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatal("connection survived disabling the proxy")
	}
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Fatal("disabled proxy still accepts")
	}
	if err := e.client.ResetState(); err != nil {
		t.Fatal(err)
	}
	p, err := e.client.Proxy("life")
	if err != nil || !p.Enabled || p.Listen != addr || len(p.ActiveToxics) != 0 {
		t.Fatalf("after reset: %+v, %v", p, err)
	}
	c2 := dial(t, addr)
	c2.Write([]byte("ok"))
	buf := make([]byte, 2)
	if _, err := io.ReadFull(c2, buf); err != nil || string(buf) != "ok" {
		t.Fatalf("echo after reset: %q, %v", buf, err)
	}

	ps, err := e.client.Populate([]toxiproxy.Proxy{
		{Name: "life", Listen: addr, Upstream: up, Enabled: true},
		{Name: "pop", Listen: "127.0.0.1:0", Upstream: up, Enabled: true},
	})
	if err != nil || len(ps) != 2 || ps[1].Name != "pop" || !ps[1].Enabled {
		t.Fatalf("populate: %+v, %v", ps, err)
	}

	if _, err := e.client.CreateProxy("life", "", up); err == nil {
		t.Fatal("duplicate proxy accepted")
	}
	if _, err := px.AddToxic("x", "nonsense", "", 1, nil); err == nil {
		t.Fatal("unknown toxic type accepted")
	}
	if _, err := e.client.Proxy("missing"); err == nil {
		t.Fatal("missing proxy found")
	}
}

// TestHeldSessionsEnd checks that a session whose two directions are both
// held by timeout toxics still ends when the proxy server shuts down.
func TestHeldSessionsEnd(t *testing.T) {
	e := newEnv(t, nil)
	px := e.proxy(t, "held", testenv.Serve(t, func(c net.Conn) {
		c.Write([]byte("hello"))
		io.Copy(io.Discard, c)
	}))
	for _, s := range []string{"upstream", "downstream"} {
		if _, err := px.AddToxic("hold_"+s, "timeout", s, 1, toxiproxy.Attributes{"timeout": 0}); err != nil {
			t.Fatal(err)
		}
	}
	c := dial(t, px.Listen)
	c.Write([]byte("ping"))
	testenv.WaitBlocked(t, "toxics.(*conn).hold", 2) // both pumps are held
	done := make(chan struct{})
	go func() { e.srv.Close(); close(done) }()
	testenv.Receive(t, done, 10*time.Second, "shutdown with a session held in both directions")
	if n, err := c.Read(make([]byte, 10)); n != 0 || err == nil {
		t.Fatalf("read %d bytes, %v after shutdown; want the connection closed", n, err)
	}
}
