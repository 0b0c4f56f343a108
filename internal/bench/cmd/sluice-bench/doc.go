// Command sluice-bench is `sluice bench` as a binary of its own: the
// sysbench-compatible benchmark without the rest of sluice, used by
// scripts/bench-vs-sysbench to compare it with sysbench when cmd/sluice is
// not at hand. Its arguments are those of `sluice bench`
// (see bench.Main); it stops a run on SIGINT or SIGTERM and exits with
// Main's status.
package main
