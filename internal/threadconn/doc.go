// Package threadconn provides a socket connection whose waits are
// blocking system calls made by the calling thread, as in a C client
// (libpq, libmysqlclient) with one thread per connection.
//
// A net.Conn parks its goroutine in the runtime's network poller when a
// read would block, and a poller thread wakes it when the answer comes.
// For a benchmark client that is the wrong model twice over: every
// answer crosses from the thread that saw it to the thread that runs the
// goroutine, and the kernel cannot see which client thread serves which
// server process, so it cannot place the two side by side. sysbench runs
// one thread per connection blocked in recv(2); a Go client that is to
// measure the same thing locks each worker goroutine to its thread
// (runtime.LockOSThread) and reads through a Conn from this package.
//
// A Conn owns a blocking descriptor held in an *os.File, which counts the
// calls in progress, so Close never frees the number under a call.
//
// Invariants and limits:
//   - Every byte passed to Write is written, in order, or Write returns an
//     error saying how many were; Read returns at least one byte, io.EOF
//     at the end of the stream, or an error.
//   - Close shuts the socket down first, so a Read or Write blocked in
//     another goroutine returns (net.ErrClosed). Close is safe twice.
//   - A deadline applies to the calls that start after it is set; a call
//     already blocked keeps the wait it started with, except that a
//     deadline set in the past interrupts a blocked Read at once. That
//     ends the connection's reads for good: later reads fail with
//     os.ErrDeadlineExceeded whatever deadline is set afterwards. The
//     drivers that use deadlines (pgconn's and the MySQL driver's
//     cancellation) close the connection after one fires.
//   - A goroutine that only ever blocks in system calls is never
//     rescheduled, and after 10 ms the runtime's monitor starts taking its
//     processor at every call and polling every 20 µs. A caller holding a
//     goroutine in such a loop yields (runtime.Gosched) now and then, for
//     example once per transaction.
package threadconn
