// Package cpuset pins a whole process to a set of CPUs, as taskset -a
// does from outside, and reads and writes CPU lists in the kernel's
// notation ("0-3,6", as in taskset -c and cpuset cgroups).
//
// Why a latency lab needs it: a request behind an emulated delay crosses
// the proxy twice, and each crossing wakes one of the proxy's threads.
// Left free, the kernel wakes those threads on whichever CPU it picks,
// often the one the database backend or the client is about to run on,
// and the three processes' wake-ups get in each other's way; the time
// that costs lands on top of the emulated round trip. Measured on a
// 2-CPU machine (pgbench -S through a 1 ms delay each way), pinning the
// proxy to one CPU cut the error of the added round trip from about 0.13
// to 0.08-0.11 ms. HAProxy's cpu-map and nginx's worker_cpu_affinity do
// the same for throughput.
//
// A process's affinity is per thread. Pin sets it on every thread the
// process has, repeating until a pass finds no thread it has not set:
// threads made later are cloned from pinned ones and inherit the set.
// The Go runtime reads the CPU count once at start-up, so Pin does not
// change runtime.NumCPU; callers set GOMAXPROCS themselves.
//
// Invariants: Parse never panics, and what Format writes parses back to
// the same set; Pin changes nothing when the set is empty or names a CPU the
// process may not use.
package cpuset
