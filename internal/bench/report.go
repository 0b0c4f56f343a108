package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/sluicelab/sluice/internal/bench/hist"
)

// Result carries every figure of a run's report.
type Result struct {
	Workload string
	Driver   string
	Threads  int

	Reads, Writes, Other uint64 // statements by Counter
	Transactions         uint64 // completed events
	IgnoredErrors        uint64
	Reconnects           uint64
	// RoundTrips counts request/response exchanges with the server: one
	// per statement execution (BEGIN and COMMIT included, a prepared
	// statement's execution is one), plus ROLLBACKs after ignored errors.
	RoundTrips uint64

	TotalTime time.Duration // from the end of warm-up to the last worker's exit
	Latency   Latency
	Fairness  Fairness

	// Intervals are the --report-interval lines, in order.
	Intervals []Interval
	// Histogram is the merge of the workers' latency histograms, in
	// microseconds (1 µs to 1 h, 3 significant digits).
	Histogram *hdrhistogram.Histogram
	// QueueFull is set when --rate arrivals overflowed the event queue and
	// the run ended early, as sysbench does.
	QueueFull bool

	log hist.Log // sysbench's bucketed histogram, for --histogram
}

// Latency summarises event latencies; in --rate mode they include the
// time an arrival queued for a worker.
type Latency struct {
	Min, Avg, Max time.Duration
	// Percentile is --percentile (0 = disabled); PercentileValue is that
	// percentile, rounded to sysbench's histogram bucket.
	Percentile      int
	PercentileValue time.Duration
	Sum             time.Duration
}

// Fairness is how evenly the workers shared the run.
type Fairness struct {
	EventsAvg, EventsStddev float64       // events per worker
	TimeAvg, TimeStddev     time.Duration // summed event latency per worker
}

// Interval is one --report-interval line.
type Interval struct {
	Time             time.Duration // since the start of the measured run
	Threads          int           // workers still running
	TPS, QPS         float64
	ReadsPerSec      float64
	WritesPerSec     float64
	OtherPerSec      float64
	LatencyPct       time.Duration // the --percentile over the interval, bucketed
	ErrorsPerSec     float64
	ReconnectsPerSec float64
	QueueLength      int // --rate only
	Concurrency      int // --rate only: events in progress

	percentile int  // --percentile the line names
	rate       bool // --rate was set: print the queue line
}

// Queries returns reads + writes + other.
func (r *Result) Queries() uint64 { return r.Reads + r.Writes + r.Other }

func perSec(n uint64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// TPS returns transactions per second of the measured run.
func (r *Result) TPS() float64 { return perSec(r.Transactions, r.TotalTime) }

// QPS returns queries per second of the measured run.
func (r *Result) QPS() float64 { return perSec(r.Queries(), r.TotalTime) }

// RoundTripsPerTransaction returns RoundTrips / Transactions (0 when no
// transaction completed).
func (r *Result) RoundTripsPerTransaction() float64 {
	if r.Transactions == 0 {
		return 0
	}
	return float64(r.RoundTrips) / float64(r.Transactions)
}

// PredictTPS predicts the throughput of the same run over a network that
// adds extraRTT to every round trip: Threads / (average latency + round
// trips per transaction x extraRTT). It returns 0 when nothing completed.
func (r *Result) PredictTPS(extraRTT time.Duration) float64 {
	if r.Transactions == 0 {
		return 0
	}
	per := r.Latency.Avg.Seconds() + r.RoundTripsPerTransaction()*extraRTT.Seconds()
	if per <= 0 {
		return 0
	}
	return float64(r.Threads) / per
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// header is the first line of every command's output.
func header(driver string) string {
	lib := "go-sql-driver/mysql"
	if driver == DriverPgSQL {
		lib = "pgx v5"
	}
	return fmt.Sprintf("sluice bench (sysbench 1.0.20 compatible, using %s)\n\n", lib)
}

// writeRunPreamble prints what sysbench prints before the workers start.
func writeRunPreamble(w io.Writer, o *Options, seed int64) {
	var b strings.Builder
	b.WriteString(header(o.Driver))
	b.WriteString("Running the test with following options:\n")
	fmt.Fprintf(&b, "Number of threads: %d\n", o.Threads)
	if o.Rate > 0 {
		fmt.Fprintf(&b, "Target transaction rate: %d/sec\n", o.Rate)
	}
	if o.ReportInterval > 0 {
		fmt.Fprintf(&b, "Report intermediate results every %s second(s)\n", seconds(o.ReportInterval))
	}
	if o.WarmupTime > 0 {
		fmt.Fprintf(&b, "Warming up for %s second(s)\n", seconds(o.WarmupTime))
	}
	if o.RandSeed != 0 {
		fmt.Fprintf(&b, "Initializing random number generator from seed (%d).\n\n", seed)
	} else {
		b.WriteString("Initializing random number generator from current time\n\n")
	}
	b.WriteString("\n")
	b.WriteString("Initializing worker threads...\n\n")
	io.WriteString(w, b.String())
}

// seconds prints d as sysbench prints its integer-second options, with a
// fraction only when there is one.
func seconds(d time.Duration) string {
	if d%time.Second == 0 {
		return fmt.Sprint(int64(d / time.Second))
	}
	return fmt.Sprint(d.Seconds())
}

// writeInterval prints one --report-interval line (two with --rate).
func writeInterval(w io.Writer, iv *Interval) {
	t := iv.Time.Seconds()
	fmt.Fprintf(w, "[ %.0fs ] thds: %d tps: %4.2f qps: %4.2f (r/w/o: %4.2f/%4.2f/%4.2f) lat (ms,%d%%): %4.2f err/s: %4.2f reconn/s: %4.2f\n",
		t, iv.Threads, iv.TPS, iv.QPS, iv.ReadsPerSec, iv.WritesPerSec, iv.OtherPerSec,
		iv.percentile, ms(iv.LatencyPct), iv.ErrorsPerSec, iv.ReconnectsPerSec)
	if iv.rate {
		fmt.Fprintf(w, "[ %.0fs ] queue length: %d, concurrency: %d\n", t, iv.QueueLength, iv.Concurrency)
	}
}

// WriteReport prints r in sysbench's final-report layout, followed by the
// round-trip section sysbench lacks. With histogram set it first prints
// the latency histogram as sysbench --histogram does.
func (r *Result) WriteReport(w io.Writer, histogram bool) error {
	var b strings.Builder
	if histogram {
		b.WriteString("Latency histogram (values are in milliseconds)\n")
		r.log.WriteTo(&b)
		b.WriteString(" \n")
	}
	d := r.TotalTime
	q := r.Queries()
	b.WriteString("SQL statistics:\n")
	b.WriteString("    queries performed:\n")
	fmt.Fprintf(&b, "        read:                            %d\n", r.Reads)
	fmt.Fprintf(&b, "        write:                           %d\n", r.Writes)
	fmt.Fprintf(&b, "        other:                           %d\n", r.Other)
	fmt.Fprintf(&b, "        total:                           %d\n", q)
	fmt.Fprintf(&b, "    transactions:                        %-6d (%.2f per sec.)\n", r.Transactions, perSec(r.Transactions, d))
	fmt.Fprintf(&b, "    queries:                             %-6d (%.2f per sec.)\n", q, perSec(q, d))
	fmt.Fprintf(&b, "    ignored errors:                      %-6d (%.2f per sec.)\n", r.IgnoredErrors, perSec(r.IgnoredErrors, d))
	fmt.Fprintf(&b, "    reconnects:                          %-6d (%.2f per sec.)\n", r.Reconnects, perSec(r.Reconnects, d))
	b.WriteString("\n")
	b.WriteString("General statistics:\n")
	fmt.Fprintf(&b, "    total time:                          %.4fs\n", d.Seconds())
	fmt.Fprintf(&b, "    total number of events:              %d\n", r.Transactions)
	b.WriteString("\n")
	b.WriteString("Latency (ms):\n")
	fmt.Fprintf(&b, "         min:                              %10.2f\n", ms(r.Latency.Min))
	fmt.Fprintf(&b, "         avg:                              %10.2f\n", ms(r.Latency.Avg))
	fmt.Fprintf(&b, "         max:                              %10.2f\n", ms(r.Latency.Max))
	if r.Latency.Percentile > 0 {
		fmt.Fprintf(&b, "        %3dth percentile:                  %10.2f\n", r.Latency.Percentile, ms(r.Latency.PercentileValue))
	} else {
		b.WriteString("         percentile stats:               disabled\n")
	}
	fmt.Fprintf(&b, "         sum:                              %10.2f\n", ms(r.Latency.Sum))
	b.WriteString("\n")
	b.WriteString("Threads fairness:\n")
	fmt.Fprintf(&b, "    events (avg/stddev):           %.4f/%3.2f\n", r.Fairness.EventsAvg, r.Fairness.EventsStddev)
	fmt.Fprintf(&b, "    execution time (avg/stddev):   %.4f/%3.2f\n", r.Fairness.TimeAvg.Seconds(), r.Fairness.TimeStddev.Seconds())
	b.WriteString("\n")
	b.WriteString("Round trips:\n")
	fmt.Fprintf(&b, "    total:                               %d\n", r.RoundTrips)
	fmt.Fprintf(&b, "    per transaction:                     %.2f\n", r.RoundTripsPerTransaction())
	b.WriteString("\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// jsonReport is the --format=json document. Times are milliseconds unless
// the field name says otherwise.
type jsonReport struct {
	Workload string `json:"workload"`
	Driver   string `json:"driver"`
	Threads  int    `json:"threads"`
	SQL      struct {
		Read          uint64  `json:"read"`
		Write         uint64  `json:"write"`
		Other         uint64  `json:"other"`
		Total         uint64  `json:"total"`
		Transactions  uint64  `json:"transactions"`
		TPS           float64 `json:"transactions_per_sec"`
		Queries       uint64  `json:"queries"`
		QPS           float64 `json:"queries_per_sec"`
		IgnoredErrors uint64  `json:"ignored_errors"`
		ErrorsPerSec  float64 `json:"ignored_errors_per_sec"`
		Reconnects    uint64  `json:"reconnects"`
		ReconnPerSec  float64 `json:"reconnects_per_sec"`
	} `json:"sql_statistics"`
	General struct {
		TotalTimeSec float64 `json:"total_time_sec"`
		Events       uint64  `json:"total_events"`
	} `json:"general_statistics"`
	Latency struct {
		Min             float64 `json:"min"`
		Avg             float64 `json:"avg"`
		Max             float64 `json:"max"`
		Percentile      int     `json:"percentile"`
		PercentileValue float64 `json:"percentile_value"`
		Sum             float64 `json:"sum"`
	} `json:"latency_ms"`
	Fairness struct {
		EventsAvg    float64 `json:"events_avg"`
		EventsStddev float64 `json:"events_stddev"`
		TimeAvgSec   float64 `json:"execution_time_avg_sec"`
		TimeStdSec   float64 `json:"execution_time_stddev_sec"`
	} `json:"threads_fairness"`
	RoundTrips struct {
		Total          uint64  `json:"total"`
		PerTransaction float64 `json:"per_transaction"`
	} `json:"round_trips"`
	Intervals []jsonInterval `json:"intervals"`
	Histogram jsonHistogram  `json:"histogram"`
	QueueFull bool           `json:"queue_full,omitempty"`
}

type jsonInterval struct {
	TimeSec     float64 `json:"time_sec"`
	Threads     int     `json:"threads"`
	TPS         float64 `json:"tps"`
	QPS         float64 `json:"qps"`
	Reads       float64 `json:"reads_per_sec"`
	Writes      float64 `json:"writes_per_sec"`
	Other       float64 `json:"other_per_sec"`
	LatencyPct  float64 `json:"latency_pct_ms"`
	Errors      float64 `json:"errors_per_sec"`
	Reconnects  float64 `json:"reconnects_per_sec"`
	QueueLength *int    `json:"queue_length,omitempty"`
	Concurrency *int    `json:"concurrency,omitempty"`
}

type jsonHistogram struct {
	Unit        string             `json:"unit"`
	Count       int64              `json:"count"`
	Min         int64              `json:"min"`
	Max         int64              `json:"max"`
	Mean        float64            `json:"mean"`
	StdDev      float64            `json:"stddev"`
	Percentiles map[string]int64   `json:"percentiles"`
	Buckets     [][3]int64         `json:"buckets"`
	Sysbench    []jsonSysbenchBins `json:"sysbench_buckets"`
}

// jsonSysbenchBins is one non-empty bucket of sysbench's own histogram.
type jsonSysbenchBins struct {
	ValueMS float64 `json:"value_ms"`
	Count   uint64  `json:"count"`
}

// MarshalJSON encodes the --format=json document.
func (r Result) MarshalJSON() ([]byte, error) {
	var j jsonReport
	d := r.TotalTime
	j.Workload, j.Driver, j.Threads = r.Workload, r.Driver, r.Threads
	q := r.Queries()
	j.SQL.Read, j.SQL.Write, j.SQL.Other, j.SQL.Total = r.Reads, r.Writes, r.Other, q
	j.SQL.Transactions, j.SQL.TPS = r.Transactions, perSec(r.Transactions, d)
	j.SQL.Queries, j.SQL.QPS = q, perSec(q, d)
	j.SQL.IgnoredErrors, j.SQL.ErrorsPerSec = r.IgnoredErrors, perSec(r.IgnoredErrors, d)
	j.SQL.Reconnects, j.SQL.ReconnPerSec = r.Reconnects, perSec(r.Reconnects, d)
	j.General.TotalTimeSec, j.General.Events = d.Seconds(), r.Transactions
	j.Latency.Min, j.Latency.Avg, j.Latency.Max = ms(r.Latency.Min), ms(r.Latency.Avg), ms(r.Latency.Max)
	j.Latency.Percentile, j.Latency.PercentileValue = r.Latency.Percentile, ms(r.Latency.PercentileValue)
	j.Latency.Sum = ms(r.Latency.Sum)
	j.Fairness.EventsAvg, j.Fairness.EventsStddev = r.Fairness.EventsAvg, r.Fairness.EventsStddev
	j.Fairness.TimeAvgSec, j.Fairness.TimeStdSec = r.Fairness.TimeAvg.Seconds(), r.Fairness.TimeStddev.Seconds()
	j.RoundTrips.Total, j.RoundTrips.PerTransaction = r.RoundTrips, r.RoundTripsPerTransaction()
	j.Intervals = []jsonInterval{}
	for _, iv := range r.Intervals {
		ji := jsonInterval{
			TimeSec: iv.Time.Seconds(), Threads: iv.Threads, TPS: iv.TPS, QPS: iv.QPS,
			Reads: iv.ReadsPerSec, Writes: iv.WritesPerSec, Other: iv.OtherPerSec,
			LatencyPct: ms(iv.LatencyPct), Errors: iv.ErrorsPerSec, Reconnects: iv.ReconnectsPerSec,
		}
		if iv.rate {
			ql, cc := iv.QueueLength, iv.Concurrency
			ji.QueueLength, ji.Concurrency = &ql, &cc
		}
		j.Intervals = append(j.Intervals, ji)
	}
	j.Histogram = histogramJSON(r.Histogram)
	j.Histogram.Sysbench = []jsonSysbenchBins{}
	for _, bk := range r.log.Buckets() {
		j.Histogram.Sysbench = append(j.Histogram.Sysbench, jsonSysbenchBins{ValueMS: bk.ValueMS, Count: bk.Count})
	}
	j.QueueFull = r.QueueFull
	return json.Marshal(&j)
}

// histogramJSON summarises an HdrHistogram in microseconds: totals,
// percentiles and the non-empty buckets as [from, to, count].
func histogramJSON(h *hdrhistogram.Histogram) jsonHistogram {
	j := jsonHistogram{Unit: "us", Percentiles: map[string]int64{}, Buckets: [][3]int64{}}
	if h == nil || h.TotalCount() == 0 {
		return j
	}
	j.Count, j.Min, j.Max = h.TotalCount(), h.Min(), h.Max()
	j.Mean, j.StdDev = h.Mean(), h.StdDev()
	if math.IsNaN(j.StdDev) {
		j.StdDev = 0
	}
	for _, p := range []float64{50, 90, 95, 99, 99.9, 99.99, 100} {
		j.Percentiles[fmt.Sprint(p)] = h.ValueAtQuantile(p)
	}
	for _, bar := range h.Distribution() {
		if bar.Count > 0 {
			j.Buckets = append(j.Buckets, [3]int64{bar.From, bar.To, bar.Count})
		}
	}
	return j
}

// newLatencyHistogram returns an empty per-worker histogram: 1 µs to 1 h
// at 3 significant digits.
func newLatencyHistogram() *hdrhistogram.Histogram {
	return hdrhistogram.New(1, int64(time.Hour/time.Microsecond), 3)
}
