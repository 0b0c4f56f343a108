package link

import (
	"maps"
	"time"
)

// Defaults applied by Configure and New.
const (
	// DefaultQueueSize is the device FIFO size used when Config.QueueSize
	// is 0: 2 MiB, about what a NIC ring and the kernel's TCP send buffers
	// hold on a busy host.
	DefaultQueueSize = 2 << 20
	// DefaultLowPriorityQueueBytes is the occupancy bound used when
	// Config.LowPriorityQueueBytes is 0.
	DefaultLowPriorityQueueBytes = 64 << 10
	// DefaultLowPriorityBandwidth is the reference system's default for
	// the low_priority_bandwidth setting, in bytes/s. A zero
	// Config.LowPriorityBandwidth means no limit, not this value; the
	// setting's owner applies it.
	DefaultLowPriorityBandwidth = 256_000_000
	// DefaultLowYieldPercent is the share of Capacity, in percent, the
	// Low class may enter the FIFO at while Normal or High bytes are on
	// the link, used when Config.LowYieldPercent is 0.
	DefaultLowYieldPercent = 10
	// NoLowYield, as Config.LowYieldPercent, switches yielding off: the
	// Low class takes all the capacity the other classes leave.
	NoLowYield = 100
	// YieldHold is how long the Low class goes on yielding after the
	// last Normal or High byte admitted has left the FIFO: a request and
	// its response are a few round trips apart, and a class that came
	// back at full rate between them would take the host from them.
	YieldHold = 50 * time.Millisecond
	// DefaultWeight is the weight of a pool missing from Config.Weights.
	DefaultWeight = 1
	// MaxWeight is the largest weight; larger weights are clamped to it.
	MaxWeight = 1 << 16
	// Quantum is the bytes a pool of weight 1 may send per round of the
	// fair scheduler within a class; a pool of weight w gets w*Quantum.
	Quantum = 32 << 10
	// NoLowQueueBound, as Config.LowPriorityQueueBytes, switches the
	// occupancy bound off.
	NoLowQueueBound = -1
)

// Config is a link's configuration. Both directions use it. The zero
// Config is an unlimited link without network control.
type Config struct {
	// Capacity is the bytes/s each direction carries. 0 means unlimited:
	// there is no device FIFO and bytes depart when admitted.
	Capacity int64
	// QueueSize is the size in bytes of the emulated device FIFO (NIC
	// plus kernel TCP buffers), used when Capacity > 0. 0 means
	// DefaultQueueSize.
	QueueSize int64
	// NetworkControl switches the scheduler on. Off, the link is one FIFO
	// that every flow's bytes enter first come first served as space
	// frees, whatever their class: an unmanaged network. On, classes are
	// served in strict priority, pools share a class by weight, and the
	// Low class is held to LowPriorityBandwidth and LowPriorityQueueBytes.
	NetworkControl bool
	// LowPriorityBandwidth is the bytes/s the Low class as a whole may
	// enter the link at, metered by a leaky bucket with 1 ms ticks: per
	// tick at most rate/1000 bytes plus one chunk, plus what the class
	// left unused in the tick before while it was held back (see
	// limit.LeakyBucket). 0 means no rate limit. Applies only with
	// NetworkControl.
	LowPriorityBandwidth int64
	// LowPriorityQueueBytes bounds the Low-class bytes inside the device
	// FIFO, so a Normal or High byte waits behind at most that much Low
	// data. 0 means DefaultLowPriorityQueueBytes; a negative value
	// (NoLowQueueBound) switches the bound off. Applies only with
	// NetworkControl and Capacity > 0.
	LowPriorityQueueBytes int64
	// LowYieldPercent is the share of Capacity, in percent, the Low
	// class may enter the FIFO at while Normal or High bytes are on the
	// link: from the admission of such a byte until YieldHold after it
	// has left the FIFO. The link would let Low take every byte the
	// other classes leave, but moving those bytes costs the host's
	// processors, which the more important statement's server, proxy and
	// client then wait for (see the package doc). 0 means
	// DefaultLowYieldPercent; NoLowYield (100) or more switches yielding
	// off. Applies only with NetworkControl, and a Capacity or a rate
	// set by Link.SetLowRate (then a share of that rate).
	LowYieldPercent int
	// Weights maps a pool name to its weight, its share of a class
	// against the other pools with bytes waiting in that class. Pools not
	// in the map have DefaultWeight; weights below 1 count as 1 and above
	// MaxWeight as MaxWeight.
	Weights map[string]int

	// autoRate is the base of the yield SetLowRate sets for the
	// direction (the lower of its rate and path), bytes/s; 0 none. The
	// direction sets it; a caller's value is ignored.
	autoRate int64
}

// normalized returns c with the defaults applied and a private copy of
// Weights.
func (c Config) normalized() Config {
	if c.Capacity < 0 {
		c.Capacity = 0
	}
	if c.QueueSize <= 0 {
		c.QueueSize = DefaultQueueSize
	}
	if c.LowPriorityBandwidth < 0 {
		c.LowPriorityBandwidth = 0
	}
	switch {
	case c.LowPriorityQueueBytes == 0:
		c.LowPriorityQueueBytes = DefaultLowPriorityQueueBytes
	case c.LowPriorityQueueBytes < 0:
		c.LowPriorityQueueBytes = NoLowQueueBound
	}
	switch {
	case c.LowYieldPercent <= 0:
		c.LowYieldPercent = DefaultLowYieldPercent
	case c.LowYieldPercent > NoLowYield:
		c.LowYieldPercent = NoLowYield
	}
	c.Weights = maps.Clone(c.Weights)
	return c
}

// yieldRate is the bytes/s the Low class may enter at while it yields: a
// share of Capacity, or, with none, of the rate a controller holds the
// Low class to (Link.SetLowRate); 0 when it never yields.
func (c *Config) yieldRate() int64 {
	base := c.Capacity
	if base <= 0 {
		base = c.autoRate
	}
	if !c.NetworkControl || base <= 0 || c.LowYieldPercent >= NoLowYield {
		return 0
	}
	return max(base*int64(c.LowYieldPercent)/100, 1)
}

// weight returns the effective weight of pool.
func (c *Config) weight(pool string) int64 {
	w, ok := c.Weights[pool]
	switch {
	case !ok:
		return DefaultWeight
	case w < 1:
		return 1
	case w > MaxWeight:
		return MaxWeight
	}
	return int64(w)
}

// lowLimited reports whether Low-class Sends go through the scheduler
// even when Capacity is 0.
func (c *Config) lowLimited() bool {
	return c.NetworkControl && c.LowPriorityBandwidth > 0
}
