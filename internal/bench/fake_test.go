package bench

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicelab/sluice/internal/clock"
)

// call is one statement a fakeConn executed.
type call struct {
	SQL  string // with '?' placeholders
	Args []Arg
	Text string // as rendered for a text query
}

// fakeConn records statements instead of executing them. Reads count as
// reads, BEGIN/COMMIT as other, DML as writes (or other when zeroRows
// says so). Each Exec advances clk by step when both are set.
type fakeConn struct {
	mu       sync.Mutex
	calls    []call       // guarded by mu
	prepared []*Statement // guarded by mu
	closed   bool         // guarded by mu

	clk      *clock.Fake
	step     time.Duration
	before   func(st *Statement)              // runs before each Exec advances clk
	fail     func(n int, st *Statement) error // error for the n-th Exec (0-based), if any
	zeroRows func(st *Statement) bool
	n        int
}

func (c *fakeConn) Prepare(ctx context.Context, stmts []*Statement) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, st := range stmts {
		if st.Prepare {
			c.prepared = append(c.prepared, st)
		}
	}
	return nil
}

func (c *fakeConn) Exec(ctx context.Context, st *Statement, args []Arg) (Outcome, error) {
	c.mu.Lock()
	n := c.n
	c.n++
	cp := make([]Arg, len(args))
	for i, a := range args {
		cp[i] = a
		if a.Str != nil {
			cp[i].Str = append([]byte{}, a.Str...)
		}
	}
	c.calls = append(c.calls, call{SQL: st.SQL, Args: cp, Text: string(render(nil, st.SQL, args))})
	c.mu.Unlock()
	if c.clk != nil && c.step > 0 {
		if c.before != nil {
			c.before(st)
		}
		c.clk.Advance(c.step)
	}
	if c.fail != nil {
		if err := c.fail(n, st); err != nil {
			return Outcome{RoundTrips: 1}, err
		}
	}
	out := Outcome{RoundTrips: 1, Counter: CountOther}
	switch {
	case st.Reads:
		out.Counter = CountRead
	case st.SQL == "BEGIN" || st.SQL == "COMMIT":
	case c.zeroRows != nil && c.zeroRows(st):
	default:
		out.Counter = CountWrite
	}
	return out, nil
}

func (c *fakeConn) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	return nil
}

// sqls returns the recorded statements, leaving out the table probes.
func (c *fakeConn) sqls() []string {
	var out []string
	for _, cl := range c.workCalls() {
		out = append(out, cl.SQL)
	}
	return out
}

func (c *fakeConn) workCalls() []call {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []call
	for _, cl := range c.calls {
		if !strings.HasPrefix(cl.SQL, "SELECT 1 FROM sbtest") {
			out = append(out, cl)
		}
	}
	return out
}

// fakeDialer hands out fakeConns made by mk.
type fakeDialer struct {
	mu    sync.Mutex
	conns []*fakeConn // guarded by mu; by worker
	mk    func(n int) *fakeConn
	err   error
}

func (d *fakeDialer) Dial(ctx context.Context, n int) (Conn, error) {
	if d.err != nil {
		return nil, d.err
	}
	c := &fakeConn{}
	if d.mk != nil {
		c = d.mk(n)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for len(d.conns) <= n {
		d.conns = append(d.conns, nil)
	}
	d.conns[n] = c
	return c, nil
}

func (d *fakeDialer) conn(n int) *fakeConn {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.conns[n]
}

// testOptions returns defaults with a fixed seed, no time limit and the
// given overrides applied through the command line parser.
func testOptions(workload string, args ...string) Options {
	o, _, _, err := ParseArgs(append([]string{"--rand-seed=7", "--time=0", "--events=1", workload, "run"}, args...))
	if err != nil {
		panic(fmt.Sprintf("testOptions: %v", err))
	}
	return o
}

// runFake runs workload with args against a fresh fakeDialer and fails t
// if the run fails.
func runFake(t *testing.T, workload string, args ...string) (Result, *fakeDialer) {
	t.Helper()
	o := testOptions(workload, args...)
	d := &fakeDialer{}
	res, err := run(context.Background(), &o, d, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	return res, d
}
