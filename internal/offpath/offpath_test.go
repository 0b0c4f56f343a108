package offpath

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sluicelab/sluice/internal/testenv"
)

// TestBounds: at most Concurrency pieces run at once, at most MaxWaiting
// wait, the rest fail at once with ErrBusy, and a piece whose ctx ends
// while it waits never runs.
func TestBounds(t *testing.T) {
	r := New(Options{Concurrency: 1, MaxWaiting: 3})
	release := make(chan struct{})
	var running, most, ran atomic.Int64
	work := func(context.Context) error {
		n := running.Add(1)
		for {
			m := most.Load()
			if n <= m || most.CompareAndSwap(m, n) {
				break
			}
		}
		<-release
		running.Add(-1)
		ran.Add(1)
		return nil
	}
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 { // one runs, three wait
		wg.Go(func() { errs <- r.Do(context.Background(), work) })
	}
	testenv.Eventually(t, 5*time.Second, "one running and three waiting", func() bool {
		return r.Stats() == Stats{Running: 1, Waiting: 3}
	})
	if err := r.Do(context.Background(), work); !errors.Is(err, ErrBusy) {
		t.Fatalf("a fifth piece: %v, want ErrBusy", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	// Full queue: the cancelled piece is refused as busy; with room it
	// would wait and end with ctx's error. Either way it never runs.
	if err := r.Do(ctx, work); err == nil {
		t.Fatal("a piece with an ended ctx ran")
	}
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("a queued piece: %v", err)
		}
	}
	if most.Load() != 1 || ran.Load() != 4 {
		t.Fatalf("%d ran at most at once, %d in all; want 1 and 4", most.Load(), ran.Load())
	}
	if s := r.Stats(); s != (Stats{}) {
		t.Fatalf("stats after the work: %+v", s)
	}
}

// TestWaitEndsWithCtx: a piece waiting for a turn returns ctx's cause
// when ctx ends, and does not run.
func TestWaitEndsWithCtx(t *testing.T) {
	r := New(Options{})
	release := make(chan struct{})
	first := make(chan error, 1)
	go func() { first <- r.Do(context.Background(), func(context.Context) error { <-release; return nil }) }()
	defer func() { close(release); <-first }()
	testenv.Eventually(t, 5*time.Second, "a running piece", func() bool { return r.Stats().Running == 1 })
	cause := errors.New("console query timed out")
	ctx, cancel := context.WithCancelCause(context.Background())
	done := make(chan error, 1)
	ran := false
	go func() { done <- r.Do(ctx, func(context.Context) error { ran = true; return nil }) }()
	testenv.Eventually(t, 5*time.Second, "a waiting piece", func() bool { return r.Stats().Waiting == 1 })
	cancel(cause)
	if err := <-done; !errors.Is(err, cause) || ran {
		t.Fatalf("Do = %v (ran %v), want the cause and no run", err, ran)
	}
}

// TestOwnPAndThread: the work runs with one more P than the relays have,
// on a thread that yields to every other (SCHED_IDLE, or nice), and both
// are back as they were afterwards; a panic is an error.
func TestOwnPAndThread(t *testing.T) {
	base := runtime.GOMAXPROCS(0)
	r := New(Options{})
	var procs int
	var attr *unix.SchedAttr
	var prio int
	err := r.Do(context.Background(), func(context.Context) error {
		procs = runtime.GOMAXPROCS(0)
		tid := unix.Gettid()
		var err error
		if attr, err = unix.SchedGetAttr(tid, 0); err != nil {
			return err
		}
		prio, err = unix.Getpriority(unix.PRIO_PROCESS, tid)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if procs != base+1 || runtime.GOMAXPROCS(0) != base {
		t.Fatalf("GOMAXPROCS %d during the work, %d after; want %d and %d", procs, runtime.GOMAXPROCS(0), base+1, base)
	}
	// Getpriority returns 20 - nice.
	if attr.Policy != unix.SCHED_IDLE && 20-prio < 10 {
		t.Fatalf("the work's thread has policy %d and nice %d: it competes with the relays", attr.Policy, 20-prio)
	}
	if err := r.Do(context.Background(), func(context.Context) error { panic("boom") }); err == nil {
		t.Fatal("a panic was not an error")
	}
	if runtime.GOMAXPROCS(0) != base || r.Stats() != (Stats{}) {
		t.Fatalf("after a panic: GOMAXPROCS %d, stats %+v", runtime.GOMAXPROCS(0), r.Stats())
	}
}

// TestRunnersCompose: two Runners whose work overlaps, ending in either
// order, leave GOMAXPROCS as it was.
func TestRunnersCompose(t *testing.T) {
	base := runtime.GOMAXPROCS(0)
	a, b := New(Options{}), New(Options{})
	releaseA, releaseB := make(chan struct{}), make(chan struct{})
	doneA, doneB := make(chan error, 1), make(chan error, 1)
	go func() { doneA <- a.Do(context.Background(), func(context.Context) error { <-releaseA; return nil }) }()
	testenv.Eventually(t, 5*time.Second, "a running", func() bool { return a.Stats().Running == 1 })
	go func() { doneB <- b.Do(context.Background(), func(context.Context) error { <-releaseB; return nil }) }()
	testenv.Eventually(t, 5*time.Second, "both running with a P each", func() bool {
		return b.Stats().Running == 1 && runtime.GOMAXPROCS(0) == base+2
	})
	close(releaseA) // the first to start ends first
	<-doneA
	if got := runtime.GOMAXPROCS(0); got != base+1 {
		t.Fatalf("GOMAXPROCS %d with b still running, want %d", got, base+1)
	}
	close(releaseB)
	<-doneB
	if got := runtime.GOMAXPROCS(0); got != base {
		t.Fatalf("GOMAXPROCS %d after both, want %d", got, base)
	}
}
