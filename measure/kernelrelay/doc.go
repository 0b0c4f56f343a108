// Command kernelrelay is a reference row of the overhead scripts: a TCP
// relay whose bytes never reach user space, so it measures what two extra
// loopback hops cost when the kernel does all the relaying.
//
// After it accepts a client and dials the upstream, it puts both sockets
// into a BPF sockhash with a stream-verdict program attached. The program
// looks up the peer of the socket a segment arrived on and redirects the
// segment to that peer's send queue, inside the kernel. No parsing, no
// copying to user space, no wake-up of this process per message. Its work
// runs in softirq, which its process's CPU time does not show, and it is
// not a ceiling for the others' TPS: on a 2-core machine the redirects
// compete with the clients and the server for the same cores, and it has
// measured below HAProxy's TPS.
//
// Bytes that arrived before both sockets were registered and paired
// reach the receive queue and are copied by a goroutine per direction,
// which also carries end of stream (the program sees data, not FIN). That is sound
// for request/response protocols such as PostgreSQL's and MySQL's, whose
// first speaker waits for an answer: nothing can overtake bytes still
// waiting in the queue. A half-close waits until the kernel has queued on
// the other socket every byte received before it, so the FIN goes last.
//
// It is a benchmark instrument, not a general relay. On the kernel it was
// written on (6.18), a half-close from one side while the other side is
// still sending breaks the stream (the reading side sees EPIPE). A
// database client closes only with nothing in flight, so the benchmarks
// never do that.
//
// It needs root (CAP_BPF and CAP_NET_ADMIN) and a kernel with
// CONFIG_BPF_STREAM_PARSER.
//
//	go -C measure run ./kernelrelay -listen 127.0.0.1:16500 -upstream 127.0.0.1:15432
package main
