// Package admission limits how many statements of a resource pool (and,
// optionally, of a link) run at once: GaussDB's active_statements. A
// request takes a slot of its pool and of its group (a link) when both
// have one free, or waits in a queue until one frees, its context is
// done, its timeout passes or it is cancelled from outside.
//
// It is pure logic with one blocking call, Controller.Acquire, which
// waits on a channel and, for the queue timeout, on a clock.Clock timer.
// It knows nothing of sessions or the catalog: package wlm maps a
// statement to a Request and the catalog to Limits.
//
// Invariants:
//   - Order: waiters are admitted by class (High, Normal, Low), then in
//     arrival order. A waiter is skipped, not waited for, when its own
//     pool or group is full, so a full pool never blocks another pool; a
//     later waiter of the same pool and group never overtakes an earlier
//     one of the same class.
//   - After every change (Release, Configure) every queued waiter that
//     fits has been admitted; so a new request is admitted at once
//     exactly when its pool and group have a free slot.
//   - A slot is released once: Slot.Release is idempotent. A failed
//     Acquire holds nothing, even when a slot was granted in the instant
//     its context ended (the slot is given back).
//   - Cancelling or demoting a waiter frees nothing: it held no slot.
//   - Configure raising a limit admits waiters at once; lowering one
//     revokes nothing: running requests finish, and nobody is admitted
//     until the pool is below the new limit.
//   - The controller keeps counters only for pools and groups that have
//     a limit or are in use, so its memory is bounded by the limits
//     configured and the requests in flight.
//
// # Lock order
//
// Controller.mu is a leaf: no other lock is taken under it, no callback
// runs under it (Request.OnWait runs with no lock held), and Acquire
// blocks with no lock held.
package admission
