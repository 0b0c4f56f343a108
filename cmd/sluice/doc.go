// Command sluice is a network workload manager and latency lab for
// PostgreSQL and MySQL.
//
// It owns the command line and the process of `sluice serve`: it reads
// the configuration (internal/config) and the environment's secrets
// (SLUICE_ADMIN_PASSWORD, SLUICE_HTTP_TOKEN), pins CPUs and holds the CPU
// latency request, has internal/stack build the whole stack (workload
// manager, proxy, front ends, admin console, HTTP API), and on SIGINT or
// SIGTERM stops it: stop accepting, let sessions finish for the grace
// period, then close. SIGHUP re-reads --config with the flags and
// environment of the start and reloads it (stack.Reload): the outcome is
// logged at INFO, a refusal at ERROR naming the file, key and value, and
// the sessions of unchanged routes go on. `sluice reload` asks a running
// serve to do the same through its HTTP API (POST /api/reload) or its
// admin console (RELOAD), and exits 1 on a refusal. `sluice bench` and
// `sluice lab` hand their arguments to internal/bench and internal/lab.
//
// `sluice version` and --version describe the binary from the Go
// toolchain's build information and the release stamps of
// scripts/release (version.go); the HTTP API reports the same version.
// The hidden `sluice gen-docs` writes the man pages and shell completion
// scripts the release ships.
//
// Exit codes: 0 success, 1 runtime failure, 2 bad command line or
// configuration (the message names the file, key and bad value).
package main
