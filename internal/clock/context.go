package clock

import (
	"context"
	"time"
)

// WithTimeout returns a context that is cancelled with cause once d has
// passed on c, or when the returned function is called (cause
// context.Canceled). It is context.WithTimeout on a Clock: under a Fake
// clock the context ends when the test advances it past d. d <= 0 ends
// the context at once. Until the context ends a goroutine waits on the
// timer; the returned function ends both and is safe to call more than
// once.
func WithTimeout(ctx context.Context, c Clock, d time.Duration, cause error) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(ctx)
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
