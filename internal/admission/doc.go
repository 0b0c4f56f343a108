// Package admission limits how many statements of a resource pool (and,
// optionally, of a link) run at once: GaussDB's active_statements. A
// request takes a slot of its pool and of its group (a link) when both
// have one free, or waits in a queue until one frees, its context is
// done, its timeout passes or it is cancelled from outside.
//
// It is pure logic with one blocking call, Controller.Acquire, which
// waits on a channel and, for the queue timeout, on a clock.Clock timer
// (tests run it on clock.Fake or in a testing/synctest bubble). It knows
// nothing of sessions or the catalog: package wlm maps a statement to a
// Request and the catalog to Limits, and holds the statement while it
// waits.
//
// # Queues and order
//
// Waiters are kept in three lists, one per link class of Request.Class
// (High, Normal, Low), each in arrival order. When a slot frees
// (Slot.Release) or a limit rises (Configure), the controller walks the
// lists from High to Low and admits every waiter whose pool and group
// both have a free slot. So:
//
//   - within a pool (and group), waiters of one class are admitted in
//     arrival order, and a Low waiter (a penalised statement, or one of
//     a low-priority pool) after every High and Normal one;
//   - across pools sharing a group limit (a link's
//     max_active_statements), a freed group slot goes to the best class
//     first, then to the earliest arrival;
//   - a waiter is skipped, not waited for, when its own pool or group is
//     full: a full pool never blocks another pool, and a waiter blocked
//     only by its link does not block its pool's waiters on another link.
//
// Low waiters can starve while higher classes keep their pools busy; that
// is the point of a penalty. Waiter.Demote moves a queued waiter to Low
// (keeping its arrival order among Low waiters); Waiter.Cancel ends its
// wait with an error that says why.
//
// Invariants:
//   - After every change (Release, Configure) every queued waiter that
//     fits has been admitted; so a new request is admitted at once
//     exactly when its pool and group have a free slot, and cancelling
//     or demoting a waiter never admits anyone.
//   - A slot is released once: Slot.Release is idempotent. A failed
//     Acquire holds nothing, even when a slot was granted in the instant
//     its context ended or its timeout fired (the slot is given back).
//   - Cancelling a waiter frees nothing: it held no slot. Cancelling an
//     admitted one does nothing (it keeps its slot; Cancel reports false).
//   - Configure raising a limit admits waiters at once; lowering one
//     revokes nothing: running requests finish, and nobody is admitted
//     until the pool is below the new limit. A limit below 1 (or absent)
//     is unlimited.
//   - The controller keeps counters only for pools and groups that have
//     a limit or are in use, so its memory is bounded by the limits
//     configured and the requests in flight.
//
// Costs: a request that finds a free slot takes the lock once and
// allocates its Slot (32 bytes); one that waits allocates its Waiter and
// a channel, and a timer with a timeout. A release walks the queued
// waiters once (O(waiters)), which stays small because waiters are
// statements held in the proxy, one per client session at most.
//
// # Lock order
//
// Controller.mu is a leaf: no other lock is taken under it, no callback
// runs under it (Request.OnWait runs with no lock held), and Acquire
// blocks with no lock held. Waiter and Slot methods take it, so callers
// must not call them while holding a lock that code under Controller.mu
// could want (there is none).
package admission
