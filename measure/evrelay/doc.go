// Command evrelay measures what a TCP relay written in Go as an epoll event
// loop costs per transaction, for the overhead scripts' evrelay row beside
// sluice, PgBouncer and HAProxy. It does nothing a database proxy does
// besides moving bytes, so its CPU per transaction is the floor for a Go
// event-loop relay on the machine: what sluice could reach if its relay
// were rebuilt that way and did no other work.
//
// The acceptor (a goroutine on the runtime's netpoller) accepts a client,
// dials the upstream, takes both sockets out of the runtime (a duplicate
// descriptor, non-blocking, the runtime's copy closed) and hands the pair
// to one of the event loops, round robin, through the loop's queue and
// eventfd. Each loop is a goroutine locked to its OS thread that owns an
// epoll set, a 64 KiB read buffer shared by all its sockets, and the
// sockets' state; nothing else touches them. Per ready socket it reads
// until a short read (so no read returns EAGAIN in the common case) and
// writes each chunk to the peer at once. When the peer's send buffer is
// full the rest is kept in the peer's pending buffer, the socket is no
// longer read, and the loop waits for the peer to become writable. An end
// of stream shuts down the peer's write side once its pending bytes are
// written; the pair is closed when both directions have ended, or at once
// on an error. Reads and writes are raw system calls (they never block,
// and the loop's thread holds its P anyway); writes are sendto with
// MSG_NOSIGNAL, so a closed peer is an EPIPE, not a signal.
//
// The variants compared, by flag:
//
//   - -loops N: N event loops (default 1).
//   - -lt (default) or -et: level-triggered registration, changed with
//     EPOLL_CTL_MOD whenever a socket stops or resumes reading or waits to
//     write, or edge-triggered, registered once for input and output with
//     the state kept in the loop (no epoll_ctl after registration).
//   - the wait: by default unix.EpollWait, the runtime's blocking system
//     call path (entersyscall / exitsyscall: when the wait blocks longer
//     than sysmon's 20 us, its P is handed off and must be won back when it
//     returns). -spin N first polls up to N times with a zero timeout as a
//     raw system call, which costs no scheduler work when events are ready.
//     -raw makes the blocking wait raw as well: the thread keeps its P while
//     it sleeps in the kernel, and is woken every 10 ms at most by sysmon's
//     preemption signal (EINTR), which also lets a stop-the-world through.
//     With -raw, -loops should stay below GOMAXPROCS, or the acceptor waits
//     for a preemption to run.
//
// -cpuprofile writes a CPU profile when the process ends (SIGTERM or
// interrupt) or after -profile-seconds.
//
// It is a benchmark instrument, not a general relay: no limits, no
// timeouts, no logging per connection.
//
//	go run ./measure/evrelay -listen 127.0.0.1:16507 -upstream 127.0.0.1:15432 -et
package main
