package views

import (
	"strconv"
	"time"

	"github.com/sluicelab/sluice/internal/whatif"
)

// WhatIf is SHOW WHATIF and the whatif view: one row per application
// and added RTT (package whatif), in the applications' order and then
// the RTTs'. Milliseconds with three decimals, rates and shares with
// three; predicted_tps is at the same concurrency (whatif.Predict).
func WhatIf(apps []whatif.App, rtts []time.Duration) Table {
	t := newTable("protocol, user, database, application, sessions int, tps real, concurrency real, " +
		"round_trips real, round_trips_p95 real, latency_ms real, network_share real, rtt_ms real, " +
		"predicted_latency_ms real, predicted_tps real")
	for _, a := range apps {
		for _, x := range rtts {
			p := whatif.Predict(a, x)
			t.Rows = append(t.Rows, []string{a.Protocol, a.User, a.Database, a.Application,
				itoa(int64(a.Sessions)), ftoa3(a.TPS), ftoa3(a.Concurrency),
				ftoa3(a.RoundTrips), ftoa3(a.RoundTripsP95), ftoa3(whatif.Millis(a.Latency)),
				ftoa3(a.NetworkShare), ftoa3(whatif.Millis(x)),
				ftoa3(whatif.Millis(p.Latency)), ftoa3(p.TPS)})
		}
	}
	return t
}

func ftoa3(v float64) string { return strconv.FormatFloat(v, 'f', 3, 64) }

// WhatIfSnapshotter is a live what-if table (*whatif.Table). It must be
// safe for concurrent use.
type WhatIfSnapshotter interface {
	Snapshot(now time.Time) []whatif.App
}

// WhatIfSource shows a what-if table as the whatif view, a Source of
// the workload manager's: its parameter is SHOW WHATIF's RTT list, ""
// for whatif.DefaultRTTs.
type WhatIfSource struct{ Table WhatIfSnapshotter }

// View returns the whatif view of the table at now with the RTTs of
// rtts (whatif.ParseRTTs), or ParseRTTs' error.
func (s WhatIfSource) View(now time.Time, rtts string) (Table, error) {
	xs, err := whatif.ParseRTTs(rtts)
	if err != nil {
		return Table{}, err
	}
	return WhatIf(s.Table.Snapshot(now), xs), nil
}
