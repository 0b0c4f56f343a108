// Package budget shares one low-priority budget among the instances of
// a fleet: the catalog setting cluster_low_priority_bandwidth, in
// bytes/s, is what the Low class of every instance together may use in
// each direction. Each instance reports what its Low class wants, one
// elected instance (the allocator) divides the budget max-min fairly
// over those demands, and each instance runs its links' Low class at
// its grant: the link's leaky bucket is set to min(low_priority_bandwidth,
// grant) (wlm.Manager.SetLowPriorityCaps). Without etcd nothing here
// runs.
//
// # Pure logic
//
// The pieces that decide are pure and take the time they run at:
//
//   - Estimator: an instance's demand, per link and direction, from the
//     link's Low-class counters read every 100 ms (bytes admitted, bytes
//     of Sends waiting). The used rate is the bytes admitted over the
//     last second. The class is backlogged when a Send waited at a
//     reading of the last second (the bucket or the queue bound held it)
//     or when it used 90% of the rate it was held to; a backlogged class
//     asks for the whole budget, one that is not for 1.25 times what it
//     used. An instance's demand is the sum over its links, at most the
//     budget.
//   - MaxMin and Fill: water filling. Demands under the fair level get
//     what they ask, the rest share what is left equally; the sum never
//     exceeds the budget. Fill then hands what nobody asked for out
//     equally, so an idle instance can start before the next round.
//   - Allocator: the grants, lower before raise, as Doorman does with its
//     leases. A grant carries a rate, a version (raised when the rate
//     changes) and an expiry (GrantTTL after it was written, 5 s by
//     default); an instance applies a grant only until it expires. Each
//     round the allocator writes the lowered grants and the renewals at
//     once, and counts every lowered instance at its old rate until it
//     has acknowledged exactly the new version (in its demand report) or
//     the old grant has expired. An instance's exposure is the highest
//     rate it may be applying; an instance whose target is above it is
//     raised from it by a max-min share of the headroom, the budget less
//     every instance's exposure, so a round never adds more than the
//     headroom. So
//     at every instant the rates the instances may be applying add up to
//     at most the budget, whatever order they see the writes in. An
//     instance whose demand is gone has its grant deleted and is counted
//     at it until it expires. A new allocator adopts the grants it finds
//     as unacknowledged.
//   - Effective and Caps: what an instance runs at: its grant while
//     valid; before any grant MinRate (1 byte/s: one chunk passes, the
//     rest waits and shows as demand); after its grant expired an equal
//     share, the budget over the instances seen at the last listing. The
//     instance's rate is split over its links by their demands (Fill).
//
// # In etcd
//
// Keys, under the fleet's prefix (internal/etcd):
//
//	budget/demand/<name>   Report JSON: want, applied version, rate, mode,
//	                       allocator; under the instance's lease,
//	                       written every Period (1 s) and at once when a
//	                       grant is applied (the acknowledgement)
//	budget/grant/<name>    Grant JSON, written by the allocator only, in
//	                       one transaction per round guarded by its
//	                       election key (a deposed allocator's writes fail)
//	budget/election        the election (concurrency.Election) on the
//	                       instance's lease
//
// The instance's lease is membership's (Options.Lease); without one the
// Budget keeps a lease of its own. When an instance dies its lease
// expires, its demand key and candidacy go with it, the allocator
// deletes its grant and hands its share out once the grant has expired.
// When the allocator dies another instance is elected within the lease
// TTL and adopts the grants in etcd; meanwhile the grants stay valid
// until they expire, so the takeover is invisible when it is quicker
// than GrantTTL.
//
// # Fail static
//
// When etcd does not answer an instance, it keeps its last grant until
// the grant expires, then decays to an equal share of the budget over
// the live instances it last saw: a warning in the log, mode fallback in
// SHOW BUDGET, sluice_budget_mode{mode="fallback"} and
// {mode="etcd_unreachable"} in the metrics. The equal share holds the
// sum to the budget only while every instance falls back alike (all cut
// off from etcd); an instance cut off alone may add its share to grants
// the others still get (a partition of one instance overshoots by at
// most budget/N). Grants carry wall-clock expiries: the fleet's hosts
// are assumed to agree on the time (NTP) well within GrantTTL.
//
// # Concurrency
//
// A Budget runs three goroutines under Run: the sampler (readings,
// demand, caps every SampleInterval), the grant watcher, and the
// session loop (demand reports, the campaign and, once elected, the
// allocator's rounds every Period/2). One mutex guards the Budget's
// state; it is never held across an etcd request, and the links' own
// locks are taken under it (reading Stats, setting caps): lock order
// Budget.mu, then the workload manager's, then a link's.
package budget
