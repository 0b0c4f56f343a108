// Package limit meters streams of units against a rate: a fixed-window
// counter, a leaky bucket and a token bucket behind one interface,
// Limiter. In sluice the units are bytes and rates are bytes per second;
// nothing here depends on that.
//
// A limiter never reads a clock. Every call takes the current time, and
// the answer is a time: Reserve(now, n) commits n units and says when
// they may pass; Next(now, n) says the same without committing;
// SetRate(now, r) changes the rate on a live limiter. The caller decides
// whether to wait, which keeps the algorithms pure and lets the link
// scheduler and the tests drive them in virtual time. Reservations are
// granted in the order they are made, and a rate of 0 means unlimited:
// everything passes at once and nothing is recorded.
//
// The three algorithms differ in one thing, what a stream may do in a
// short interval, and above all at a window edge:
//
//   - FixedWindow counts units in windows of w (default 1 s). A window
//     admits rate*w units however they are spread, so the allowance can go
//     out in one burst, and two windows' allowances can go out on either
//     side of an edge: up to 2x the limit in an instant. That boundary
//     problem is a property of the algorithm, kept and documented, not a
//     defect to hide; it is why the counter serves only where coarse
//     accounting is enough.
//   - LeakyBucket is a queue that leaks at the rate, released in ticks
//     of its granularity g (default 1 ms): each tick releases at most
//     rate*g units plus the overdraft of one reservation. Idle time earns
//     nothing beyond one tick. A caller that comes back up to one tick
//     after its last unit leaked (a late timer, the work between two
//     reservations) is late, not idle: its units leak on from where the
//     last ones ended, so the tick after it fell behind may also pass what
//     it missed, and a stream that keeps reserving gets the rate exactly.
//     The link's low-priority class uses it, as the reference system does
//     (low_priority_bandwidth, 256 MB/s enforced per millisecond: at most
//     256 kB per ms, and 512 kB in the millisecond after one the class
//     fell behind in). The ticks are also what make it cheap: a
//     backlogged stream is released once per tick, in a batch, so whoever
//     waits for it wakes once per millisecond, not once per chunk.
//   - TokenBucket accrues tokens up to a burst. After idle time a stream
//     may pass the whole burst at once; over any interval T at most
//     burst + rate*T units pass, with no regard to edges. It suits limits
//     that should tolerate bursts, such as a per-flow rate.
//
// All three keep one cursor on a virtual time line that moves by 1/rate
// per unit, in nanoseconds with the remainder carried, so long runs of
// small reservations add up exactly. Windows and ticks are aligned to the
// first time a limiter sees. SetRate carries the backlog over in units:
// units committed at the old rate drain at the new one, which is what lets
// an operator speed up or slow down traffic that is already waiting.
// A reservation larger than what a window, tick or burst holds is never
// refused: it passes alone and the debt delays the reservations behind it,
// so the long-run rate holds whatever the chunk sizes.
//
// Every limiter is safe for concurrent use (one mutex, held for a few
// arithmetic operations) and allocates nothing per call.
package limit
