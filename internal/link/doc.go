// Package link schedules the bytes of many flows through a shared
// bottleneck, the link, and emulates the device queue in front of it.
//
// A flow is one connection in one direction. Links are full duplex: Up
// (client to server) and Down (server to client) are independent, each
// with its own scheduler, FIFO and counters, under one Config. A pump
// reads a chunk from its socket, calls Flow.Send with the chunk's size and
// class, and writes the chunk at the departure time Send returns. A flow
// that may not send yet blocks in Send and stops reading its socket:
// backpressure, not buffering. Bytes are never dropped, duplicated or
// reordered inside a flow.
//
// # The device FIFO
//
// With a Capacity, each direction holds a FIFO of QueueSize bytes (2 MiB
// by default) that drains at Capacity: the NIC ring plus the kernel's TCP
// send buffers of a busy host. A chunk admitted at time a departs at
// max(a, previous departure) + n/Capacity; occupancy at t is the admitted
// bytes that have not departed, and a chunk is admitted only when it fits
// (an oversized chunk when the FIFO is empty). Whatever is in the FIFO is
// ahead of every byte that comes after it: 2 MiB at 1 GB/s is 2 ms for
// each later byte, however important.
//
// With NetworkControl off that is all there is, and it is how an
// unmanaged network behaves: every flow's bytes enter first come first
// served as space frees. N bulk flows keep the FIFO full, and a small
// transfer gets one admission in N+1 behind a full FIFO: it takes about
// (N+1) times its unloaded time. The reference warehouse measured a 55x
// slowdown this way.
//
// # Why a rate limit is not enough
//
// The obvious remedy, limiting the bulk traffic's rate, only lowers the
// buffer. If the limit is above what the other traffic leaves free, the
// FIFO still fills with bulk bytes and every important byte still waits
// for all of them; strict priority does not help either, since it orders
// bytes that wait to enter the FIFO, not the bytes already inside. If the
// limit is below it, the FIFO stays short but the bulk traffic cannot use
// the spare capacity: the link idles while work waits. A rate says how
// fast bytes enter, not how many are in front of the next one.
//
// What removes the wait is an occupancy bound: Low-class bytes inside the
// FIFO never exceed LowPriorityQueueBytes (64 KiB by default). A Normal
// byte then waits behind at most that much Low data, 0.66 ms at 100 MB/s,
// 66 us at 1 GB/s, while Low still fills every byte of capacity the other
// classes leave, because the bound is on what is queued, not on what
// flows: as fast as Low bytes depart, Low bytes may enter. The scheduler
// is work conserving. At its limit: a single Low flow keeps the FIFO busy
// only if it comes back with its next chunk before the bound drains (64
// KiB at 100 MB/s is 0.66 ms); with Go's timers, which can fire 1 ms late,
// it would leave up to a fifth of the idle capacity unused. So the
// scheduler's one timer per direction is a high-resolution one when the
// clock offers it (clock.HighRes: a timerfd in the network poller, which
// wakes within microseconds without holding a thread).
//
// The Low class as a whole is also held to LowPriorityBandwidth, the
// reference system's low_priority_bandwidth, by a leaky bucket with 1 ms
// ticks (package limit): at most rate/1000 bytes per millisecond plus one
// chunk, and on top of that what the class left unused in the
// millisecond before, if it was held back there (by a late timer, or a
// pump slow to come back). So the class gets the rate exactly, and idle
// time beyond one tick earns nothing: after a pause the class gets at
// most the current tick's allowance at once.
//
// # Yielding the host
//
// Strict priority and the occupancy bound give the link to the more
// important statement byte for byte. They do not give it the host: the
// bytes the Low class moves in the capacity left over cost processor time
// in sluice, in the bulk clients and in the database, and the important
// statement's server, proxy and client wait for that time between its
// round trips, when it has no byte on the link. On two cores, bulk
// traffic at 100 MB/s beside a 1 MB query made it 1.4x slower with the
// link perfectly shared.
//
// So, with NetworkControl and a Capacity, the Low class yields: from the
// admission of a Normal or High byte until YieldHold (50 ms) after that
// byte has left the FIFO, Low bytes enter at most at LowYieldPercent of
// the capacity (10 % by default), metered by a second leaky bucket with 1
// ms ticks that only the admissions made while yielding reserve. A
// client that sends its next statement within 50 ms of the last answer
// keeps the Low class yielding throughout; 50 ms after the last Normal or
// High byte, Low has the whole link again. LowYieldPercent 100
// (NoLowYield) switches yielding off: Low then takes every byte the other
// classes leave.
//
// With no Capacity, a controller that watches the real path (package
// netctl) may hold the Low class to a rate it found (SetLowRate): the
// Low class then yields to LowYieldPercent of that rate, or of the
// path's rate the controller estimates if that is lower (a hold probing
// above the path), while a statement above it runs (Engage) and for
// YieldHold after: the same yield against the rate the path really has.
//
// # Strict priority and fair shares
//
// With NetworkControl on, the scheduler picks the next chunk to enter the
// FIFO: from the highest class with a waiting flow (High, then Normal,
// then Low), so a Low byte enters only when no Normal or High byte waits.
// Within a class, pools share by weight through deficit round robin: on
// its turn a pool adds Quantum*weight bytes to its deficit and sends
// while the chunk of its first waiting flow fits in the deficit, then the
// turn passes on and the deficit is kept. Flows of one pool take turns in
// arrival order. Backlogged pools get bytes in proportion to their
// weights, whatever their chunk sizes, and none starves beyond its share.
//
// The candidate is always the chunk the policy wants next. If it does not
// fit yet, nothing overtakes it, not even a smaller chunk that would fit:
// a large chunk is never starved by small ones and a lower class never
// slips in front of a higher one. A flow has at most one Send outstanding,
// so its pool's queue is often empty for an instant right after it is
// served. Deficit round robin would end the pool's turn then and lose its
// share, so here looking at the next candidate changes nothing, and an
// empty pool loses its turn (keeping at most one quantum) only when
// another pool's bytes are actually admitted in its place.
//
// # Order
//
// A flow's class may change from one Send to the next: a statement
// penalized midway moves to Low. Its bytes still leave in order, because
// a flow has at most one Send outstanding (a concurrent one fails) and the
// FIFO departs in admission order. Departures returned to one flow never
// decrease, even across a Configure that drops the capacity to 0.
//
// # Time and goroutines
//
// Time comes from an injected clock.Clock, so every behaviour above runs
// in virtual time in the tests, step by step. The scheduler proper (sched)
// is pure logic on the times it is given. Per direction, one goroutine,
// started on first need and stopped by Link.Close, sleeps on one reused
// timer until the next departure that frees enough space or the next tick
// of the leaky bucket; arrivals, cancellations, Close and Configure run
// the scheduler at once in the caller's goroutine. Real timers fire late
// (about 1 ms on a typical host), so a run admits a waiting chunk at the
// time its obstacle went away, not at the time the run happens: the
// emulated link keeps its capacity even when the FIFO drains faster than
// the timer can tick. For the same reason an arrival first admits what
// was due before it, at the times it was due, and only then competes by
// priority (at the same instant, priority decides): a Normal chunk that
// arrives while a late run is pending does not take the place of a Low
// chunk whose turn came earlier, and the link does not idle for the
// timer's lateness. Lateness is made good in virtual time, never by
// sleeping in the kernel for precision, which holds a thread per sleep
// and, with many flows, delays every other goroutine's network reads;
// what lateness remains is made small by the high-resolution timer.
//
// With Capacity 0 and no limit on the Send's class (not Low, or no
// LowPriorityBandwidth) there is no FIFO to wait for. Send then takes no
// lock and makes no goroutine hop: it counts the bytes with atomics and
// returns the current time. In the contended case nothing is allocated
// per Send either; waiting flows live in intrusive lists.
//
// # Configuration and statistics
//
// Configure applies to live links: waiting flows keep their place and are
// scheduled under the new settings from then on, and the Low bucket
// carries its backlog over to the new rate. Stats returns, per direction,
// class and pool, the bytes admitted, the bytes waiting, a histogram of
// queue delay (from Send to the departure of the chunk's last byte, in
// fixed buckets from 50 us to 5 s), and the FIFO occupancy by class.
//
// Link and Flow are safe for concurrent use, except that one Flow takes
// one Send at a time. Each direction has one mutex guarding its scheduler;
// Link's own mutex serializes Configure and is taken before a direction's.
package link
