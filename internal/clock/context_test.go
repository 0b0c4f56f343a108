package clock

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"
)

// TestWithTimeout: the context ends with the cause when the fake clock
// passes the timeout, not before; cancelling first ends it with
// context.Canceled and disarms the timer.
func TestWithTimeout(t *testing.T) {
	cause := errors.New("too slow")
	f := NewFake(time.Unix(0, 0))
	ctx, cancel := WithTimeout(context.Background(), f, time.Second, cause)
	defer cancel()
	f.Advance(999 * time.Millisecond)
	if ctx.Err() != nil {
		t.Fatalf("ended early: %v", context.Cause(ctx))
	}
	f.Advance(time.Millisecond)
	<-ctx.Done()
	if got := context.Cause(ctx); got != cause {
		t.Fatalf("cause %v, want %v", got, cause)
	}

	ctx, cancel = WithTimeout(context.Background(), f, time.Hour, cause)
	f.BlockUntil(1)
	cancel()
	cancel()
	<-ctx.Done()
	if got := context.Cause(ctx); got != context.Canceled {
		t.Fatalf("cause %v, want context.Canceled", got)
	}
	deadline := Real{}.Now().Add(10 * time.Second)
	for f.Pending() != 0 { // the waiting goroutine stops the timer
		if (Real{}).Now().After(deadline) {
			t.Fatal("timer still armed after cancel")
		}
		Sleep(context.Background(), Real{}, time.Millisecond)
	}
}

// TestWithTimeoutReal: under Real the context ends with the cause once d
// has passed, and contexts still waiting hold no goroutine each.
func TestWithTimeoutReal(t *testing.T) {
	cause := errors.New("too slow")
	ctx, cancel := WithTimeout(context.Background(), Real{}, time.Millisecond, cause)
	defer cancel()
	<-ctx.Done()
	if got := context.Cause(ctx); got != cause {
		t.Fatalf("cause %v, want %v", got, cause)
	}

	const n = 200
	before := runtime.NumGoroutine()
	cancels := make([]context.CancelFunc, n)
	for i := range cancels {
		var ctx context.Context
		ctx, cancels[i] = WithTimeout(context.Background(), Real{}, time.Hour, cause)
		if ctx.Err() != nil {
			t.Fatalf("context %d ended at once: %v", i, context.Cause(ctx))
		}
	}
	if grew := runtime.NumGoroutine() - before; grew >= n/2 {
		t.Errorf("%d waiting contexts added %d goroutines", n, grew)
	}
	for _, c := range cancels {
		c()
		c()
	}
}
