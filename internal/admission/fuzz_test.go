package admission

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sluicelab/sluice/internal/link"
)

// FuzzController runs a sequence of operations read from the input
// (acquire, release, cancel, demote, configure; two bytes each) and
// checks the controller's invariants after every one: its counters match
// the slots held and the waiters queued, no queued waiter fits, a pool
// over its limit got there only by a lowered limit, and once everything
// is released and cancelled nothing is left.
func FuzzController(f *testing.F) {
	f.Add([]byte{4, 0x15, 0, 0, 0, 0, 0, 3, 1, 0, 0, 6, 3, 1, 1, 0, 2, 0})
	f.Add([]byte{4, 0x05, 0, 3, 0, 4, 0, 9, 0, 1, 4, 0x3f, 1, 0, 1, 0})
	f.Fuzz(runFuzzOps)
}

func runFuzzOps(t *testing.T, ops []byte) {
	{
		if len(ops) > 400 {
			ops = ops[:400]
		}
		c := New(Options{})
		type holder struct {
			s           *Slot
			pool, group string
		}
		var (
			holders []holder
			waiters []*Waiter
			returns []chan result
			lowered = map[string]bool{} // a limit went down while slots were held
		)
		collect := func() {
			c.mu.Lock()
			keep := waiters[:0]
			var got []holder
			for _, w := range waiters {
				switch w.state {
				case queued:
					keep = append(keep, w)
				case admitted:
					got = append(got, holder{w.slot, w.req.Pool, w.req.Group})
				}
			}
			waiters = keep
			c.mu.Unlock()
			holders = append(holders, got...)
		}
		check := func(step int) {
			c.mu.Lock()
			defer c.mu.Unlock()
			running, groupRunning, waiting := map[string]int{}, map[string]int{}, map[string]int{}
			for _, h := range holders {
				running[h.pool]++
				if h.group != "" {
					groupRunning[h.group]++
				}
			}
			for _, w := range waiters {
				waiting[w.req.Pool]++
				pc, gc := c.pools[w.req.Pool], c.groups[w.req.Group]
				if w.req.Group == "" {
					gc = nil
				}
				if pc == nil || (!pc.full() && (gc == nil || !gc.full())) {
					t.Fatalf("step %d: queued waiter of %q/%q fits", step, w.req.Pool, w.req.Group)
				}
			}
			for name, pc := range c.pools {
				if pc.running != running[name] || pc.waiting != waiting[name] {
					t.Fatalf("step %d: pool %q counts %d running %d waiting, want %d %d", step, name, pc.running, pc.waiting, running[name], waiting[name])
				}
				if pc.limit >= 1 && pc.running > pc.limit && !lowered["p:"+name] {
					t.Fatalf("step %d: pool %q runs %d over its limit %d", step, name, pc.running, pc.limit)
				}
			}
			for name, n := range running {
				if n > 0 && c.pools[name] == nil {
					t.Fatalf("step %d: pool %q holds %d slots and has no counter", step, name, n)
				}
			}
			for name, gc := range c.groups {
				if gc.running != groupRunning[name] {
					t.Fatalf("step %d: group %q counts %d running, want %d", step, name, gc.running, groupRunning[name])
				}
				if gc.limit >= 1 && gc.running > gc.limit && !lowered["g:"+name] {
					t.Fatalf("step %d: group %q runs %d over its limit %d", step, name, gc.running, gc.limit)
				}
			}
		}
		for i := 0; i+1 < len(ops); i += 2 {
			arg := int(ops[i+1])
			switch ops[i] % 5 {
			case 0:
				req := Request{Pool: fmt.Sprintf("p%d", arg%3), Class: link.Class((arg / 6) % 3)}
				if (arg/3)%2 == 1 {
					req.Group = "l"
				}
				queued := make(chan *Waiter, 1)
				req.OnWait = func(w *Waiter) { queued <- w }
				res := make(chan result, 1)
				go func() {
					s, err := c.Acquire(context.Background(), req)
					res <- result{s, err}
				}()
				select {
				case w := <-queued:
					waiters = append(waiters, w)
					returns = append(returns, res)
				case r := <-res:
					if r.err != nil {
						t.Fatalf("Acquire: %v", r.err)
					}
					holders = append(holders, holder{r.slot, req.Pool, req.Group})
				case <-time.After(10 * time.Second):
					t.Fatal("Acquire neither waited nor returned")
				}
			case 1:
				if len(holders) > 0 {
					k := arg % len(holders)
					holders[k].s.Release()
					holders[k].s.Release()
					holders = append(holders[:k], holders[k+1:]...)
				}
			case 2:
				if len(waiters) > 0 {
					waiters[arg%len(waiters)].Cancel(nil)
				}
			case 3:
				if len(waiters) > 0 {
					waiters[arg%len(waiters)].Demote()
				}
			case 4:
				next := Limits{Pools: map[string]int{}, Groups: map[string]int{"l": arg % 3}}
				for p := range 3 {
					next.Pools[fmt.Sprintf("p%d", p)] = (arg >> (2 * p)) & 3
				}
				c.mu.Lock()
				for name, n := range next.Pools {
					if pc := c.pools[name]; pc != nil && n >= 1 && pc.running > n {
						lowered["p:"+name] = true
					}
				}
				if gc := c.groups["l"]; gc != nil && next.Groups["l"] >= 1 && gc.running > next.Groups["l"] {
					lowered["g:l"] = true
				}
				c.mu.Unlock()
				c.Configure(next)
			}
			collect()
			check(i / 2)
		}
		for _, w := range waiters {
			w.Cancel(nil)
		}
		collect()
		for _, h := range holders {
			h.s.Release()
		}
		for _, r := range returns {
			select {
			case <-r:
			case <-time.After(10 * time.Second):
				t.Fatal("an Acquire never returned")
			}
		}
		for name, st := range c.Pools() {
			if st.Running != 0 || st.Waiting != 0 {
				t.Errorf("pool %q after the end: %+v", name, st)
			}
		}
	}
}
