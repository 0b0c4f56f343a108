package views

import (
	"strconv"
	"time"
)

// NetworkRow is one side of a link direction as the network controller
// sees the path there.
type NetworkRow struct {
	Link, Direction string
	// Side is "send", the path beyond sluice toward the peer it writes
	// the direction's bytes to, or "receive", the path before it from
	// the peer it reads them from.
	Side  string
	State string // "bottleneck" or "none"
	// Bottleneck is the estimated rate of the path's bottleneck, bytes/s
	// (the highest delivery rate lately); 0 before any delivery.
	Bottleneck int64
	// BaseRTT is the path's lowest round trip; QueueDelay the standing
	// queue on it now.
	BaseRTT, QueueDelay time.Duration
	// LowRate is the rate the Low class is held to, bytes/s; 0 none.
	LowRate int64
}

// NetworkSource shows a network controller's estimates as the network
// view, a Source of the workload manager.
type NetworkSource func() []NetworkRow

// View returns the network view of the current estimates.
func (f NetworkSource) View(time.Time, string) (Table, error) { return Network(f()), nil }

// Network returns the network view: per link, direction and side with
// network control, what sluice believes about the path there.
func Network(rows []NetworkRow) Table {
	t := newTable("link, direction, side, state, bottleneck_bytes_per_second int, base_rtt_ms real, queue_delay_ms real, low_rate_bytes_per_second int")
	ms := func(d time.Duration) string {
		return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 3, 64)
	}
	for _, r := range rows {
		t.Rows = append(t.Rows, []string{r.Link, r.Direction, r.Side, r.State, strconv.FormatInt(r.Bottleneck, 10),
			ms(r.BaseRTT), ms(r.QueueDelay), strconv.FormatInt(r.LowRate, 10)})
	}
	return t
}
