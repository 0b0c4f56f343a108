// Package idlepark holds sockets whose readers have given up their
// goroutines while the sockets are idle, and starts each reader again
// when its socket has something to read.
//
// A Set is one epoll instance (level-triggered, one-shot registrations
// for input, the peer's half-close, hang-up and error) and, while any
// socket is parked, one goroutine waiting in epoll_wait. Park registers a
// socket's descriptor with a resume function; when the socket becomes
// readable the Set removes the registration and calls resume on a new
// goroutine. Unpark takes a registration back before it fires.
//
// Invariants:
//   - resume runs at most once per Park, on a goroutine of its own, after
//     the registration is gone; after Unpark returns true it never runs.
//   - The descriptor is registered and removed inside the socket's
//     syscall.RawConn.Control, while the runtime holds it, and the owner
//     of a parked socket calls Unpark before closing it: the number cannot
//     be reused under a registration.
//   - Epoll carries a ticket, never a pointer; a ticket is never reused
//     within a Set.
//   - The waiting goroutine and its epoll descriptor exist only while
//     something is parked (they end within a second of the last Unpark or
//     resume), so an idle Set holds neither.
//
// Lock order: the caller's own locks, then Set.mu. Nothing is called back
// under Set.mu.
package idlepark
