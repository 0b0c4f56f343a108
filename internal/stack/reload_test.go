package stack_test

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"

	"github.com/sluicelab/sluice/internal/config"
	"github.com/sluicelab/sluice/internal/stack"
	"github.com/sluicelab/sluice/internal/testenv"
)

// sessionsPerRoute is how many busy sessions each route carries.
const sessionsPerRoute = 20

// worker is one client session kept busy by a goroutine: each query
// asks the server for a string of a varying length and its MD5, and
// checks both against what the client computes, so a byte lost, added or
// changed on the way fails it.
type worker struct {
	ok   atomic.Int64 // queries answered correctly
	mu   sync.Mutex
	err  error // guarded by mu; the first failure, after which it stops
	done chan struct{}
}

func (w *worker) fail(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		w.err = err
	}
}

func (w *worker) failed() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// query is one round trip of a session: it returns the string of n
// copies of c and the server's MD5 of it.
type query func(ctx context.Context, c byte, n int) (s, sum string, err error)

// run loops query until ctx ends or a query fails.
func (w *worker) run(ctx context.Context, q query, seed int) {
	defer close(w.done)
	for i := seed; ctx.Err() == nil; i++ {
		c, n := byte('a'+i%26), 1+(i*7919)%16384
		s, sum, err := q(ctx, c, n)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			w.fail(err)
			return
		}
		want := strings.Repeat(string(c), n)
		h := md5.Sum([]byte(want))
		if s != want || sum != hex.EncodeToString(h[:]) {
			w.fail(fmt.Errorf("query %d: got %d bytes (md5 %s), want %d bytes of %q (md5 %x)", i, len(s), sum, n, c, h))
			return
		}
		w.ok.Add(1)
	}
}

// pool is the workers of one route.
type pool struct {
	name    string
	workers []*worker
}

// total is the sum of the workers' correct answers.
func (p *pool) total() int64 {
	var n int64
	for _, w := range p.workers {
		n += w.ok.Load()
	}
	return n
}

// progressed waits until every worker has answered more queries than
// in before.
func (p *pool) progressed(t *testing.T, before []int64) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, p.name+" sessions answering", func() bool {
		for i, w := range p.workers {
			if err := w.failed(); err != nil {
				t.Fatalf("%s session %d: %v", p.name, i, err)
			}
			if w.ok.Load() <= before[i] {
				return false
			}
		}
		return true
	})
}

func (p *pool) counts() []int64 {
	out := make([]int64, len(p.workers))
	for i, w := range p.workers {
		out[i] = w.ok.Load()
	}
	return out
}

// noErrors fails t if any worker of p failed.
func (p *pool) noErrors(t *testing.T) {
	t.Helper()
	for i, w := range p.workers {
		if err := w.failed(); err != nil {
			t.Errorf("%s session %d: %v", p.name, i, err)
		}
	}
}

// startPG opens n sessions through addr with the test database's
// credentials, and keeps each busy until ctx ends.
func startPG(t *testing.T, ctx context.Context, name, pgURL, addr string, n int) *pool {
	t.Helper()
	cfg := testenv.PostgresConfigVia(t, pgURL, addr)
	p := &pool{name: name}
	for i := range n {
		conn, err := pgx.ConnectConfig(ctx, cfg.Copy())
		if err != nil {
			t.Fatalf("%s session %d: %v", name, i, err)
		}
		t.Cleanup(func() { conn.Close(context.Background()) })
		w := &worker{done: make(chan struct{})}
		p.workers = append(p.workers, w)
		go w.run(ctx, func(ctx context.Context, ch byte, n int) (string, string, error) {
			var s, sum string
			err := conn.QueryRow(ctx, "SELECT repeat($1::text, $2::int), md5(repeat($1::text, $2::int))", string(ch), n).Scan(&s, &sum)
			return s, sum, err
		}, i*1000)
	}
	return p
}

// startMySQL opens n sessions through addr with the test database's
// credentials, and keeps each busy until ctx ends.
func startMySQL(t *testing.T, ctx context.Context, name, dsn, addr string, n int) *pool {
	t.Helper()
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Addr = addr
	db := testenv.OpenMySQL(t, cfg)
	p := &pool{name: name}
	for i := range n {
		conn, err := db.Conn(ctx)
		if err != nil {
			t.Fatalf("%s session %d: %v", name, i, err)
		}
		t.Cleanup(func() { conn.Close() })
		w := &worker{done: make(chan struct{})}
		p.workers = append(p.workers, w)
		go w.run(ctx, func(ctx context.Context, ch byte, n int) (string, string, error) {
			var s, sum string
			err := conn.QueryRowContext(ctx, "SELECT REPEAT(?, ?), MD5(REPEAT(?, ?))", string(ch), n, string(ch), n).Scan(&s, &sum)
			return s, sum, err
		}, i*1000)
	}
	return p
}

// routeAddr is the bound address of the stack's route name ("" if it
// runs none).
func routeAddr(st *stack.Stack, name string) string {
	for _, r := range st.Proxy().Routes() {
		if r.Name == name {
			return r.Listen
		}
	}
	return ""
}

// reloadFile writes body to path and reloads the stack from it.
func reloadFile(t *testing.T, st *stack.Stack, path, body string) (config.Changes, error) {
	t.Helper()
	writeFile(t, path, body)
	return st.ReloadConfig(context.Background())
}

// writeFile writes body to path.
func writeFile(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestReloadUnderLoad is the acceptance test of live reload: routes of
// both protocols carry busy sessions over real sockets to the real
// servers while the configuration file is reloaded three times (a route
// added, then changed, then removed) and once with an error. The
// sessions of the routes that never change see no error at all.
func TestReloadUnderLoad(t *testing.T) {
	testenv.SkipShort(t, "takes 11s here")
	pgURL, dsn := testenv.PostgresURL(t), testenv.MySQLDSN(t)
	pgc, myc := testenv.PostgresConfig(t), testenv.MySQLConfig(t)
	pgUp := net.JoinHostPort(pgc.Host, strconv.Itoa(int(pgc.Port)))
	_, pgPort, _ := net.SplitHostPort(pgUp)
	pgUpAlias := net.JoinHostPort("localhost", pgPort) // the same server by another address

	dir := t.TempDir()
	const grace = 2 * time.Second
	base := fmt.Sprintf(`shutdown_grace: %s
routes:
  - name: pg
    listen: 127.0.0.1:0
    upstream: %s
    protocol: postgres
  - name: my
    listen: 127.0.0.1:0
    upstream: %s
    protocol: mysql
`, grace, pgUp, myc.Addr)
	pg2 := func(upstream, delay string) string {
		return fmt.Sprintf(`  - name: pg2
    listen: 127.0.0.1:0
    upstream: %s
    protocol: postgres
    emulation:
      delay: %s
`, upstream, delay)
	}
	st, path := configStack(t, base)

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	pgPool := startPG(t, ctx, "pg", pgURL, routeAddr(st, "pg"), sessionsPerRoute)
	myPool := startMySQL(t, ctx, "my", dsn, routeAddr(st, "my"), sessionsPerRoute)
	steady := []*pool{pgPool, myPool}
	progress := func() {
		t.Helper()
		for _, p := range steady {
			p.progressed(t, p.counts())
		}
	}
	progress()

	// 1. A route is added; sessions work through it.
	ch, err := reloadFile(t, st, path, base+pg2(pgUp, "0ms"))
	if err != nil {
		t.Fatalf("reload adding pg2: %v", err)
	}
	if !slices.Equal(ch.Added, []string{"pg2"}) || len(ch.Removed)+len(ch.Changed) != 0 || len(ch.Unchanged) != 2 {
		t.Fatalf("reload adding pg2: changes %+v", ch)
	}
	pg2Addr := routeAddr(st, "pg2")
	if pg2Addr == "" {
		t.Fatal("pg2 is not running after the reload that added it")
	}
	oldPG2 := startPG(t, ctx, "pg2", pgURL, pg2Addr, sessionsPerRoute)
	oldPG2.progressed(t, make([]int64, sessionsPerRoute))
	progress()

	// A broken configuration is refused whole: nothing of it applies
	// (not even its valid new route) and the running one keeps serving.
	for _, broken := range []struct{ name, body, key string }{
		{"bad delay", base + pg2(pgUp, "soon") + "  - name: pg3\n    listen: 127.0.0.1:0\n    upstream: " + pgUp + "\n    protocol: postgres\n", "routes[2].emulation"},
		{"missing TLS file", base + pg2(pgUp, "0ms") + "    tls:\n      cert: " + filepath.Join(dir, "missing.crt") + "\n      key: " + filepath.Join(dir, "missing.key") + "\n", "routes[2].tls"},
		{"unknown pool", base + pg2(pgUp, "0ms") + "    pool: nosuchpool\n", "routes[2].pool"},
	} {
		before := st.ConfigView()
		_, err := reloadFile(t, st, path, broken.body)
		var ce *config.Error
		if !errors.As(err, new(*stack.ConfigError)) || !errors.As(err, &ce) {
			t.Fatalf("%s: reload = %v, want a *stack.ConfigError holding a *config.Error", broken.name, err)
		}
		if ce.File != path || ce.Key != broken.key {
			t.Errorf("%s: error names %s %s, want %s %s (%v)", broken.name, ce.File, ce.Key, path, broken.key, err)
		}
		after := st.ConfigView()
		if after.Revision != before.Revision || !after.LoadedAt.Equal(before.LoadedAt) || routeAddr(st, "pg3") != "" {
			t.Fatalf("%s: the refused configuration changed what runs: revision %d -> %d, pg3 at %q", broken.name, before.Revision, after.Revision, routeAddr(st, "pg3"))
		}
		if got := st.Manager().Runtime().Bind("pg2", pgc.User).Up.Delay; got != 0 {
			t.Fatalf("%s: pg2's delay is %v after a refused reload, want 0", broken.name, got)
		}
	}
	oldPG2.progressed(t, oldPG2.counts())
	progress()

	// 2. pg2 changes: another address of the same server and a delay.
	// Its open sessions keep working, on the upstream they opened with;
	// new sessions use the new upstream; the delay reaches every session
	// of the route through its binding.
	ch, err = reloadFile(t, st, path, base+pg2(pgUpAlias, "1ms"))
	if err != nil {
		t.Fatalf("reload changing pg2: %v", err)
	}
	if !slices.Equal(ch.Changed, []string{"pg2"}) || len(ch.Relisten) != 0 || len(ch.Added)+len(ch.Removed) != 0 {
		t.Fatalf("reload changing pg2: changes %+v", ch)
	}
	if got := routeAddr(st, "pg2"); got != pg2Addr {
		t.Fatalf("pg2 moved from %s to %s without a listen change", pg2Addr, got)
	}
	if got := st.Manager().Runtime().Bind("pg2", pgc.User).Up.Delay; got != time.Millisecond {
		t.Fatalf("pg2's binding has delay %v after the reload, want 1ms", got)
	}
	oldPG2.progressed(t, oldPG2.counts())
	newPG2 := startPG(t, ctx, "pg2 (new)", pgURL, pg2Addr, 5)
	newPG2.progressed(t, make([]int64, 5))
	ups := map[string]int{}
	for _, s := range st.Registry().Sessions() {
		if s.Info.Route == "pg2" {
			ups[s.Info.Upstream]++
		}
	}
	if ups[pgUp] != sessionsPerRoute || ups[pgUpAlias] != 5 {
		t.Fatalf("pg2 sessions by upstream: %v, want %d on %s (opened before) and 5 on %s (after)", ups, sessionsPerRoute, pgUp, pgUpAlias)
	}
	progress()

	// 3. pg2 is removed: it stops accepting at once; its sessions keep
	// working until the grace ends, then are closed.
	draining := append(slices.Clone(oldPG2.workers), newPG2.workers...)
	ch, err = reloadFile(t, st, path, base)
	if err != nil {
		t.Fatalf("reload removing pg2: %v", err)
	}
	if !slices.Equal(ch.Removed, []string{"pg2"}) || len(ch.Added)+len(ch.Changed) != 0 {
		t.Fatalf("reload removing pg2: changes %+v", ch)
	}
	if c, err := net.Dial("tcp", pg2Addr); err == nil {
		c.Close()
		t.Fatalf("a connection to the removed route's %s was accepted", pg2Addr)
	}
	dp := &pool{name: "pg2 (draining)", workers: draining}
	dp.progressed(t, dp.counts())
	testenv.Eventually(t, grace+30*time.Second, "the drained sessions to be closed", func() bool {
		for _, w := range draining {
			if w.failed() == nil {
				return false
			}
		}
		return true
	})
	testenv.Eventually(t, 10*time.Second, "pg2's binding to go", func() bool {
		_, ok := st.Manager().Runtime().Routes()["pg2"]
		return !ok
	})
	if v := st.ConfigView(); v.Revision != 3 || len(v.Routes) != 2 {
		t.Fatalf("after three reloads: revision %d, %d routes; want 3 and 2", v.Revision, len(v.Routes))
	}
	progress()

	stop()
	for _, p := range steady {
		for _, w := range p.workers {
			<-w.done
		}
		p.noErrors(t)
		if p.total() == 0 {
			t.Errorf("%s: no query answered", p.name)
		}
	}
}
