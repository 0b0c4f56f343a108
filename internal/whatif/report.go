package whatif

import "time"

// Report is the JSON shape of GET /api/whatif: every application of a
// Snapshot with its predictions at each RTT. Durations are float
// milliseconds.
type Report struct {
	WindowSeconds float64     `json:"window_seconds"`
	RTTsMs        []float64   `json:"rtts_ms"`
	Applications  []ReportApp `json:"applications"`
}

// ReportApp is one App in a Report.
type ReportApp struct {
	Protocol      string             `json:"protocol"`
	User          string             `json:"user"`
	Database      string             `json:"database"`
	Application   string             `json:"application"`
	Sessions      int                `json:"sessions"`
	Transactions  int64              `json:"transactions"`
	TPS           float64            `json:"tps"`
	Concurrency   float64            `json:"concurrency"`
	RoundTrips    float64            `json:"round_trips"`
	RoundTripsP95 float64            `json:"round_trips_p95"`
	LatencyMs     float64            `json:"latency_ms"`
	CycleMs       float64            `json:"cycle_ms"`
	ServerMs      float64            `json:"server_ms"`
	ClientMs      float64            `json:"client_ms"`
	NetworkMs     float64            `json:"network_ms"`
	ClientRTTMs   float64            `json:"client_rtt_ms"`
	UpstreamRTTMs float64            `json:"upstream_rtt_ms"`
	NetworkShare  float64            `json:"network_share"`
	Predictions   []ReportPrediction `json:"predictions,omitempty"`
}

// ReportPrediction is one Prediction in a Report.
type ReportPrediction struct {
	RTTMs     float64 `json:"rtt_ms"`
	LatencyMs float64 `json:"latency_ms"`
	TPS       float64 `json:"tps"`
}

// NewReport builds the Report of apps over window at rtts.
func NewReport(apps []App, rtts []time.Duration, window time.Duration) Report {
	r := Report{WindowSeconds: window.Seconds(), RTTsMs: make([]float64, len(rtts)), Applications: make([]ReportApp, 0, len(apps))}
	for i, x := range rtts {
		r.RTTsMs[i] = Millis(x)
	}
	for _, a := range apps {
		r.Applications = append(r.Applications, NewReportApp(a, rtts))
	}
	return r
}

// NewReportApp returns a as a Report shows it, with its predictions at
// rtts (none for an empty rtts).
func NewReportApp(a App, rtts []time.Duration) ReportApp {
	ra := ReportApp{
		Protocol: a.Protocol, User: a.User, Database: a.Database, Application: a.Application,
		Sessions: a.Sessions, Transactions: a.Transactions, TPS: a.TPS, Concurrency: a.Concurrency,
		RoundTrips: a.RoundTrips, RoundTripsP95: a.RoundTripsP95,
		LatencyMs: Millis(a.Latency), CycleMs: Millis(a.Cycle), ServerMs: Millis(a.ServerTime),
		ClientMs: Millis(a.ClientTime), NetworkMs: Millis(a.NetworkWait),
		ClientRTTMs: Millis(a.ClientRTT), UpstreamRTTMs: Millis(a.UpstreamRTT), NetworkShare: a.NetworkShare,
	}
	if len(rtts) > 0 {
		ra.Predictions = make([]ReportPrediction, len(rtts))
	}
	for i, x := range rtts {
		p := Predict(a, x)
		ra.Predictions[i] = ReportPrediction{RTTMs: Millis(x), LatencyMs: Millis(p.Latency), TPS: p.TPS}
	}
	return ra
}
