// Command evrelay measures what a TCP relay written in Go as an epoll event
// loop costs per transaction, for the overhead scripts' evrelay row beside
// sluice, PgBouncer and HAProxy. It does nothing a database proxy does
// besides moving bytes, so its CPU per transaction is the floor for a Go
// event-loop relay on the machine: what sluice's event loop could reach
// if it did no other work.
//
// It is built on sluice's own event-loop pieces (package evloop), so it
// measures the poller and sockets the product runs: the acceptor (a
// goroutine on the runtime's netpoller) accepts a client, dials the
// upstream, takes both sockets out of the runtime (evloop.Detach) and
// hands the pair to one of the event loops, round robin, through the
// loop's queue and its Poller's Wake. Each loop is a goroutine that owns
// a Poller, a 64 KiB read buffer shared by all its sockets, and the
// sockets' state; nothing else touches them. It waits as evloop.Poller
// waits: a poll that does not wait, then, when nothing is ready, parked
// in the runtime's poller. Per ready socket it reads until a short read
// (so no read returns EAGAIN in the common case) and writes each chunk
// to the peer at once. When the peer's send buffer is full the rest is
// kept in the peer's pending buffer, the socket is no longer read, and
// the loop waits for the peer to become writable. An end of stream shuts
// down the peer's write side once its pending bytes are written; the pair
// is closed when both directions have ended, or at once on an error.
//
// The variants compared, by flag:
//
//   - -loops N: N event loops (default 1).
//   - -lt (default) or -et: level-triggered registration, changed with
//     EPOLL_CTL_MOD whenever a socket stops or resumes reading or waits to
//     write, or edge-triggered, registered once for input and output with
//     the state kept in the loop (no epoll_ctl after registration).
//
// -cpuprofile writes a CPU profile when the process ends (SIGTERM or
// interrupt) or after -profile-seconds.
//
// It is a benchmark instrument, not a general relay: no limits, no
// timeouts, no logging per connection.
//
//	go -C measure run ./evrelay -listen 127.0.0.1:16507 -upstream 127.0.0.1:15432 -et
package main
