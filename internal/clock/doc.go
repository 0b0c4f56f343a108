// Package clock is the only package in sluice that reads the wall clock or
// arms real timers.
//
// Everything else takes a Clock (blocking code) or a time.Time (pure logic),
// so the link scheduler, the limiters and the path emulation run in virtual
// time under test: a Fake clock moves only when the test advances it, and
// timers fire in deadline order, deterministically.
//
// Go's timers can fire a millisecond late on an idle host (the runtime's
// network poller sleeps in whole milliseconds). Two optional interfaces
// give more where it matters: Precise, a kernel sleep that holds its
// thread (for one release at a time, as a delay line's), and HighRes,
// timers on a timerfd in the network poller that wake within microseconds
// without holding a thread (for a scheduler's timer, a delay line's
// release). Real has both; Fake has neither, its timers being exact, and
// a test that wants a code path behind one wraps it. A third, Wall,
// turns a kernel timestamp (wall-clock time) into the clock's time; a
// Fake has no such mapping, so code under a Fake clock ignores kernel
// timestamps. Monotonic does the same for a CLOCK_MONOTONIC reading (a
// BPF program's bpf_ktime_get_ns), and Replay is a Clock whose Now is
// set by its user, for an observer shown bytes after they passed.
//
// Invariants:
//   - Replay is for one goroutine at a time.
//   - Real delegates to package time (and to timerfd for HighRes) and is
//     safe for concurrent use.
//   - Fake is safe for concurrent use. Its time never moves backwards and
//     moves only through Advance or Set. A timer whose deadline is at or
//     before the new time fires during that call, in deadline order (ties in
//     the order the timers were armed).
package clock
