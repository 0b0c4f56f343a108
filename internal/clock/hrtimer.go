package clock

import (
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// HighRes is implemented by clocks that can arm timers firing with the
// kernel's timer precision (microseconds) rather than Go's, whose timers
// can fire a millisecond late on an idle host because the runtime's
// network poller sleeps in whole milliseconds.
type HighRes interface {
	// NewHighResTimer returns a timer like NewTimer's, and a function
	// releasing what it holds; call it once the timer is no longer used.
	// A high-resolution timer may deliver a tick that was in flight when
	// Stop or Reset was called: its user must treat a fire as "look at
	// the clock", not as proof that its deadline has come.
	NewHighResTimer(d time.Duration) (Timer, func())
}

// NewHighResTimer arms a timerfd (CLOCK_MONOTONIC) in the runtime's network
// poller: the goroutine waiting on C is woken when the kernel's timer
// expires, without a thread held asleep. It costs a descriptor and a
// goroutine until release is called. If no timerfd can be made it falls
// back to a Go timer.
func (r Real) NewHighResTimer(d time.Duration) (Timer, func()) {
	fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		return r.NewTimer(d), func() {}
	}
	t := &fdTimer{fd: fd, f: os.NewFile(uintptr(fd), "timerfd"), c: make(chan time.Time, 1)}
	go t.wait()
	t.Reset(d)
	var once sync.Once
	return t, func() { once.Do(func() { t.f.Close() }) }
}

// fdTimer is a Timer on a timerfd. The goroutine in wait turns each
// expiry into a send on c.
type fdTimer struct {
	fd int
	f  *os.File
	c  chan time.Time
}

func (t *fdTimer) wait() {
	var buf [8]byte
	for {
		if _, err := t.f.Read(buf[:]); err != nil {
			return // released
		}
		select {
		case t.c <- time.Now():
		default:
		}
	}
}

func (t *fdTimer) C() <-chan time.Time { return t.c }

// Stop disarms the timer and reports whether it was armed.
func (t *fdTimer) Stop() bool {
	var old unix.ItimerSpec
	if err := unix.TimerfdSettime(t.fd, 0, &unix.ItimerSpec{}, &old); err != nil {
		return false
	}
	return old.Value.Sec != 0 || old.Value.Nsec != 0
}

// Reset arms the timer to fire d from now (at once for d <= 0) and
// reports whether it was armed.
func (t *fdTimer) Reset(d time.Duration) bool {
	if d <= 0 {
		d = 1 // a zero it_value would disarm
	}
	var old unix.ItimerSpec
	err := unix.TimerfdSettime(t.fd, 0, &unix.ItimerSpec{Value: unix.NsecToTimespec(int64(d))}, &old)
	if err != nil {
		return false
	}
	return old.Value.Sec != 0 || old.Value.Nsec != 0
}
