// Package fastpath relays a session's bytes inside the kernel, counting
// its protocol messages as they pass, and hands the session back to user
// space whenever sluice must touch its bytes.
//
// It owns one BPF stream-verdict program (bpf/relay.c, compiled by
// bpf2go into the committed relay_bpfel.o, so a build needs no clang) and
// three maps: a sockhash of the paired sockets, a link per socket (its
// peer, whether to redirect, and how many bytes user space consumed,
// written by user space) and a flow per socket (framing state and
// counts, written by the program). For each chunk a paired socket
// receives, the program walks the chunk's messages (PostgreSQL's type
// byte and int32 length after the startup packet; MySQL's 3-byte length
// and sequence byte), counts them by type, and then either redirects the
// chunk to the peer's send queue or passes it to the socket's own receive
// path, where user space reads it as from any socket.
//
// The program copies each chunk it redirects (at most JournalMax bytes)
// into the journal, a ring buffer user space drains (Journal), so that
// user space observes every byte of a paired session: the chunks passed
// to it from the sockets and the others from the journal, in stream
// order as long as it drains the journal before it reads a socket. A
// larger chunk, or one the journal has no room for, is passed to user
// space instead, which writes it on once the kernel's earlier redirects
// are queued on the peer (Settle, Settled).
//
// A Pair starts paused. Sessions that need sluice on their bytes
// (emulation, a link that makes bytes wait, admission, a rewrite, TLS)
// stay paused; the others resume. The proxy makes the pair at the end of
// the opening exchange, when neither peer is about to send, so that the
// program sees every byte from then on.
//
// What keeps the stream whole across the two paths:
//   - Back to user space: Hold stops the links redirecting at once; a
//     system call that locks each socket waits out a verdict still
//     running with the old link, and Settled (Settle waits) reports once
//     every byte redirected before is queued on its peer (TCP_INFO's
//     bytes acknowledged plus SIOCOUTQ, against a baseline taken at
//     Resume). Only then may user space write to that peer. Pause is Hold
//     and Settle on both sides. Resume refuses (ErrUnsettled) while a
//     side is not settled: its baseline would count the bytes in flight.
//   - One version of a link per chunk: an update of the links map (not
//     preallocated) replaces the element, and the kernel frees the old
//     one only once no program can still be reading it; the program
//     copies its link once per chunk. With a preallocated map the
//     element went straight to the next update, and a verdict that read
//     its link while Hold wrote both could take the peer's link for its
//     own and send a chunk back out of the socket it came in on.
//   - Resume to the kernel: a link redirects a chunk only once user space
//     has consumed (Consumed) every byte the program passed it before, so
//     bytes still in user space are never overtaken. Under a stream with
//     no gap a side may stay on user space; a request/response session
//     crosses at its next exchange.
//   - End of stream: the program drops the empty chunk a FIN arrives as
//     (redirected, it would reach the peer's send path after user space
//     half-closed it and fail with EPIPE, reported on the receiving
//     socket: the half-close fault of a plain sockmap relay). User space
//     sees the end of stream and passes it on once Drained says the bytes
//     before it are on the peer: the socket notes a FIN before its last
//     chunks reach user space through the kernel's work queue, so Drained
//     answers ErrUnread until user space consumed them.
//   - A socket leaves the sockhash only when it closes: leaving it
//     earlier would drop bytes passed to user space and not yet read.
//
// Counts are exact for the bytes the program saw; a pair made while a
// receive queue held bytes (ErrNotQuiet) never resumes.
//
// Concurrency: Kernel is safe for concurrent use; the kernel serialises
// map updates and runs the program for one socket at a time. A Pair
// belongs to its session's owner (the loop's runner), one goroutine at a
// time; Stats is safe from any goroutine. There are no locks, so no lock
// order. Open needs CAP_BPF and CAP_NET_ADMIN and a kernel with
// CONFIG_BPF_STREAM_PARSER and bpf_loop (5.17 or later); without them it
// returns ErrUnavailable with the kernel's reason.
package fastpath
