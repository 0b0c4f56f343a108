// Package cpulatency holds a PM QoS CPU latency request: a promise from
// the kernel that no CPU enters an idle state whose exit takes longer than
// a given bound, for as long as the request is held.
//
// Why a latency lab needs it: an emulated delay makes both ends of a
// connection idle for the delay, and an idle CPU may sink into a state
// that takes tens to hundreds of microseconds to leave (on a virtual
// machine, a halted vCPU the host must reschedule). That exit latency is
// paid once per wake-up, on top of the delay, and shows as error in every
// emulated round trip. tc netem has the same problem; tools that measure
// latency (cyclictest, tuned's latency-performance profile) hold this
// request for it. A bound of 0 keeps idle CPUs polling: wake-ups are
// fastest and idle CPUs burn power.
//
// The request is the kernel's /dev/cpu_dma_latency interface: a 32-bit
// bound in microseconds written to the open device, in force until the
// file is closed. The kernel honours the lowest bound any process holds.
// Opening the device needs root (or CAP_SYS_ADMIN-equivalent access to
// the device node).
//
// Invariants: a Request holds exactly one open descriptor from Hold until
// its first Close; Close is safe to call twice and from any goroutine.
package cpulatency
