package stack_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicelab/sluice/internal/stack"
	"github.com/sluicelab/sluice/internal/testenv"
)

// The bounded-concurrency check's shape: boundSessions sessions of a
// pool with active_statements=boundLimit each run a statement of
// boundSleep in a loop.
const (
	boundSessions = 40
	boundLimit    = 4
	boundSleep    = 500 * time.Millisecond
)

// boundCheck is what checkAdmitBound needs of one protocol: the
// boundSessions sessions of the limited pool, each running one
// statement of boundSleep per call; one session of the unlimited pool,
// running SELECT 1; and the count of the limited statements the server
// shows running.
type boundCheck struct {
	limited []func(ctx context.Context) error
	other   func(ctx context.Context) error
	active  func() (int, error)
}

// checkAdmitBound runs the limited sessions in a loop for 10 s (3 s
// with -short), and the other one every 20 ms, sampling c.active every
// 50 ms: no sample may exceed the limit, some sample must see it
// reached, throughput must be above one slot's and at most one and a
// half of boundLimit/boundSleep, and the other pool's statements must
// never wait as long as two slots.
func checkAdmitBound(t *testing.T, c boundCheck) {
	t.Helper()
	run := 10 * time.Second
	if testing.Short() {
		run = 3 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), run)
	defer cancel()
	var done atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, len(c.limited)+1)
	for _, exec := range c.limited {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				if err := exec(context.Background()); err != nil {
					errs <- err
					return
				}
				if ctx.Err() == nil {
					done.Add(1)
				}
			}
		}()
	}
	// The other pool's session: its statements never wait for a slot.
	var otherMax, otherSum time.Duration
	var otherN int
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			t0 := time.Now()
			if err := c.other(context.Background()); err != nil {
				errs <- err
				return
			}
			d := time.Since(t0)
			otherSum += d
			otherN++
			otherMax = max(otherMax, d)
			time.Sleep(20 * time.Millisecond)
		}
	}()

	maxActive, samples := 0, 0
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	start := time.Now()
	for ctx.Err() == nil {
		<-tick.C
		n, err := c.active()
		if err != nil {
			t.Fatal(err)
		}
		samples++
		maxActive = max(maxActive, n)
		if n > boundLimit {
			t.Errorf("sample %d: %d statements running, limit %d", samples, n, boundLimit)
		}
	}
	elapsed := time.Since(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	rate := float64(done.Load()) / elapsed.Seconds()
	want := float64(boundLimit) / boundSleep.Seconds()
	t.Logf("%d sessions, active_statements=%d: %d statements in %v = %.2f/s (ideal %.1f/s, %+.1f%%); max running %d over %d samples",
		len(c.limited), boundLimit, done.Load(), elapsed.Round(time.Millisecond), rate, want, 100*(rate-want)/want, maxActive, samples)
	if otherN > 0 {
		t.Logf("other pool: %d statements, mean %v, max %v", otherN, (otherSum / time.Duration(otherN)).Round(time.Microsecond), otherMax.Round(time.Microsecond))
	}
	if maxActive == 0 {
		t.Fatal("no sample saw a statement running")
	}
	// Every slot was used (some sample saw the limit reached), and the
	// sessions made more than a single slot could: not timing, since
	// the shared test server's own pace varies with what else runs on
	// it (a SLEEP(0.5) took 2 s under another package's chaos test).
	if maxActive < boundLimit {
		t.Errorf("at most %d statements seen running, want the limit %d reached", maxActive, boundLimit)
	}
	if one := 1 / boundSleep.Seconds(); rate <= one || rate > want*1.5 {
		t.Errorf("throughput %.2f/s: want more than one slot's %.1f/s and not over %.1f/s", rate, one, want*1.5)
	}
	if otherMax > 2*boundSleep {
		t.Errorf("the other pool's statement waited %v, as long as a slot", otherMax)
	}
}

// cancelHeld runs exec, which is held for admission, waits until st
// shows it waiting, calls cancel and returns exec's error. It logs how
// long after the cancel the answer came and fails t (without stopping)
// when that is over a second.
func cancelHeld(t *testing.T, st *stack.Stack, what string, exec func() error, cancel func()) error {
	t.Helper()
	res := make(chan error, 1)
	var mu sync.Mutex
	var t0 time.Time
	go func() {
		err := exec()
		mu.Lock()
		d := time.Since(t0)
		mu.Unlock()
		t.Logf("%s: answered %v after the cancel", what, d.Round(time.Microsecond))
		if d > time.Second {
			t.Errorf("%s: answered %v after the cancel", what, d)
		}
		res <- err
	}()
	testenv.Eventually(t, 10*time.Second, "a held statement", func() bool { return heldCount(st) == 1 })
	mu.Lock()
	t0 = time.Now()
	mu.Unlock()
	cancel()
	return <-res
}

// cancelWaiting cancels, as the console does, every statement of st
// that waits for admission.
func cancelWaiting(t *testing.T, st *stack.Stack) {
	t.Helper()
	for _, s := range st.Registry().Active() {
		if s.Waiting() {
			if err := st.Registry().Cancel(context.Background(), s); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// deadlockCheck is what checkNoDeadlock needs of one protocol: two
// sessions a and b of a pool with one slot, and a table whose row 1 has
// v = 0.
type deadlockCheck struct {
	table string
	// txExec runs a statement in a's transaction, begun before the
	// check; commit commits it.
	txExec func(sql string) error
	commit func() error
	// bExec runs a statement of b, outside a transaction.
	bExec func(sql string) error
	// value reads v of row 1, directly at the server.
	value func() (int, error)
}

// checkNoDeadlock: a's transaction locks row 1, b's update of the row
// is held by sluice (not blocked at the server) while a's transaction
// goes on with three updates; b finishes only after a commits, and v is
// then 31.
func checkNoDeadlock(t *testing.T, st *stack.Stack, c deadlockCheck) {
	t.Helper()
	if err := c.txExec("SELECT v FROM " + c.table + " WHERE id = 1 FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	bDone := make(chan error, 1)
	go func() { bDone <- c.bExec("UPDATE " + c.table + " SET v = v + 1 WHERE id = 1") }()
	testenv.Eventually(t, 10*time.Second, "b held", func() bool { return heldCount(st) == 1 })
	for i := range 3 {
		if err := c.txExec(fmt.Sprintf("UPDATE %s SET v = v + 10 WHERE id = 1 /* %d */", c.table, i)); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case err := <-bDone:
		t.Fatalf("b finished before a committed: %v", err)
	default:
	}
	if err := c.commit(); err != nil {
		t.Fatal(err)
	}
	if err := <-bDone; err != nil {
		t.Fatal(err)
	}
	if v, err := c.value(); err != nil || v != 31 {
		t.Fatalf("v = %d, %v; want 31", v, err)
	}
}

// churnKinds is how many kinds of round a churn worker cycles through.
const churnKinds = 5

// churn runs workers goroutines until ctx ends. Worker w's i-th round
// calls round(w, kind) with kind (w+i) % churnKinds; a round that
// returns false ends its worker and is not counted. It returns how many
// rounds of each kind ran.
func churn(ctx context.Context, workers int, round func(w, kind int) bool) [churnKinds]int64 {
	var wg sync.WaitGroup
	var ops [churnKinds]atomic.Int64
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				kind := (w + i) % churnKinds
				if !round(w, kind) {
					return
				}
				ops[kind].Add(1)
			}
		}()
	}
	wg.Wait()
	var n [churnKinds]int64
	for k := range ops {
		n[k] = ops[k].Load()
	}
	return n
}
