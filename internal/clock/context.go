package clock

import (
	"context"
	"time"
)

// WithTimeout returns a context that is cancelled with cause once d has
// passed on c, or when the returned function is called (cause
// context.Canceled). It is context.WithTimeout on a Clock: under a Fake
// clock the context ends when the test advances it past d. d <= 0 ends
// the context at once. Under Real the runtime's timer cancels it, with no
// goroutine until d has passed; under another clock a goroutine waits on
// the clock's timer until the context ends. The returned function stops
// the timer and ends the context, and is safe to call more than once.
func WithTimeout(ctx context.Context, c Clock, d time.Duration, cause error) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(ctx)
	if _, ok := c.(Real); ok {
		t := time.AfterFunc(d, func() { cancel(cause) })
		return ctx, func() {
			t.Stop()
			cancel(context.Canceled)
		}
	}
	t := c.NewTimer(d)
	go func() {
		select {
		case <-t.C():
			cancel(cause)
		case <-ctx.Done():
			t.Stop()
		}
	}()
	return ctx, func() { cancel(context.Canceled) }
}
