// Package evloop holds the two pieces an event loop on raw descriptors is
// made of: sockets taken out of the Go runtime's network poller (Socket),
// and an epoll set whose wait is a raw system call (Poller). It knows
// nothing of sessions; internal/proxy runs its loop on them.
//
// Why out of the runtime: a socket the runtime created stays registered
// in the runtime's own epoll set, and every byte that reaches it also
// wakes the runtime's idle poller thread, for nothing, when another loop
// serves the socket. Detach gives the loop a duplicate descriptor and
// closes the runtime's (which takes it out of the runtime's set); Attach
// turns the descriptor back into a net.Conn for code that blocks.
//
// How it waits: a poll that does not wait, as a raw system call, then,
// only when nothing is ready, the goroutine parks in the runtime's own
// poller on the epoll descriptor (readable while the set holds ready
// events), as a goroutine reading a socket does. Under load the first
// finds events and costs no scheduler work; an idle loop is a parked
// goroutine that holds no processor and no thread. Measured side by side
// under pgbench -S and sysbench oltp_point_select, parking cost the same
// or less per transaction than a blocking epoll_wait through the
// runtime's system-call path, which leaves a thread asleep in the kernel
// and has the runtime's monitor hand its processor to another thread
// after 20 us. (A wait that is always raw keeps its processor while it
// sleeps: it measured no cheaper, and it starves the rest of the process
// unless GOMAXPROCS is raised for each loop.)
//
// Invariants:
//   - A Socket's descriptor is closed once, by Close or Attach, under its
//     mutex; Control runs under the same mutex, so a number is never used
//     after it was closed and reused (SHOW SESSIONS reading TCP_INFO while
//     the loop closes the socket).
//   - Read, Write and Shutdown are raw system calls that never block and
//     allocate nothing; only the Socket's owner (one goroutine at a time)
//     calls them, and never after Close or Attach.
//   - Every system call of this package that cannot wait is raw: the
//     above, Close (the sockets have no SO_LINGER timeout, so a close
//     never waits), the duplicate Detach makes, Wake, Drain and the epoll
//     calls. A call through the runtime's blocking-system-call path wakes
//     the runtime's monitor thread when the process was idle, and one the
//     kernel preempts (a write that wakes its reader on the same CPU) has
//     its processor handed to another thread; on a loop that does a few
//     such calls per message, that cost more than the calls.
//   - Writes use MSG_NOSIGNAL: a peer gone is EPIPE, not SIGPIPE.
//   - Poller.Wake is safe from any goroutine; everything else on a Poller
//     is its owner's. Wait allocates nothing.
//
// Lock order: Socket.mu is a leaf.
package evloop
