package clock

import (
	"context"
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// Clock tells the time and arms timers.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// NewTimer returns a timer that sends the time on its channel once d
	// has passed. d <= 0 fires at once.
	NewTimer(d time.Duration) Timer
}

// Timer is a one-shot timer armed by a Clock.
type Timer interface {
	// C is the channel the time is sent on; it has a buffer of one.
	C() <-chan time.Time
	// Stop disarms the timer. It reports whether the timer was armed.
	Stop() bool
	// Reset re-arms the timer to fire d from now. It reports whether the
	// timer was armed. The caller drains C first if Stop returned false
	// and the value was not received.
	Reset(d time.Duration) bool
}

// Real is the wall clock. The zero value is ready to use.
type Real struct{}

// Now returns time.Now().
func (Real) Now() time.Time { return time.Now() }

// NewTimer arms a time.Timer.
func (Real) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time        { return r.t.C }
func (r realTimer) Stop() bool                 { return r.t.Stop() }
func (r realTimer) Reset(d time.Duration) bool { return r.t.Reset(d) }

// SleepUntil blocks until c's time reaches deadline or ctx is done, and
// returns ctx.Err() in the latter case. A deadline in the past returns at
// once with nil.
func SleepUntil(ctx context.Context, c Clock, deadline time.Time) error {
	d := deadline.Sub(c.Now())
	if d <= 0 {
		return ctx.Err()
	}
	t := c.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Sleep blocks for d on c, or until ctx is done.
func Sleep(ctx context.Context, c Clock, d time.Duration) error {
	return SleepUntil(ctx, c, c.Now().Add(d))
}

// Wall is implemented by clocks that can place a wall-clock reading taken
// outside the process (a kernel receive timestamp) on their own time line.
type Wall interface {
	// FromWall returns the clock's time when the wall clock read w, given
	// now, a reading of this clock.
	FromWall(w, now time.Time) time.Time
}

// FromWall returns now less w's age by the wall clock (now's wall reading
// against w's), so the result keeps now's monotonic reading and compares
// with Now. A step of the wall clock between w and now moves the result
// by the step. It reads no clock itself.
func (Real) FromWall(w, now time.Time) time.Time {
	return now.Add(-now.Round(0).Sub(w.Round(0)))
}

// Precise is implemented by clocks that can sleep more precisely than
// their timers. Go's timers can wake a millisecond late on an idle Linux
// host, because the runtime's network poller sleeps in whole
// milliseconds; a thread sleeping in the kernel wakes within tens of
// microseconds.
type Precise interface {
	// SleepPrecise blocks the calling goroutine, and the thread running
	// it, for d. It cannot be interrupted, so callers keep d short.
	SleepPrecise(d time.Duration)
}

// SleepPrecise sleeps in the kernel (nanosleep) for d, resuming after
// signals. The thread's timer slack is lowered to 1 µs first, so the
// kernel does not round the wake-up up by its default 50 µs.
func (Real) SleepPrecise(d time.Duration) {
	if d <= 0 {
		return
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	unix.Prctl(unix.PR_SET_TIMERSLACK, 1000, 0, 0, 0)
	ts := unix.NsecToTimespec(int64(d))
	for {
		var rem unix.Timespec
		err := unix.Nanosleep(&ts, &rem)
		if err != unix.EINTR {
			return
		}
		ts = rem
	}
}

// SocketDeadline returns the deadline d from now for a socket's
// SetDeadline, SetReadDeadline or SetWriteDeadline. A socket's deadline
// is a time on the runtime poller's wall clock, never on an injected
// Clock: under Fake, Now is an arbitrary point in virtual time, and as a
// deadline it would lie anywhere from long past to far future. So a
// socket deadline is always taken here, whatever Clock the caller holds.
func SocketDeadline(d time.Duration) time.Time { return time.Now().Add(d) }
