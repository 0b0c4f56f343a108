// Package netem emulates a network path in user space, per flow: one
// connection in one direction. It owns the model of delay, jitter, rate,
// window and loss (Params, Path) and the delay line that applies it to a
// byte stream in real or virtual time (Line). It replaces tc netem, which
// needs root and delays a whole interface, and a proxy that sleeps per
// chunk, which adds its own latency on top of the one asked for.
//
// # Release times
//
// A Path turns an arrival (time, byte count) into a release time: when the
// bytes leave the emulated path. For chunk i,
//
//	release_i = max(release_{i-1}, shaped_i + delay_i + stall_i)
//
// shaped_i is when a token bucket (Rate bytes/s, Burst bytes) has let the
// chunk's last byte through, delay_i a fresh sample of the delay
// distribution, and stall_i the retransmission stalls of the segments lost
// in the chunk. The max makes release times monotone: bytes are never
// reordered inside a flow, whatever the jitter, because TCP delivers in
// order; a late segment holds back everything behind it (head-of-line
// blocking), which is what the max says. netem reorders packets when the
// jitter exceeds their spacing; a byte stream cannot be reordered, so the
// delay of a chunk that would overtake its predecessor becomes the
// predecessor's. Delays are one-way and per chunk (one delay per Write, not
// per segment), so delay='5ms' on both directions adds 10 ms to a round
// trip, as with netem.
//
// The delay distributions are netem's (uniform, normal, pareto,
// paretonormal), computed from their definitions rather than read from
// tables. Correlation follows netem's definition, the lag-1 correlation of
// the uniform variates behind successive delays, but is produced by an
// AR(1) process on normal scores mapped through the normal CDF, so the
// delays keep exactly the configured distribution at any correlation
// (netem's own mixing narrows the spread as the correlation grows).
//
// # Window
//
// A Line counts each chunk against the flow's window from its Write until
// its release plus the acknowledgement's trip back (the reverse direction's
// one-way delay). A Write that does not fit blocks until enough of the
// window is acknowledged, and the chunk enters the path then. So, as on a
// real long path, one flow's throughput is at most Window / RTT: with 25 ms
// each way and a 1 MiB window, 1 MiB per 50 ms. Blocking is the
// backpressure: the caller stops reading its socket, so the bytes a Line
// holds never exceed the window.
//
// # Loss
//
// A loss never drops, duplicates or corrupts a byte: the flow is a TCP
// stream and TCP repairs losses. What a loss costs a TCP flow is time: the
// retransmission. So a lost segment (MSS bytes; a chunk of n bytes is
// ceil(n/MSS) segments) stalls the chunk by RTO, and with it, through the
// max, the rest of the flow. Losses come from a Bernoulli process or a
// Gilbert-Elliott two-state chain (bursts), placed by geometric gaps on a
// generator of their own, so where they fall in the segment sequence does
// not depend on the jitter or on how the flow is cut into chunks.
//
// # Determinism
//
// A Path reads no clock and draws from generators seeded by Params.Seed and
// a per-flow seed: the same inputs give the same release times, bit for
// bit. A Line takes a clock.Clock, so under clock.Fake it releases at
// exactly the model's times.
//
// # Precision
//
// Release times are absolute: each chunk keeps its arrival time and is
// released at a deadline computed from it, so errors never accumulate over
// chunks as they do with a sleep per chunk. Meeting a deadline to better
// than Go's timer granularity takes more than a Go timer, which wakes up
// to about 1 ms late on an idle Linux host (the netpoller sleeps in whole
// milliseconds). When the clock has high-resolution timers
// (clock.HighRes) every chunk therefore finishes its wait on one, aimed
// early by the mean lateness of its wake-ups: a response written in
// several chunks is only as punctual as its first. With a clock that can
// only sleep precisely, a chunk released on its own (a request or a
// response) finishes in a kernel sleep aimed the same way; otherwise by
// yield-spinning on the clock for up to LineOptions.Spin, and chunks of a
// stream are released at timer precision. Lines set coarse release every
// chunk at timer precision. Deadlines stay absolute throughout.
//
// Lateness measures the result: LineOptions.Precise and Timed record, for
// every release, the clock's time just before the write less the release
// time. It is what the emulation adds to the model; the write itself and
// the receiver's wake-up are the host's.
package netem
