// Package sbrand generates the pseudo-random numbers and strings of
// sysbench 1.0's OLTP workloads.
//
// It owns the four distributions sysbench selects with --rand-type
// (uniform, gaussian, special, pareto) with the same parameters and the
// same arithmetic, including the uint32 truncation of results, so a workload
// built on it touches the same rows with the same skew as sysbench does. It
// also owns the string templates ('#' becomes a digit, '@' a lower-case
// letter) and the unique-number sequence used for client-generated primary
// keys.
//
// The generator is xoroshiro128+, seeded through splitmix64: results are
// statistically those of sysbench, not bit-identical (sysbench seeds from
// libc random()). Two Rands created with the same seed and Config produce
// the same sequence.
//
// Invariants:
//   - A Rand is not safe for concurrent use; give each worker its own.
//   - A Unique is safe for concurrent use and never repeats a value within
//     2^32 draws.
//   - No function panics on any Config or range, including b < a, a zero
//     iteration count or a 100% special resolution: results then follow the
//     same uint32 and IEEE 754 arithmetic sysbench's C code does.
package sbrand
