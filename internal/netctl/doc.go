// Package netctl is sluice's network controller: it finds a bottleneck
// beyond a link that nobody configured (a real switch port, a WAN link,
// the peer's NIC) and holds the link's Low class below it, so that
// penalised and low-priority bytes do not keep a standing queue there
// in front of more important ones, and still use what the others leave.
//
// It owns two things. Controller is the pure logic, given the time and
// the kernel's view of the sockets (Sample, from TCP_INFO): the path's
// rate is the highest rate the sockets delivered over the last two
// seconds (as BBR estimates a bottleneck's bandwidth); the standing
// queue is the smallest excess of a Low-class socket's smoothed round
// trip over its lowest, among those with bytes in flight and not held
// by their reader's window (a delay signal, as LEDBAT's, RFC 6817, with
// a target of DefaultTarget rather than 100 ms). Above the target the Low rate falls in proportion to the
// excess; below it the rate climbs back to the whole path within a
// second or two; when the path delivers well past what it did under the
// last queue, with the Low class let past it and no queue, for two
// seconds, the bottleneck is gone and the hold is lifted. Watcher is the
// blocking part: the proxy tells it which socket each link direction
// sends on and at which class (proxy.Options.Sockets); every Interval
// it samples them (not while no bottleneck is found and the Low class
// sent nothing since the last sample, so idle sessions cost nothing),
// steps each direction's Controller and sets the rate
// on the link (link.Link.SetLowRate, which applies on top of
// low_priority_bandwidth, so a fleet's shared budget still caps the
// sum). Estimates feed the network view (SHOW NETWORK).
//
// A link with a capacity is sluice's own model of its bottleneck, which
// the link schedules itself; the Watcher leaves it alone.
//
// Invariants: a direction's hold is lifted when network control goes
// off or a capacity is set, and when Run returns; the Watcher never holds a link of a closed
// Stack. The controller watches the direction sluice sends in; a
// bottleneck where sluice receives is not controlled here.
//
// Lock order: Watcher.mu is a leaf. It is not held while sockets are
// sampled or links configured (link.Link's own locks).
package netctl
