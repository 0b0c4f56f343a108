package testenv

// This file holds the one way tests wait for a condition that real
// sockets, servers or goroutines outside a synctest bubble make true.

import (
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
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for !cond() {
		select {
		case <-deadline.C:
			if !cond() {
				t.Fatalf("timed out after %v waiting for %s", timeout, what)
			}
			return
		case <-tick.C:
		}
	}
}
