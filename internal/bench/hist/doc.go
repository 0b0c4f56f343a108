// Package hist is the latency histogram sysbench 1.0 reports percentiles
// from.
//
// sysbench does not keep exact latencies: it counts events in 1024
// logarithmic buckets spanning 0.001 ms to 100 000 ms and reports a
// percentile as the value of the bucket where the running count first
// reaches the rank. A percentile printed by sysbench is therefore always
// one of 1024 bucket values (0.80, 1.96, 21.89, ...), and so is one printed
// from a Log. Values below the range land in the first bucket, values above
// it in the last.
//
// A Log is a plain value (an array and a count): it is not safe for
// concurrent use, and the caller guards it. Merging two Logs adds their
// counts, so per-worker histograms merge into the run's histogram exactly.
package hist
