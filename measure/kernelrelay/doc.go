// Command kernelrelay is a reference row of the overhead scripts: a TCP
// relay whose bytes, after the opening exchange, never reach user space.
// It measures what sluice's kernel fast path (internal/fastpath) costs
// on its own, without the proxy around it.
//
// It copies each session's opening exchange in user space and, at its end
// (the server's first ReadyForQuery, or MySQL's OK to the login, told
// apart by their bytes alone), pairs the two sockets and resumes the pair
// before it forwards that last chunk: the server then waits for the
// client and the client for that chunk, so no byte is in flight. From
// then on the BPF program counts each message and redirects each chunk to
// the peer's send queue. Its work runs in softirq and in the kernel's work
// queue, which this process's CPU time does not show; on a 2-core
// machine it competes with the clients and the server for the same
// cores.
//
// End of stream still reaches user space, which passes it on once
// fastpath says the bytes before it are queued on the peer.
//
// It needs root (CAP_BPF and CAP_NET_ADMIN) and a kernel with
// CONFIG_BPF_STREAM_PARSER and bpf_loop (5.17 or later).
//
//	go -C measure run ./kernelrelay -listen 127.0.0.1:16500 -upstream 127.0.0.1:15432
//	go -C measure run ./kernelrelay -upstream 127.0.0.1:13306 -proto mysql
package main
