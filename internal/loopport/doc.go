// Package loopport reserves loopback TCP ports for servers that a process
// starts and must name before they listen: test servers, the measurement
// programs' sluice processes, the lab's throwaway PostgreSQL servers.
//
// Why a reservation and not "listen on port 0, note the port, close": the
// kernel hands a port closed that way out again to the next such pick, so
// two picks in a row, or two goroutines picking at once, can get the same
// port (in 20 rounds of 200 picks in a row, 19 rounds repeated a port).
// A Reservation keeps its port bound, with SO_REUSEADDR and never
// listening, until Close:
//   - the kernel gives no other port-0 bind or listen that port meanwhile;
//   - a dial to it is refused, as to any port nothing listens on;
//   - a server that sets SO_REUSEADDR on its listener (every Go listener,
//     PostgreSQL, MariaDB, etcd) can listen on it meanwhile.
//
// Invariants: a Reservation holds one descriptor from Reserve until its
// first Close; Close is safe to call twice and from any goroutine. The
// package holds no state of its own.
package loopport
