// Command catalogprop measures how fast a change of the catalog in etcd
// reaches the other instances of a fleet: commit to applied.
//
// It starts three sluice stacks in this process (A, B and C, each with
// an etcd client of its own, the catalog under a fresh prefix of the
// cluster given), creates one resource pool on A, then runs -n ALTER
// RESOURCE POOL statements on A, one after the other, -gap apart. Each
// statement's revision is A's applied revision once it returns. B and C
// record the time they apply each revision (the time of their "catalog
// change applied" log record, taken as the watch delivers it). The
// latency of a change on B or C is that time minus the moment A began
// the statement, so it includes A's whole transaction: an upper bound
// of commit to applied. It prints p50, p99 and the maximum for B, C and
// both, and a verdict line against -bound (p99 < 100 ms by default);
// every change must be applied once on each instance, in order.
//
//	go -C measure run ./catalogprop                       # the shared test cluster (SLUICE_TEST_ETCD)
//	go -C measure run ./catalogprop -etcd 10.0.0.1:2379,10.0.0.2:2379 -n 1000 -svg /tmp/prop.svg
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sluicelab/sluice/internal/config"
	"github.com/sluicelab/sluice/internal/lab/svg"
	"github.com/sluicelab/sluice/internal/stack"
	"github.com/sluicelab/sluice/measure/harness"
)

func main() {
	eps := harness.EtcdFlag()
	n := flag.Int("n", 100, "changes made on A")
	gap := flag.Duration("gap", 0, "pause between two changes")
	bound := flag.Duration("bound", 100*time.Millisecond, "the p99 the verdict checks against")
	svgPath := flag.String("svg", "", "write a chart of each change's latency on B and C here; empty: none")
	flag.Parse()
	if err := run(eps(), *n, *gap, *bound, *svgPath); err != nil {
		log.Fatal(err)
	}
}

// recorder keeps the time each revision was applied, from the log.
type recorder struct {
	mu      sync.Mutex
	applied map[uint64][]time.Time // guarded by mu; more than one means applied twice
}

func (r *recorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *recorder) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *recorder) WithGroup(string) slog.Handler            { return r }

func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	if rec.Message != "catalog change applied" {
		if rec.Level >= slog.LevelWarn {
			fmt.Fprintf(os.Stderr, "%s %s\n", rec.Level, rec.Message)
		}
		return nil
	}
	rec.Attrs(func(a slog.Attr) bool {
		if a.Key == "revision" {
			r.mu.Lock()
			r.applied[a.Value.Uint64()] = append(r.applied[a.Value.Uint64()], rec.Time)
			r.mu.Unlock()
		}
		return true
	})
	return nil
}

func (r *recorder) at(rev uint64) []time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.applied[rev])
}

func run(endpoints []string, n int, gap, bound time.Duration, svgPath string) error {
	ctx := context.Background()
	ec, _, done, err := harness.EtcdScratch(ctx, endpoints, "catalogprop")
	if err != nil {
		return err
	}
	defer done()
	url := ec.String()
	names := []string{"A", "B", "C"}
	recs := map[string]*recorder{}
	stacks := map[string]*stack.Stack{}
	for _, name := range names {
		recs[name] = &recorder{applied: map[uint64][]time.Time{}}
		cfg := &config.Config{Catalog: url, Etcd: &ec, Grace: time.Second, Fleet: config.Fleet{Name: name}}
		st, err := stack.New(ctx, stack.Options{Config: cfg, Logger: slog.New(recs[name])})
		if err != nil {
			return fmt.Errorf("instance %s: %w", name, err)
		}
		defer st.Close()
		stacks[name] = st
	}
	a := stacks["A"].Manager()
	if _, err := a.Service().Exec(ctx, "CREATE RESOURCE POOL catalogprop"); err != nil {
		return err
	}
	fmt.Printf("catalog %s; %d changes on A, gap %v\n", url, n, gap)
	type change struct {
		rev   uint64
		start time.Time
	}
	changes := make([]change, 0, n)
	for i := range n {
		start := time.Now()
		if _, err := a.Service().Exec(ctx, fmt.Sprintf("ALTER RESOURCE POOL catalogprop WITH (weight = %d)", 1+i%99)); err != nil {
			return fmt.Errorf("change %d: %w", i, err)
		}
		changes = append(changes, change{rev: a.Service().AppliedRevision(), start: start})
		if (i+1)%25 == 0 {
			fmt.Printf("  %d/%d changes made, revision %d\n", i+1, n, a.Service().AppliedRevision())
		}
		if gap > 0 {
			time.Sleep(gap)
		}
	}
	last := changes[len(changes)-1].rev
	deadline := time.Now().Add(30 * time.Second)
	for _, name := range names[1:] {
		for stacks[name].Manager().Service().AppliedRevision() < last {
			if time.Now().After(deadline) {
				return fmt.Errorf("instance %s stuck at revision %d, want %d", name, stacks[name].Manager().Service().AppliedRevision(), last)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	var all []time.Duration
	var series []svg.Series
	var problems []string
	for _, name := range names[1:] {
		var lat []time.Duration
		s := svg.Series{Name: "instance " + name}
		for i, c := range changes {
			ts := recs[name].at(c.rev)
			if len(ts) != 1 {
				problems = append(problems, fmt.Sprintf("%s applied revision %d %d times", name, c.rev, len(ts)))
				continue
			}
			d := ts[0].Sub(c.start)
			lat = append(lat, d)
			s.Points = append(s.Points, svg.Point{X: float64(i + 1), Y: float64(d) / 1e6})
		}
		series = append(series, s)
		all = append(all, lat...)
		fmt.Printf("%s: %s\n", name, summary(lat))
	}
	fmt.Printf("B and C: %s\n", summary(all))
	if svgPath != "" {
		ch := svg.Chart{Title: "Catalog change, start on A to applied on B and C", XLabel: "change", YLabel: "latency (ms)",
			Series: series, Guides: []svg.Guide{{Y: float64(bound) / 1e6, Label: "bound"}}, ZeroY: true}
		if err := os.WriteFile(svgPath, []byte(ch.String()), 0o644); err != nil {
			return err
		}
		fmt.Printf("chart: %s\n", svgPath)
	}
	p99 := quantile(all, 0.99)
	switch {
	case len(problems) > 0:
		fmt.Printf("verdict: FAIL: %s\n", strings.Join(problems, "; "))
		return errors.New("changes not applied once each")
	case p99 >= bound:
		fmt.Printf("verdict: FAIL: p99 %s >= %s\n", ms(p99), ms(bound))
		return errors.New("over the bound")
	}
	fmt.Printf("verdict: PASS: p99 %s < %s, every change applied once on B and C, in order\n", ms(p99), ms(bound))
	return nil
}

// summary is the p50, p99 and maximum of ds.
func summary(ds []time.Duration) string {
	return fmt.Sprintf("n %d, p50 %s, p99 %s, max %s", len(ds), ms(quantile(ds, 0.5)), ms(quantile(ds, 0.99)), ms(quantile(ds, 1)))
}

// quantile is the q quantile of ds (nearest rank); 0 for none.
func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(q*float64(len(s))+0.5) - 1
	return s[max(0, min(i, len(s)-1))]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/1e6) }
