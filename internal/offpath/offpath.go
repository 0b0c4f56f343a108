package offpath

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// ErrBusy is the error of Do when MaxWaiting pieces of work wait already.
var ErrBusy = errors.New("too many queries waiting for the console's engine")

// Options configure a Runner. The zero Options are the defaults.
type Options struct {
	// Concurrency is how many pieces of work run at once; 0 means 1.
	Concurrency int
	// MaxWaiting is how many may wait for a turn; 0 means 64, and a
	// negative value means none may wait.
	MaxWaiting int
	// Nice is the scheduling priority (nice value, 0 to 19) of the thread
	// the work runs on where the kernel refuses SCHED_IDLE; 0 means 19,
	// and a negative value leaves the thread's policy and priority as
	// they are.
	Nice int
}

// Runner runs work off the data path; see the package documentation.
type Runner struct {
	sem        chan struct{} // a token per running piece; immutable channel
	maxWaiting int64         // immutable
	nice       int           // immutable; < 0: leave the priority alone
	waiting    atomic.Int64  // pieces waiting for a token
}

// procsMu serialises this package's changes of GOMAXPROCS, which belongs
// to the process, not to a Runner: each running piece of every Runner
// adds one P to the value then in force and takes it back when it ends,
// so Runners in one process (a fleet's instances in one test, the lab)
// compose.
var procsMu sync.Mutex

// addProcs changes GOMAXPROCS by n.
func addProcs(n int) {
	procsMu.Lock()
	defer procsMu.Unlock()
	runtime.GOMAXPROCS(runtime.GOMAXPROCS(0) + n)
}

// New returns a Runner with o's bounds.
func New(o Options) *Runner {
	if o.Concurrency <= 0 {
		o.Concurrency = 1
	}
	switch {
	case o.MaxWaiting == 0:
		o.MaxWaiting = 64
	case o.MaxWaiting < 0:
		o.MaxWaiting = 0
	}
	if o.Nice == 0 {
		o.Nice = 19
	}
	return &Runner{sem: make(chan struct{}, o.Concurrency), maxWaiting: int64(o.MaxWaiting), nice: min(o.Nice, 19)}
}

// Stats is what a Runner is doing now.
type Stats struct {
	Running, Waiting int
}

// Stats returns how many pieces run and wait now.
func (r *Runner) Stats() Stats {
	return Stats{Running: len(r.sem), Waiting: int(r.waiting.Load())}
}

// Do runs fn with ctx once a turn is free and returns its error. It
// returns ErrBusy at once when MaxWaiting pieces wait already, and
// ctx's error (wrapped) when ctx ends before a turn is free; fn is then
// not run. fn runs on a thread of its own; Do returns when fn returns
// (fn must end on its own when ctx ends). A panic in fn is returned as
// an error.
func (r *Runner) Do(ctx context.Context, fn func(context.Context) error) error {
	select {
	case r.sem <- struct{}{}:
	default:
		if r.waiting.Add(1) > r.maxWaiting {
			r.waiting.Add(-1)
			return ErrBusy
		}
		select {
		case r.sem <- struct{}{}:
			r.waiting.Add(-1)
		case <-ctx.Done():
			r.waiting.Add(-1)
			return fmt.Errorf("waiting for the console's engine: %w", context.Cause(ctx))
		}
	}
	defer func() { <-r.sem }()
	addProcs(1)
	defer addProcs(-1)
	done := make(chan error, 1)
	go func() {
		// Never unlocked: the thread, its priority lowered, ends with
		// this goroutine instead of serving others.
		runtime.LockOSThread()
		if r.nice >= 0 {
			lowerThread(r.nice)
		}
		defer func() {
			if p := recover(); p != nil {
				done <- fmt.Errorf("console engine panic: %v", p)
			}
		}()
		done <- fn(ctx)
	}()
	return <-done
}

// lowerThread makes the calling thread yield to every other: the
// SCHED_IDLE policy (it runs only on a CPU nothing else wants), else,
// where the kernel refuses it, nice. Best effort: without either the
// work runs at the thread's own priority, and the extra P still keeps
// the relays' Ps free.
func lowerThread(nice int) {
	tid := unix.Gettid()
	if unix.SchedSetAttr(tid, &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_IDLE}, 0) == nil {
		return
	}
	_ = unix.Setpriority(unix.PRIO_PROCESS, tid, nice)
}
