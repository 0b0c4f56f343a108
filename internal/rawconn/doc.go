// Package rawconn wraps TCP and Unix sockets so that reads and writes
// that need not wait are raw system calls.
//
// Through the standard net.Conn every read and write enters the runtime's
// blocking-system-call path. For strict ping-pong traffic (a benchmark
// client waiting for each answer, a proxy relaying small requests and
// responses) the processors are idle between messages, and then almost
// every such call also wakes the runtime's monitor thread: a futex wake
// and a context switch that cost more than the read itself. A socket the
// runtime created is non-blocking, so a read or write on it returns at
// once and can be a raw system call. Waiting stays with the network
// poller (syscall.RawConn): when a call would block, the goroutine parks
// exactly as in net.Conn, so deadlines, Close from another goroutine and
// half-close behave the same. The calls are made inside the poller's
// callbacks, while the runtime holds the descriptor, so a concurrent
// Close cannot let the number be reused under a call.
//
// A read that returns less than its buffer has emptied the receive queue,
// yet the next read cannot be skipped in favour of waiting for the
// poller: when the peer's FIN came with the last bytes, that read consumed
// it, the poller will not report it again, and only another read returns
// the end of the stream.
//
// On request (StampReads) a Conn reads with recvmsg and keeps the
// kernel's receive time of what each Read returned (SO_TIMESTAMPNS), for
// a caller that must know when bytes reached the host rather than when it
// got to them. parseStamp decodes the control messages and never panics.
//
// A Conn is also what code that needs the socket reaches through: NetConn
// returns it, CloseWrite half-closes it, and
// Unwrap undoes Wrap. Socket options a session sets (SetsockoptInt) and
// reads (TCPInfo) are raw system calls for the same reason as reads.
//
// TCPSocket goes one step further, for a process that is idle between
// connections (pgbench -C): Listener.Accept and DialTCP make, configure
// and connect TCP sockets with raw system calls, and register them in the
// runtime's poller as *os.File, which for a non-blocking descriptor costs
// no blocking-path call either. Through the net package the first of the
// six or more such calls of each connection's set-up woke the monitor
// thread, which then naps in 20 us steps until the process is idle
// again. Measured under pgbench -S -C: 3.5 fewer context switches and
// about 16 % less CPU per connection. A name to resolve and Unix sockets
// still go through the net package.
//
// Invariants: every byte passed to Write is written, in order, or Write
// returns an error saying how many were; Read returns at least one byte,
// io.EOF at the end of the stream, or an error; nothing is allocated per
// call.
package rawconn
