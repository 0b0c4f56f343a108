// Package clock is the only package in sluice that reads the wall clock or
// arms real timers.
//
// Everything else takes a Clock (blocking code) or a time.Time (pure logic),
// so the link scheduler, the limiters and the path emulation run in virtual
// time under test: a Fake clock moves only when the test advances it, and
// timers fire in deadline order, deterministically.
//
// Invariants:
//   - Real delegates to package time and is safe for concurrent use.
//   - Fake is safe for concurrent use. Its time never moves backwards and
//     moves only through Advance or Set. A timer whose deadline is at or
//     before the new time fires during that call, in deadline order (ties in
//     the order the timers were armed).
package clock
