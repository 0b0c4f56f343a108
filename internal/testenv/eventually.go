package testenv

// This file holds the ways tests wait for a condition that real
// sockets, servers or goroutines outside a synctest bubble make true.

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
)

// pollEvery is how often Eventually checks its condition.
const pollEvery = time.Millisecond

// Eventually calls cond every millisecond of real time until it returns
// true, and fails t with what (the condition, as in "timed out waiting
// for <what>") if it has not within timeout. It asserts nothing about
// time: code that runs on an injected clock is tested in virtual time
// instead (clock.Fake, testing/synctest). cond runs on t's goroutine.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	if !Poll(timeout, cond) {
		t.Fatalf("timed out after %v waiting for %s", timeout, what)
	}
}

// Poll is Eventually for code that cannot fail a test (a worker
// goroutine, a helper that returns an error): it calls cond every
// millisecond of real time until it returns true or timeout passes, and
// reports whether cond held. cond runs on the caller's goroutine.
func Poll(timeout time.Duration, cond func() bool) bool {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for !cond() {
		select {
		case <-deadline.C:
			return cond()
		case <-tick.C:
		}
	}
	return true
}

// Receive returns the next value from ch, and fails t with what (as in
// "timed out waiting for <what>") if none comes within timeout of real
// time.
func Receive[T any](t testing.TB, ch <-chan T, timeout time.Duration, what string) T {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	select {
	case v := <-ch:
		return v
	case <-deadline.C:
		t.Fatalf("timed out after %v waiting for %s", timeout, what)
		var zero T
		return zero
	}
}

// WaitBlocked waits until n goroutines (at least) whose stacks hold
// frame (a function name as runtime.Stack prints it, e.g.
// "evloop.(*Poller).Wait") are blocked at once: parked in the runtime's
// poller, on a channel or lock, or in a system call (the state the stack
// dump shows is neither running nor runnable). It fails t after 10 s. A
// goroutine in a system call is reported as soon as it enters the call,
// possibly just before the kernel puts it to sleep.
func WaitBlocked(t testing.TB, frame string, n int) {
	t.Helper()
	buf := make([]byte, 1<<20)
	Eventually(t, 10*time.Second, fmt.Sprintf("%d goroutines blocked in %s", n, frame), func() bool {
		blocked := 0
		for g := range strings.SplitSeq(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
			header, _, _ := strings.Cut(g, "\n")
			_, state, _ := strings.Cut(header, "[")
			if strings.Contains(g, frame) && !strings.HasPrefix(state, "running") && !strings.HasPrefix(state, "runnable") {
				blocked++
			}
		}
		return blocked >= n
	})
}
