// Command sluice is a network workload manager and latency lab for
// PostgreSQL and MySQL.
//
// It owns the command line and the wiring of `sluice serve`: it reads the
// configuration (internal/config), builds the workload manager
// (internal/wlm) and hands it to the proxy (internal/proxy) as its
// binding policy, starts one protocol front end per route, the admin
// console and the HTTP API, and shuts them down in order on SIGINT or
// SIGTERM: stop accepting, let sessions finish for the grace period, then
// close. SIGHUP is logged at Warn and otherwise ignored: there is no live
// reload, and a reload must not end the sessions. `sluice bench` and `sluice lab` hand their arguments to
// internal/bench and internal/lab.
//
// Exit codes: 0 success, 1 runtime failure, 2 bad command line or
// configuration (the message names the file, key and bad value).
package main
