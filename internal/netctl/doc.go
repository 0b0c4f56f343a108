// Package netctl is sluice's network controller: it finds a bottleneck
// around a link that nobody configured (a real switch port, a WAN link,
// the peer's NIC) and holds the link's Low class below it, so that
// penalised and low-priority bytes do not keep a standing queue there
// in front of more important ones, and still use what the others leave.
//
// It owns three things. Controller is the pure logic, given the time
// and the kernel's view of the sockets (Sample): the path's rate is the
// highest rate the sockets delivered over the last two seconds (as BBR
// estimates a bottleneck's bandwidth); the standing queue is the
// smallest excess of a Low-class round trip over its lowest, among
// those with bytes in flight and not held by their reader's window (a
// delay signal, as LEDBAT's, RFC 6817, with a target of DefaultTarget
// rather than 100 ms), the least of the samples of the last 10 ms, since
// a busy processor stretches a round trip or two by as much as the target
// and a queue stretches them all. A queue counts once it stands for confirmTime
// while the path delivers near its rate (a pause of one end stretches
// round trips too, with the path idle). Above the target the Low rate
// falls in proportion to the excess, at most once per round trip; below
// it the rate climbs back to the whole path within a second or two,
// gently near the rate a queue last stood at, by a quarter per 100 ms
// well below it, and by half per 100 ms well past it (a queue found
// while the flows were starting says little of the path's rate);
// when the path delivers well past what it did under the last queue,
// with the Low class let past it and no queue, for two seconds, the
// bottleneck is gone and the hold is lifted; and when the queue stays
// while the Low class is held to a tenth of the path and its sockets
// deliver no more than twice that, it is not the Low class's, and the
// controller lets go for a while (while they deliver more, the queue is
// fed by what they were let send before the hold).
//
// Watcher is the blocking part. The proxy tells it which sockets each
// flow of a link direction reads from and writes to, and at which class
// (proxy.Options.Sockets). Each direction has two sides (Side), each
// with its own Controller: Send, the path beyond sluice, whose queue
// shows in the round trips of sluice's own sends (TCP_INFO); and
// Receive, the path before it, whose queue shows in the round trips of
// ICMP echo requests to the peer (probe: the receiver's own estimate,
// tcpi_rcv_rtt, stretches with every pause of the sending process and
// falls with every window that arrives fast, so it cannot tell a queue).
// Every Interval it samples the sockets (not while no bottleneck is
// found and the Low class moved nothing since the last sample, so idle
// sessions cost nothing), steps the controllers and sets the lower of
// the two sides' rates on the link (link.Link.SetLowRate, which applies
// on top of low_priority_bandwidth, so a fleet's shared budget still
// caps the sum). The link paces the Low class's writes, and its reads
// too, so a held receive side reads more slowly and its sender's window
// shrinks, as rLEDBAT's does; the Watcher also clamps the windows the
// receive side's Low sockets advertise (TCP_WINDOW_CLAMP) to their
// share of the rate over a round trip, so a sender cannot fill the
// queue from a receive buffer the pacing has not filled yet. Estimates
// feed the network view (SHOW NETWORK).
//
// A link with a capacity is sluice's own model of its bottleneck, which
// the link schedules itself; the Watcher leaves it alone.
//
// Invariants: a direction's hold is lifted when network control goes
// off or a capacity is set, and when Run returns; the Watcher never
// holds a link of a closed Stack. A probe is opened when Low bytes first
// arrive from its peer (a session that never carries them costs no
// probe), sends only while they arrive, one request per Interval, and
// is closed with the last socket of its peer or when Run returns. The receive side needs an ICMP socket (an unprivileged
// one where net.ipv4.ping_group_range allows, else CAP_NET_RAW) and an
// IPv4 peer; without them it shows no queue, and says so once in the
// log.
//
// Lock order: Watcher.mu, then a probe's mu; neither is held while
// sockets are sampled or links configured (link.Link's own locks).
package netctl
