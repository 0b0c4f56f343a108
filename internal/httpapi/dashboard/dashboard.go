package dashboard

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/link"
	"github.com/sluicelab/sluice/internal/opt"
	"github.com/sluicelab/sluice/internal/ring"
	"github.com/sluicelab/sluice/internal/session"
	"github.com/sluicelab/sluice/internal/wlm"
	"github.com/sluicelab/sluice/internal/wlm/views"
)

// Defaults.
const (
	DefaultInterval = time.Second
	DefaultKeep     = 300 // five minutes at one sample a second
	DefaultTop      = 10
)

//go:embed static
var static embed.FS

// Catalog is the catalog service: the current catalog.
type Catalog interface{ Catalog() *wlm.Catalog }

// Runtime is the binding runtime: the links and the sessions.
type Runtime interface {
	Link(name string) *link.Link
	Registry() *session.Registry
}

// Tables reads views by name (views.Names).
type Tables interface {
	ViewTables(names []string) map[string]views.Table
}

// Options configure a Dashboard.
type Options struct {
	// Catalog, Runtime and Views are the workload manager's roles
	// (*wlm.Service, *wlm.Runtime, *wlm.Views). Required. The rules and
	// links lists are the views' rows, so that the page shows every
	// column the console does.
	Catalog Catalog
	Runtime Runtime
	Views   Tables
	// Clock times the samples; nil means clock.Real.
	Clock clock.Clock
	// Interval is the time between samples; 0 means DefaultInterval.
	Interval time.Duration
	// Keep is how many samples the series hold; 0 means DefaultKeep.
	Keep int
	// Top is how many running statements a snapshot lists; 0 means
	// DefaultTop.
	Top int
	// Version is shown in the page header; "" means "dev".
	Version string
}

// Dashboard samples sluice's traffic into short time series and serves a
// page that shows them. It is safe for concurrent use.
type Dashboard struct {
	cat      Catalog
	rt       Runtime
	views    Tables
	clk      clock.Clock
	interval time.Duration
	keep     int
	top      int
	version  string
	started  time.Time
	files    fs.FS // the page's files

	mu sync.Mutex
	// The fields below are guarded by mu.
	samples   ring.Ring[sample]  // the last keep samples
	prev      *totals            // counters at the last sample; nil before the first
	stmtBytes map[uint64]int64   // running statement id -> bytes at the last sample
	stmtRate  map[uint64]float64 // running statement id -> bytes/s over the last interval
}

// sample is the traffic over one interval.
type sample struct {
	t       time.Time
	classes [link.NumClasses]float64 // bytes/s, both directions, all links; by class
	pools   map[string]float64       // bytes/s by pool
	delay   [link.NumClasses]float64 // mean queue delay in seconds; NaN when nothing was sent
	links   map[string]float64       // bytes/s by link
}

// totals are cumulative counters at one time.
type totals struct {
	t          time.Time
	classes    [link.NumClasses]int64
	pools      map[string]int64
	links      map[string]int64
	delaySum   [link.NumClasses]time.Duration
	delayCount [link.NumClasses]int64
}

// New returns a Dashboard with no samples yet; Run (or Sample) takes them.
func New(o Options) (*Dashboard, error) {
	if o.Catalog == nil || o.Runtime == nil || o.Views == nil {
		return nil, errors.New("dashboard: Options.Catalog, Runtime and Views are required")
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	o.Interval = opt.Positive(o.Interval, DefaultInterval)
	o.Keep = opt.Positive(o.Keep, DefaultKeep)
	o.Top = opt.Positive(o.Top, DefaultTop)
	if o.Version == "" {
		o.Version = "dev"
	}
	files, err := fs.Sub(static, "static")
	if err != nil {
		return nil, fmt.Errorf("dashboard: %w", err)
	}
	return &Dashboard{
		cat: o.Catalog, rt: o.Runtime, views: o.Views, clk: o.Clock, interval: o.Interval, keep: o.Keep, top: o.Top, version: o.Version,
		samples:   ring.Ring[sample]{Size: o.Keep},
		started:   o.Clock.Now(),
		files:     files,
		stmtBytes: map[uint64]int64{},
		stmtRate:  map[uint64]float64{},
	}, nil
}

// Run samples every interval until ctx ends, then returns ctx.Err().
func (d *Dashboard) Run(ctx context.Context) error {
	for {
		d.Sample(d.clk.Now())
		if err := clock.Sleep(ctx, d.clk, d.interval); err != nil {
			return err
		}
	}
}

func (d *Dashboard) collect(now time.Time) *totals {
	t := &totals{t: now, pools: map[string]int64{}, links: map[string]int64{}}
	cat := d.cat.Catalog()
	for name := range cat.Links {
		l := d.rt.Link(name)
		if l == nil {
			continue
		}
		st := l.Stats()
		for _, ds := range st.Directions {
			for c := range ds.Classes {
				cs := ds.Classes[c]
				t.classes[c] += cs.Bytes
				t.links[name] += cs.Bytes
				t.delaySum[c] += cs.Delay.Sum
				t.delayCount[c] += cs.Delay.Count()
			}
			for _, ps := range ds.Pools {
				for c := range ps.Classes {
					t.pools[ps.Pool] += ps.Classes[c].Bytes
				}
			}
		}
	}
	return t
}

// rate returns the bytes/s between two counter values; a counter that
// went back (a link made anew) counts from 0.
func rate(cur, prev int64, dt float64) float64 {
	if cur < prev {
		prev = 0
	}
	return float64(cur-prev) / dt
}

// Sample takes one sample at now: the rates since the previous sample,
// and each running statement's bytes/s. The first call only records the
// counters. Run calls it; tests call it to step in virtual time.
func (d *Dashboard) Sample(now time.Time) {
	cur := d.collect(now)
	active := d.rt.Registry().Active()
	d.mu.Lock()
	defer d.mu.Unlock()
	prev := d.prev
	d.prev = cur
	var dt float64
	if prev != nil {
		dt = now.Sub(prev.t).Seconds()
	}
	// Statement rates.
	bytes := make(map[uint64]int64, len(active))
	rates := make(map[uint64]float64, len(active))
	for _, st := range active {
		b := st.Bytes()
		bytes[st.ID] = b
		if last, ok := d.stmtBytes[st.ID]; ok && dt > 0 {
			rates[st.ID] = rate(b, last, dt)
		} else if age := now.Sub(st.Started).Seconds(); age > 0 {
			rates[st.ID] = float64(b) / age
		}
	}
	d.stmtBytes, d.stmtRate = bytes, rates
	if prev == nil || dt <= 0 {
		return
	}
	s := sample{t: now, pools: map[string]float64{}, links: map[string]float64{}}
	for c := range s.classes {
		s.classes[c] = rate(cur.classes[c], prev.classes[c], dt)
		s.delay[c] = math.NaN()
		if n := cur.delayCount[c] - prev.delayCount[c]; n > 0 {
			s.delay[c] = (cur.delaySum[c] - prev.delaySum[c]).Seconds() / float64(n)
		}
	}
	for p, b := range cur.pools {
		s.pools[p] = rate(b, prev.pools[p], dt)
	}
	for l, b := range cur.links {
		s.links[l] = rate(b, prev.links[l], dt)
	}
	d.samples.Add(s)
}

// Snapshot is what the page shows, as JSON.
type Snapshot struct {
	Time       time.Time           `json:"time"`
	Version    string              `json:"version"`
	Uptime     float64             `json:"uptime_seconds"`
	Interval   float64             `json:"interval_seconds"`
	Window     float64             `json:"window_seconds"` // span the series can cover
	Series     Series              `json:"series"`
	Statements []Statement         `json:"statements"` // running, fastest first
	Firings    []map[string]string `json:"firings"`    // the latest exception-rule firings, newest first: the firings view's rows by column
	Rules      []map[string]string `json:"rules"`      // the rules view's rows by column
	// Links is the links view's rows by column, each with
	// "bytes_per_second", the link's last sampled rate.
	Links []map[string]any `json:"links"`
	// Network is the network view's rows by column: what sluice
	// believes about the path on each side of each link with network
	// control.
	Network  []map[string]string `json:"network"`
	Settings map[string]string   `json:"settings"`
	Sessions int                 `json:"sessions"`
	Running  int                 `json:"running"`
}

// Series are the sampled rates, one value per sample. A delay is null for
// an interval in which the class sent nothing.
type Series struct {
	Times   []float64             `json:"times"`   // Unix seconds
	Classes map[string][]float64  `json:"classes"` // bytes/s by class
	Pools   map[string][]float64  `json:"pools"`   // bytes/s by pool; "" is no pool
	DelayMS map[string][]*float64 `json:"delay_ms"`
}

// Statement is a statement as the page lists it.
type Statement struct {
	views.StatementRef
	Class     string   `json:"class"`
	Penalized bool     `json:"penalized"`
	State     string   `json:"state"`
	Rate      float64  `json:"bytes_per_second"`
	Bytes     int64    `json:"bytes"`
	Elapsed   float64  `json:"elapsed_seconds"`
	SQL       string   `json:"sql"`
	Except    []string `json:"except_info"`
}

func statementView(cat *wlm.Catalog, s session.Snapshot, now time.Time, rate float64) Statement {
	sql := s.SQL
	if len(sql) > 300 {
		sql = sql[:300] + "..."
	}
	return Statement{
		StatementRef: views.Ref(&s), Class: views.Class(cat, s.Pool, s.Penalized).String(),
		Penalized: s.Penalized, State: s.Outcome.String(),
		Rate: rate, Bytes: s.BytesUp + s.BytesDown, Elapsed: views.Elapsed(&s, now).Seconds(),
		SQL: sql, Except: s.Except,
	}
}

// Snapshot returns the page's data at now.
func (d *Dashboard) Snapshot(ctx context.Context, now time.Time) Snapshot {
	cat := d.cat.Catalog()
	reg := d.rt.Registry()
	active := reg.Active()

	d.mu.Lock()
	samples := d.samples.All()
	rates := d.stmtRate
	var last sample
	if len(samples) > 0 {
		last = samples[len(samples)-1]
	}
	d.mu.Unlock()

	snap := Snapshot{
		Time: now, Version: d.version, Uptime: now.Sub(d.started).Seconds(), Interval: d.interval.Seconds(),
		Window:   (d.interval * time.Duration(d.keep)).Seconds(),
		Sessions: len(reg.Sessions()), Running: len(active),
		Series: Series{
			Times:   make([]float64, len(samples)),
			Classes: map[string][]float64{},
			Pools:   map[string][]float64{},
			DelayMS: map[string][]*float64{},
		},
		Statements: []Statement{}, Firings: []map[string]string{}, Rules: []map[string]string{}, Links: []map[string]any{}, Network: []map[string]string{},
		Settings: map[string]string{},
	}
	for _, c := range []link.Class{link.High, link.Normal, link.Low} {
		snap.Series.Classes[c.String()] = make([]float64, len(samples))
		snap.Series.DelayMS[c.String()] = make([]*float64, len(samples))
	}
	for i, s := range samples {
		snap.Series.Times[i] = float64(s.t.UnixMilli()) / 1000
		for c := range s.classes {
			name := link.Class(c).String()
			snap.Series.Classes[name][i] = s.classes[c]
			if !math.IsNaN(s.delay[c]) {
				ms := s.delay[c] * 1000
				snap.Series.DelayMS[name][i] = &ms
			}
		}
		for p, r := range s.pools {
			if snap.Series.Pools[p] == nil {
				snap.Series.Pools[p] = make([]float64, len(samples))
			}
			snap.Series.Pools[p][i] = r
		}
	}

	for _, st := range active {
		s := st.Snapshot()
		snap.Statements = append(snap.Statements, statementView(cat, s, now, rates[s.ID]))
	}
	sort.SliceStable(snap.Statements, func(i, j int) bool { return snap.Statements[i].Rate > snap.Statements[j].Rate })
	if len(snap.Statements) > d.top {
		snap.Statements = snap.Statements[:d.top]
	}
	// The firing history, not the ended statements: ordinary traffic
	// pushes a firing's statement out of the statement history in
	// seconds.
	tables := d.views.ViewTables([]string{"firings", "rules", "links", "network"})
	if nt, ok := tables["network"]; ok {
		for i := range nt.Rows {
			snap.Network = append(snap.Network, rowMap(nt, i))
		}
	}
	if ft, ok := tables["firings"]; ok {
		for i := len(ft.Rows) - 1; i >= 0 && len(snap.Firings) < d.top; i-- {
			snap.Firings = append(snap.Firings, rowMap(ft, i))
		}
	}
	if rt, ok := tables["rules"]; ok {
		for i := range rt.Rows {
			snap.Rules = append(snap.Rules, rowMap(rt, i))
		}
	}
	if lt, ok := tables["links"]; ok {
		for i := range lt.Rows {
			l := map[string]any{"bytes_per_second": 0.0}
			for c, v := range rowMap(lt, i) {
				l[c] = v
			}
			l["bytes_per_second"] = last.links[lt.Rows[i][0]]
			snap.Links = append(snap.Links, l)
		}
	}
	for _, row := range views.Settings(cat).Rows {
		snap.Settings[row[0]] = row[1]
	}
	return snap
}

// rowMap returns row i of t by column name.
func rowMap(t views.Table, i int) map[string]string {
	row := make(map[string]string, len(t.Columns))
	for j, c := range t.Columns {
		row[c] = t.Rows[i][j]
	}
	return row
}

// ServeSnapshot answers GET with the snapshot as JSON.
func (d *Dashboard) ServeSnapshot(w http.ResponseWriter, r *http.Request) {
	snap := d.Snapshot(r.Context(), d.clk.Now())
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.Encode(snap)
}

// Page serves the page: index.html at "/" and its assets under
// "/static/". The files are embedded in the binary.
func (d *Dashboard) Page() http.Handler {
	files := http.FileServerFS(d.files)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Cache-Control", "no-cache")
		if r.URL.Path == "/" {
			http.ServeFileFS(w, r, d.files, "index.html")
			return
		}
		http.StripPrefix("/static", files).ServeHTTP(w, r)
	})
}
