package bench

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

var (
	numberRE = regexp.MustCompile(`-?[0-9]+(\.[0-9]+)?`)
	padRE    = regexp.MustCompile(` *N *`)
	barRE    = regexp.MustCompile(`\|\**\s*`)
)

// shape reduces report text to its layout: numbers become N (with the
// padding that aligns them), histogram bars become |BAR, runs of identical
// lines collapse, and the first line (the program banner) and sluice's
// Round trips section are dropped.
func shape(text string) []string {
	var out []string
	for _, l := range reportLines(text) {
		l = numberRE.ReplaceAllString(l, "N")
		l = padRE.ReplaceAllString(l, " N ")
		l = barRE.ReplaceAllString(l, "|BAR ")
		if len(out) > 0 && out[len(out)-1] == l {
			continue
		}
		out = append(out, l)
	}
	return out
}

// reportLines splits text into lines without the banner and the Round
// trips section.
func reportLines(text string) []string {
	var out []string
	skip := false
	for _, l := range strings.Split(strings.TrimSuffix(text, "\n"), "\n")[1:] {
		switch {
		case l == "Round trips:":
			skip = true
		case skip && l == "":
			skip = false
		case !skip:
			out = append(out, l)
		}
	}
	return out
}

// sampleResult holds the figures of testdata/sysbench-1.0.20-oltp_read_write-run.txt.
func sampleResult(o *Options) *Result {
	r := &Result{
		Workload: o.Workload, Driver: o.Driver, Threads: o.Threads,
		Reads: 3780, Writes: 1063, Other: 542, Transactions: 264,
		IgnoredErrors: 6, RoundTrips: 5391, TotalTime: 2101700 * time.Microsecond,
		Latency: Latency{Min: 410 * time.Microsecond, Avg: 15900 * time.Microsecond, Max: 1004250 * time.Microsecond,
			Percentile: o.Percentile, PercentileValue: 2140 * time.Microsecond, Sum: 4198220 * time.Microsecond},
		Fairness: Fairness{EventsAvg: 132, EventsStddev: 4, TimeAvg: 2099100 * time.Microsecond},
	}
	for _, v := range []float64{0.012, 0.013, 0.013, 0.5, 2} {
		r.log.Record(v)
	}
	return r
}

func TestReportLayoutMatchesSysbench(t *testing.T) {
	tests := []struct {
		file      string
		args      []string
		intervals int
	}{
		{"sysbench-1.0.20-oltp_read_write-run.txt", []string{"--threads=2", "--report-interval=1"}, 2},
		{"sysbench-1.0.20-rate-run.txt", []string{"--rate=100", "--report-interval=1", "--percentile=0"}, 2},
		{"sysbench-1.0.20-histogram-run.txt", []string{"--histogram", "--rand-seed=5"}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			sample, err := os.ReadFile("testdata/" + tt.file)
			if err != nil {
				t.Fatal(err)
			}
			args := append([]string{"oltp_read_write", "run"}, tt.args...)
			o, _, _, err := ParseArgs(args)
			if err != nil {
				t.Fatal(err)
			}
			var b strings.Builder
			writeRunPreamble(&b, &o, o.RandSeed)
			b.WriteString("Threads started!\n\n")
			for i := 1; i <= tt.intervals; i++ {
				iv := Interval{Time: time.Duration(i) * time.Second, Threads: o.Threads, TPS: 1482.83, QPS: 29761.37,
					ReadsPerSec: 20850.44, WritesPerSec: 5938.29, OtherPerSec: 2972.64, LatencyPct: 2300 * time.Microsecond,
					ErrorsPerSec: 4.99, percentile: o.Percentile, rate: o.Rate > 0}
				writeInterval(&b, &iv)
			}
			sampleResult(&o).WriteReport(&b, o.Histogram)
			got, want := shape(b.String()), shape(string(sample))
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Fatalf("layout differs from sysbench's\n--- got\n%s\n--- want\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
		})
	}
}

func TestReportWidthsMatchSysbench(t *testing.T) {
	// With the sample's own figures every line of the final report has the
	// sample's width, so the columns line up exactly as sysbench's.
	sample, err := os.ReadFile("testdata/sysbench-1.0.20-oltp_read_write-run.txt")
	if err != nil {
		t.Fatal(err)
	}
	o := DefaultOptions()
	var b strings.Builder
	b.WriteString("banner\n")
	sampleResult(&o).WriteReport(&b, false)
	got := reportLines(b.String())
	want := reportLines(string(sample))
	want = want[slices.Index(want, "SQL statistics:"):]
	if len(got) != len(want) {
		t.Fatalf("%d lines, want %d", len(got), len(want))
	}
	for i := range got {
		if len(got[i]) != len(want[i]) {
			t.Errorf("line %d is %d wide, want %d:\n got %q\nwant %q", i, len(got[i]), len(want[i]), got[i], want[i])
		}
	}
}

func TestReportFigures(t *testing.T) {
	o := DefaultOptions()
	o.Workload = "oltp_read_write"
	var b strings.Builder
	sampleResult(&o).WriteReport(&b, false)
	// The sample's figures; the rates differ from the sample's in the
	// last digit because sysbench divides by a timer read a moment after
	// the one it prints as total time.
	want := `SQL statistics:
    queries performed:
        read:                            3780
        write:                           1063
        other:                           542
        total:                           5385
    transactions:                        264    (125.61 per sec.)
    queries:                             5385   (2562.21 per sec.)
    ignored errors:                      6      (2.85 per sec.)
    reconnects:                          0      (0.00 per sec.)

General statistics:
    total time:                          2.1017s
    total number of events:              264

Latency (ms):
         min:                                    0.41
         avg:                                   15.90
         max:                                 1004.25
         95th percentile:                        2.14
         sum:                                 4198.22

Threads fairness:
    events (avg/stddev):           132.0000/4.00
    execution time (avg/stddev):   2.0991/0.00

Round trips:
    total:                               5391
    per transaction:                     20.42

`
	if b.String() != want {
		t.Fatalf("report:\n%s\nwant:\n%s", b.String(), want)
	}
}

func TestIntervalLine(t *testing.T) {
	iv := Interval{Time: 1000400 * time.Microsecond, Threads: 8, TPS: 134.6, QPS: 2795.67, ReadsPerSec: 1968.14,
		WritesPerSec: 545.38, OtherPerSec: 282.16, LatencyPct: 2220 * time.Microsecond, ErrorsPerSec: 3.99, percentile: 95}
	var b strings.Builder
	writeInterval(&b, &iv)
	want := "[ 1s ] thds: 8 tps: 134.60 qps: 2795.67 (r/w/o: 1968.14/545.38/282.16) lat (ms,95%): 2.22 err/s: 3.99 reconn/s: 0.00\n"
	if b.String() != want {
		t.Fatalf("got  %q\nwant %q", b.String(), want)
	}
	iv.rate, iv.QueueLength, iv.Concurrency = true, 3, 2
	b.Reset()
	writeInterval(&b, &iv)
	if !strings.HasSuffix(b.String(), "\n[ 1s ] queue length: 3, concurrency: 2\n") {
		t.Fatalf("rate line: %q", b.String())
	}
}

func TestJSONReport(t *testing.T) {
	o := DefaultOptions()
	o.Workload = "oltp_read_write"
	r := sampleResult(&o)
	r.Histogram = newLatencyHistogram()
	for _, us := range []int64{500, 800, 800, 1200, 5000} {
		r.Histogram.RecordValue(us)
	}
	r.Intervals = []Interval{{Time: time.Second, Threads: 1, TPS: 10, rate: true, QueueLength: 2}}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		SQL struct {
			Read         uint64  `json:"read"`
			Transactions uint64  `json:"transactions"`
			TPS          float64 `json:"transactions_per_sec"`
		} `json:"sql_statistics"`
		Latency struct {
			Percentile      int     `json:"percentile"`
			PercentileValue float64 `json:"percentile_value"`
		} `json:"latency_ms"`
		RoundTrips struct {
			Total          uint64  `json:"total"`
			PerTransaction float64 `json:"per_transaction"`
		} `json:"round_trips"`
		Intervals []struct {
			QueueLength *int `json:"queue_length"`
		} `json:"intervals"`
		Histogram struct {
			Count       int64            `json:"count"`
			Percentiles map[string]int64 `json:"percentiles"`
			Buckets     [][3]int64       `json:"buckets"`
			Sysbench    []struct {
				Count uint64 `json:"count"`
			} `json:"sysbench_buckets"`
		} `json:"histogram"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.SQL.Read != 3780 || doc.SQL.Transactions != 264 || doc.SQL.TPS < 125.61 || doc.SQL.TPS > 125.62 {
		t.Fatalf("sql statistics %+v", doc.SQL)
	}
	if doc.Latency.Percentile != 95 || doc.Latency.PercentileValue != 2.14 {
		t.Fatalf("latency %+v", doc.Latency)
	}
	if doc.RoundTrips.Total != 5391 || doc.RoundTrips.PerTransaction < 20.42 || doc.RoundTrips.PerTransaction > 20.43 {
		t.Fatalf("round trips %+v", doc.RoundTrips)
	}
	if len(doc.Intervals) != 1 || doc.Intervals[0].QueueLength == nil || *doc.Intervals[0].QueueLength != 2 {
		t.Fatalf("intervals %s", b)
	}
	if doc.Histogram.Count != 5 || doc.Histogram.Percentiles["50"] != 800 || len(doc.Histogram.Buckets) != 4 || len(doc.Histogram.Sysbench) == 0 {
		t.Fatalf("histogram %+v", doc.Histogram)
	}
}

func TestPredictTPS(t *testing.T) {
	r := Result{Threads: 8, Transactions: 1000, RoundTrips: 20000, Latency: Latency{Avg: 20 * time.Millisecond}}
	// 8 / (20 ms + 20 x 10 ms) = 36.36 TPS, the reference run's shape.
	if got := r.PredictTPS(10 * time.Millisecond); got < 36.3 || got > 36.4 {
		t.Fatalf("PredictTPS = %v", got)
	}
	if got := r.PredictTPS(0); got != 400 {
		t.Fatalf("PredictTPS(0) = %v", got)
	}
	if (&Result{}).PredictTPS(time.Millisecond) != 0 {
		t.Fatal("empty result predicted traffic")
	}
}
