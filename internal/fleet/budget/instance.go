package budget

import "time"

// Modes of an instance's Low class under the shared budget.
const (
	// ModeOff: the budget is 0; the links run at low_priority_bandwidth.
	ModeOff = "off"
	// ModeWaiting: no grant yet; the class is held at MinRate.
	ModeWaiting = "waiting"
	// ModeGrant: the class runs at its grant.
	ModeGrant = "grant"
	// ModeFallback: the last grant expired (the allocator or etcd is
	// gone); the class runs at an equal share of the budget.
	ModeFallback = "fallback"
)

// MinRate is the rate in bytes/s a link's Low class is held to while its
// instance's share is 0: one chunk goes through and the rest waits (0
// would mean no limit). What waits shows as demand.
const MinRate = 1

// Effective returns the rate (bytes/s) this instance's Low class may use
// at now, and the mode it is in: the grant g while it is valid (never
// above budget); once a grant has expired, an equal share of budget over
// the live instances last seen (live, at least 1); with no grant ever,
// 0. budget <= 0 is ModeOff with rate 0.
func Effective(now time.Time, g Grant, budget int64, live int) (rate int64, mode string) {
	switch {
	case budget <= 0:
		return 0, ModeOff
	case g.Valid(now):
		return min(g.Rate, budget), ModeGrant
	case g.Version > 0:
		return budget / int64(max(live, 1)), ModeFallback
	}
	return 0, ModeWaiting
}

// Caps splits rate over links by their wants (Fill: max-min, the rest
// equally), with every share at least MinRate. The result is keyed by
// link name; nil when mode is ModeOff.
func Caps(mode string, rate int64, links []string, wants []int64) map[string]int64 {
	if mode == ModeOff {
		return nil
	}
	out := make(map[string]int64, len(links))
	shares := Fill(rate, wants)
	for i, name := range links {
		out[name] = max(shares[i], MinRate)
	}
	return out
}
