// Package units parses and formats the sizes, rates, durations and
// percentages that users write in the admin console, the YAML config and
// on the command line.
//
// The grammar is the one sluice documents for users:
//
//   - sizes: a number and a unit. kB, MB, GB, TB are powers of 1000 bytes;
//     KiB, MiB, GiB, TiB powers of 1024; B or no unit is bytes. Bit units
//     (kbit, Mbit, Gbit) are accepted for sizes too and divided by 8.
//   - rates: a size per second. "100MB" and "100MB/s" are 100e6 bytes/s;
//     "1Gbit" is 125e6 bytes/s. A bare number is bytes/s.
//   - durations: a number and us, ms, s (also µs, ns, m, h as Go writes
//     them). A bare number is rejected: the unit is never guessed.
//   - percentages: "0.1%" or a bare fraction "0.001".
//
// Numbers may have a fraction ("1.5MB"). Units are case-sensitive where
// case carries meaning (MB bytes, Mbit bits); "mb" is rejected rather than
// guessed. Every parser returns an error naming the bad value; none panics.
// Negative values are rejected except by callers that parse "-1"
// themselves (exception rules use -1 for unlimited).
package units
