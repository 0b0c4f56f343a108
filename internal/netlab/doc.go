// Package netlab builds real networks on this host for sluice's
// experiments and tests: network namespaces joined by veth pairs, with
// real rates and real queues on their egress (the kernel's tbf qdisc),
// and a router namespace where several nodes share one port. What
// crosses them is real TCP through the kernel's own buffers and queues;
// nothing is emulated.
//
// A Testbed owns everything it creates and removes it in Close, in the
// reverse order, also after a step failed half-way; Close is safe to
// call twice. Names carry the creating process's id, so New sweeps what
// a testbed of a process that no longer runs left behind (a test killed
// by its timeout) and two processes never collide. Addresses come only
// from the benchmarking range 198.18.0.0/15 (RFC 2544), one /24 per
// link, on interfaces inside the testbed's own namespaces: nothing is
// addressed or routed in the host's namespace, so nothing leaves the
// testbed.
//
// The building is done by iproute2 (ip and tc), the kernel's own
// administration tools; a process joins a namespace with
// `ip netns exec` (Namespace.Command) or is forked into it with its own
// credentials (Namespace.Start), and code in this process opens sockets
// inside one with Namespace.Listen and Namespace.Dial (setns on a
// locked thread: a socket, like a process forked from that thread,
// stays in the namespace it was made in).
//
// It needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN); New says so when it
// cannot make a namespace. Qdisc reads the queue's counters (bytes,
// drops, backlog) as tc reports them.
//
// A Testbed is safe for concurrent use; its one mutex guards the list
// of what to undo and is held while a command runs, never while the
// caller's code does.
package netlab
