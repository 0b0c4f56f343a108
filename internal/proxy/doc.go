// Package proxy owns sluice's listeners, sessions and pumps. A session
// uses the other packages through small seams: a protocol front end
// (internal/wire/...), the session registry, the Policy that binds it
// (the workload manager, *wlm.Manager), the shared links and the path
// emulation. Package stack assembles them; proxy imports none of the
// consoles.
//
// A route listens on one address and forwards to one upstream. Each
// accepted connection becomes a session: the route's front end runs the
// protocol's opening exchange (or none, for tcp routes), then two pumps
// move the bytes, one goroutine per direction.
//
// The pump is the hot path. Each iteration reads one chunk (never more
// than the flow's window), shows it to the direction's observer, asks the
// link when it may go, and writes it. On the common path (no emulation,
// an uncontended unlimited link) that is a read, a few atomic operations
// and a write: no channel hop, no allocation per chunk, and the buffer is
// reused. On plain sockets the read and the write are raw system calls
// (internal/rawconn), which under small requests and responses saves a
// large share of sluice's own CPU; TLS and wrapped connections keep their
// own Read and Write.
// Emulation and scheduling cost only where they are switched on:
// a flow whose binding carries a delay or whose link has a capacity hands
// its chunks to a delay line with its own writer goroutine, so the pump
// keeps reading while earlier bytes wait for their release time. A
// chunk's delay counts from when the kernel received it (SO_TIMESTAMPNS,
// turned on for the socket when its delay line starts), not from when the
// pump woke up to read it: that wake-up, after an idle wait, would add
// its own latency to every delayed request and response.
//
// Invariants:
//   - Bytes are never dropped, duplicated or reordered: a flow has at most
//     one chunk between read and hand-off, and the delay line releases in
//     order. Backpressure, not buffering: a flow that may not send stops
//     reading its socket.
//   - End of stream is propagated as a half-close (CloseWrite) once every
//     earlier byte has been written.
//   - A session ends when both directions have ended or either fails; the
//     session's sockets are then closed, once.
//   - A panic ends only its own session. The pumps (and the observers and
//     rewriters they call), the opening exchange and the delay lines'
//     writers recover their panics as errors (internal/panics); the relay
//     logs each at ERROR with its stack, counts it per route
//     (Server.SessionPanics), stops both pumps, sends the client the
//     protocol's error (wire.Conn.InternalError: PostgreSQL FATAL XX000,
//     MySQL ERR 1105) and closes both sockets. The client reads that error
//     whole unless the panic came in the middle of a server message the
//     down pump had begun to forward.
//   - Session.Terminate (the admin console's pg_terminate_backend) ends a
//     session the same way: the server side closes, both pumps stop, the
//     client reads wire.Conn.Terminated (PostgreSQL FATAL 57P01, MySQL ERR
//     1927) and its socket closes. Session.UnsentBytes reads the client
//     socket's TCP_INFO notsent.
//   - Socket deadlines are wall-clock times (clock.SocketDeadline), never
//     the injected clock's.
//   - Socket options: TCP_NODELAY on both sides; TCP_NOTSENT_LOWAT on the
//     client-facing socket so unsent data waits in sluice, where it can be
//     scheduled, rather than in the kernel.
package proxy
