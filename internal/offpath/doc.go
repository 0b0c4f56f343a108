// Package offpath runs CPU-bound work that is not on the data path (the
// admin console's SQL over the views) so that it never takes the CPU the
// relays need.
//
// sluice runs with GOMAXPROCS set to the CPUs the proxy may use (half
// the machine by default: one P on a 2-core host). A console query that
// computes for seconds in SQLite would hold one of those Ps, and the Go
// scheduler preempts it only every 10 ms: every relay goroutine on that
// P would wait up to 10 ms per wake-up, and a data route that made
// 17,000 transactions per second would make 100. A Runner prevents that:
//
//   - One piece of work runs at a time (Options.Concurrency, default 1);
//     others wait in FIFO order, at most Options.MaxWaiting of them
//     (default 64; beyond that Do fails at once with ErrBusy), each for
//     as long as its ctx allows.
//   - While work runs, GOMAXPROCS is one higher per running piece, so the
//     Ps the relays had are still theirs; it is set back when the work
//     ends.
//   - The work runs on an OS thread of its own under the SCHED_IDLE
//     policy: it runs only on a CPU that nothing else wants, and any
//     other thread that wakes takes the CPU from it. Where the kernel
//     refuses SCHED_IDLE, the thread's nice value is raised instead
//     (Options.Nice, default 19: about a seventieth of a default
//     thread's share when the CPUs are contended). The thread is
//     discarded when the work returns, never given back to the runtime's
//     pool with its lowered priority. Where neither can be set, the work
//     runs at the thread's priority and the extra P still keeps the
//     relays' Ps free.
//
// Runner is safe for concurrent use. It holds no lock while work runs.
// GOMAXPROCS is the process's, so its changes are serialised by one
// package-level mutex (the one state this package keeps outside a
// Runner), taken and released around each change and nested in no other
// lock; each running piece adds one P to the value in force and takes
// it back, so several Runners in one process compose.
package offpath
