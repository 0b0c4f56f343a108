// Package proxy owns sluice's listeners, sessions and pumps. A session
// uses the other packages through small seams: a protocol front end
// (internal/wire/...), the session registry, the Policy that binds it
// (the workload manager's binding runtime, *wlm.Runtime), the shared links and the path
// emulation. Package stack assembles them; proxy imports none of the
// consoles.
//
// A route listens on one address and forwards to one upstream. Each
// accepted connection becomes a session: the route's front end runs the
// protocol's opening exchange (or none, for tcp routes), then the
// session's bytes move on an event loop (loop.go) or on two pumps, one
// goroutine per direction while the direction is active.
//
// The event loop is the common path. A session whose sockets are plain
// (TCP or Unix, no TLS, no wrapper), whose binding carries no emulation
// on a link that admits bytes without making them wait, and whose
// observers never block (the admission Rewriters block only in
// wire.Gate.Wait, which yields first) goes on one of the server's loops
// (Options.Loops, one by default). Its descriptors leave the Go runtime
// (evloop.Detach: a duplicate, the runtime's copy closed, so no byte
// wakes the runtime's poller for nothing) and the loop's runner, one
// goroutine waiting in epoll (internal/evloop), reads each ready socket
// until a short read and runs each chunk through the same pump code
// (observe, rewrite, link, write) on a read buffer its sessions share.
// A write the socket does not take whole keeps the rest as the side's
// pending bytes (from readPool) and the reading side stops being read
// until they are written (backpressure); an end of stream ends the peer's
// write side once its pending bytes are written. A session on the loop
// holds no goroutine and, between chunks, no buffer.
//
// A session leaves the loop for its pumps (loop.toPumps: the descriptors
// go back to the runtime, evloop.Socket.Attach, and each pump starts
// where the loop left it: its pending bytes first, then a chunk the loop
// could not send) when a chunk needs what only the pumps do (its binding
// gained emulation, its link makes bytes wait: pump.send's errToPumps),
// when a statement must wait for admission, when an administrator
// terminates it, when the server aborts it, and when it fails (a read or
// write error, a protocol error, a panic), so that the failure paths
// below are the pumps'. For an admission wait the runner itself leaves
// (loopSess.yield, called in Gate.Wait before it blocks): a new runner
// takes the loop over, with a read buffer of its own, and the goroutine
// that was the runner waits and carries on as the session's up pump. A
// session does not come back to the loop. Requests from other goroutines
// (an injected answer's wake, terminate, abort) reach the runner as
// commands (loop.post); one for a session no longer on the loop gets what
// the pumps would. A terminate waits until its command has run: once it
// returns, the session is off the kernel fast path and its pumps have
// stopped, so no later request of the client reaches the server. Never
// terminate from the runner: it would wait for itself. The runner ends
// when the loop holds no session and starts again with the next one. A
// chunk relayed on the loop allocates nothing
// (TestLoopRelaysWithoutAllocating).
//
// With Options.FastPath, the first loop also relays sessions in the
// kernel (kernel.go, package fastpath). A PostgreSQL or MySQL session is
// paired once, at its first idle point: the down pump has observed a
// chunk that ends the server's answer to every request, and neither side
// has pending bytes; the pair is made before that chunk is written, so
// the program sees every byte after it. It resumes once the chunk is
// written, if kernelOK: no emulation, a link that admits at once, no
// penalty, no admission limit (wire.Gate.MayHold), no down rewriter, no
// part in a distributed statement (session.Distributed). The program
// copies each chunk it relays (at most 4 KiB) into the journal; the
// runner drains the journal whenever it is readable and after each read
// of a paired socket, before the bytes read (what the kernel relayed
// before them is in the journal by then), and shows each chunk to the
// pump that would have read it (replay: observer, rewriter, link
// accounting), stamped with the
// kernel's receive time (wire.Replayer), so views, rules, round trips
// and counters are those of the user-space path. The kernel hands a
// chunk to its receiver before the runner has drained its copy, so
// Server.SyncRegistry (called by the consoles before they read) posts a
// drain to the runner and waits for it; a runner does not end while a
// drain waits, so once it has ended (loop.running false) it touches
// nothing of the loop's, and the journal is the next runner's, or
// loop.stop's to close. A replayed chunk after
// which kernelOK fails, a penalty or a shard session linked to the
// session (Server.toUserSpace posts cmdHold), and a session leaving the
// loop hold the pair: the kernel stops
// relaying at once, and nothing is written to a socket until the bytes
// the kernel relayed towards it are queued on it (loop.settled: the
// bytes stay pending and the socket's writability is watched; a
// session's pumps wait in pump.run on their own goroutines). The runner
// never waits for the kernel. A paired side's end of stream is passed on
// once its relayed bytes are queued on the peer (loopSide.drain). The
// pair is closed when the session's sockets are. A paired socket, on
// the loop or the pumps, is read whole (wholeReads: a buffer sized to
// what it holds), which avoids a reordering seen on Linux 6.18 when a
// read left bytes queued (doc/fast-path.md).
//
// On the pumps, each iteration reads one chunk (never more
// than the flow's window), shows it to the direction's observer, asks the
// link when it may go, and writes it. On the common path (no emulation,
// an uncontended unlimited link) that is a read, a few atomic operations
// and a write: no channel hop, no allocation per chunk, and the buffer is
// reused. On plain sockets the read and the write are raw system calls
// (internal/rawconn), which under small requests and responses saves a
// large share of sluice's own CPU; TLS and wrapped connections keep their
// own Read and Write. The opening exchange reads and writes raw too: the
// server wraps a socket as it accepts or dials it, and unwraps it for
// Route.WrapClient and WrapUpstream and for the event loop. Through the
// net package each message of a login (pgbench -C: a connection per
// transaction) could wake the runtime's monitor thread of an idle
// process; raw, a connection costs 1.3 to 1.8 fewer context switches
// (of about 17), with CPU per connection within the noise. A TCP route
// also accepts and dials its sockets with raw system calls
// (rawconn.Listener, rawconn.DialTCP): through the net package the
// accept and the dial, with their socket options, woke that thread about
// once per connection; without them a connection costs another 3.1 to
// 3.6 fewer context switches and 16-18 % less CPU. What still goes
// through the runtime's blocking path is the close of the runtime's
// descriptors when the loop takes the sockets.
// A pump's read buffer (32 KiB) comes from a pool only once its socket
// has bytes (rawconn.Conn.ReadPooled) and goes back once the chunk has
// been handed on, so a pump waiting for its peer holds none. A pump's
// emulation state is allocated only when a binding carries emulation or a
// chunk must wait.
//
// Idle sessions hold no goroutine. No goroutine waits for a session's
// end: serve runs the opening exchange on the accepting goroutine, starts
// the down pump, carries on as the up pump and returns when that pump
// ends or parks, and the pump that ends last ends the session
// (relaying.ended) and tells the server. A pump whose direction moved no
// byte over a whole sweep (park.go: one sweeper goroutine per server,
// every sweepPeriod, running only while some pump may park; no timer per
// read) parks: the sweeper sets its socket's read deadline in the past
// (wall clock), the pump's read returns, the pump clears the deadline,
// registers the socket in the server's idlepark.Set and returns, giving
// up its goroutine. When the socket becomes readable (bytes, the peer's
// half-close, an error) the set starts the pump again on a new goroutine,
// where it stopped: it was between two reads, so no byte is in flight.
// Only plain sockets park (TLS keeps decrypted bytes the socket's
// readiness would not show).
//
// Emulation and scheduling cost only where they are switched on:
// a flow whose binding carries a delay or whose link has a capacity hands
// its chunks to a delay line with its own writer goroutine, so the pump
// keeps reading while earlier bytes wait for their release time. A
// chunk's delay counts from when the kernel received it (SO_TIMESTAMPNS,
// turned on for the socket when its delay line starts), not from when the
// pump woke up to read it: that wake-up, after an idle wait, would add
// its own latency to every delayed request and response.
//
// A chunk goes at its binding's class (the pool's network_priority),
// or Low while Session.Penalized. A shard connection of a distributed
// query (session.Session.Coordinator set) goes at the class of its
// coordinator session's pool instead, so a query's remote scans run at
// the priority of the query, and Low while the coordinator's statement
// is penalised (Session.Penalized follows the link); its flow keeps its
// own pool, weight and emulation. Both are re-read when the Policy's
// Version moves.
//
// Admission holds a request in the client pump, before its bytes go
// upstream: a front end's Rewriter (wire/pg, wire/mysql admit.go) blocks
// in Rewrite while the request waits for its pool's slot. The pump then
// reads no more of the client (backpressure: one chunk at most waits in
// sluice) while the server pump goes on. Rewrite's context (pump.rwCtx)
// ends as soon as either pump ends, the session fails or an
// administrator terminates it, so a held session ends like any other. A
// front end's own answer to the client (a refused request, Conn.Inject)
// goes through the server pump, between two chunks, like the server's
// bytes: pump.kick wakes that pump for it (a read deadline in the past,
// cleared before the next read, or a resume from the parked set), and
// the pump sends what the Injector has before reading again. The common
// path pays one nil check per resume and none per chunk.
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
//     1927, after the server's last packet of a result cut short) and its
//     socket closes. When the down observer can find the end of the
//     server's message in flight (wire.Remainder), the down pump first
//     forwards the rest of it (up to maxFinish, within finishWait) and the
//     server side closes after; the front end sends the error only where
//     the server's bytes stopped at a message boundary, else the socket
//     closes without it, so no frame is ever torn. Session.TerminateIdle (a pool's
//     idle_in_transaction) does the same with its own reason (PostgreSQL
//     FATAL 25P03). Session.UnsentBytes reads the client
//     socket's TCP_INFO notsent.
//   - A parked pump is resumed before its socket is closed or given a
//     read deadline by the relay (pump.stop, called by relaying.fail,
//     the fatal path and relay.abort): stop marks the pump stopping, so
//     it never parks again, and takes its socket back from the set
//     (idlepark.Set.Unpark) before the close, so the descriptor is never
//     reused under an epoll registration; the resumed pump then sees the
//     close or deadline as a waiting read would.
//   - A read deadline ends a pump's read as a park only when the sweeper
//     asked for it (parkState.asked) and the pump is not stopping, and as
//     a wake-up for the Injector only when kick asked for it
//     (parkState.kicked), all under parkState.mu, which also orders the
//     sweeper's and kick's deadlines, the pump's clearing of them and the
//     relay's own deadlines. A kick beats a park: the pump reads again.
//   - Socket deadlines are wall-clock times (clock.SocketDeadline), never
//     the injected clock's.
//   - Socket options: TCP_NODELAY on both sides; TCP_NOTSENT_LOWAT on the
//     client-facing socket so unsent data waits in sluice, where it can be
//     scheduled, rather than in the kernel.
//
// Lock order: Server.mu, parking.mu and parkState.mu are each taken
// alone, except parkState.mu, under which idlepark's lock is taken (Park,
// Unpark); relay.mu is taken before loop.mu (a session handed to a loop,
// a command posted) and before nothing else. A loop's runner-owned state
// needs no lock: one goroutine at a time is the runner. No lock is held
// while a chunk runs.
package proxy
