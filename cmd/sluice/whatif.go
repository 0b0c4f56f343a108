package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/spf13/cobra"

	"github.com/sluicelab/sluice/internal/admin"
	"github.com/sluicelab/sluice/internal/whatif"
)

type whatifFlags struct {
	admin   string
	user    string
	rtt     string
	timeout time.Duration
}

func newWhatIf() *cobra.Command {
	var f whatifFlags
	cmd := &cobra.Command{
		Use:   "whatif --admin ADDR [--rtt 1ms,5ms,10ms,50ms]",
		Short: "Show per application what added round-trip time would do to its transactions",
		Long: `Ask a running sluice what its applications would become at a larger round-trip
time, from the traffic it sees (no delay is added): it runs SHOW WHATIF rtt '...'
on the admin console with the --rtt list and prints, per application (protocol,
user, database and application name), today's sessions, TPS, transaction
latency, round trips per transaction and the share of the latency spent on the
network, then the predicted transaction latency and TPS at each added RTT.

The prediction holds for closed-loop clients at the same concurrency: latency
grows by round trips x RTT, throughput by the same over each session's cycle.
The console user is --user (admin by default); the password comes from
SLUICE_ADMIN_PASSWORD.`,
		Example: `  SLUICE_ADMIN_PASSWORD=secret sluice whatif --admin 127.0.0.1:6433
  sluice whatif --admin 127.0.0.1:6433 --rtt 2ms,20ms,80ms`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if f.admin == "" {
				return usageErr(errors.New("give --admin ADDR"))
			}
			rtts, err := whatif.ParseRTTs(f.rtt)
			if err != nil {
				return usageErr(fmt.Errorf("--rtt: %w", err))
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), f.timeout)
			defer cancel()
			apps, err := whatIfAdmin(ctx, f.admin, f.user, os.Getenv("SLUICE_ADMIN_PASSWORD"), rtts)
			if err != nil {
				return &exitError{code: 1, err: err}
			}
			writeWhatIf(cmd.OutOrStdout(), apps)
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.admin, "admin", "", "admin console address of the running sluice (host:port)")
	fl.StringVar(&f.user, "user", admin.DefaultUser, "admin console user")
	fl.StringVar(&f.rtt, "rtt", "1ms,5ms,10ms,50ms", "added round-trip times, comma-separated (a bare number is milliseconds)")
	fl.DurationVar(&f.timeout, "timeout", time.Minute, "give up after this long")
	return cmd
}

// whatIfApp is one application of SHOW WHATIF with its predictions, in
// the order the RTTs were asked.
type whatIfApp struct {
	protocol, user, database, application string
	// today holds the columns before rtt_ms, by name, as the console
	// formats them.
	today       map[string]string
	predictions []whatIfPrediction
}

type whatIfPrediction struct {
	rttMs, latencyMs, tps string
}

// whatIfColumns are SHOW WHATIF's columns this command reads.
var whatIfColumns = []string{"protocol", "user", "database", "application", "sessions", "tps", "concurrency",
	"round_trips", "round_trips_p95", "latency_ms", "network_share", "rtt_ms", "predicted_latency_ms", "predicted_tps"}

// whatIfAdmin runs SHOW WHATIF rtt '...' with rtts on the admin console
// at addr and returns the applications in the order it lists them, each
// with its predictions in the order of rtts.
func whatIfAdmin(ctx context.Context, addr, user, password string, rtts []time.Duration) ([]*whatIfApp, error) {
	conn, err := pgconn.Connect(ctx, adminURL(addr, user, password))
	if err != nil {
		return nil, fmt.Errorf("whatif through %s: %w", addr, err)
	}
	defer conn.Close(context.Background())
	var apps []*whatIfApp
	byKey := map[string]*whatIfApp{}
	// One statement for every RTT: the predictions come from one
	// snapshot of the window.
	list := make([]string, len(rtts))
	for i, rtt := range rtts {
		list[i] = strconv.FormatFloat(whatif.Millis(rtt), 'f', -1, 64) + "ms"
	}
	{
		q := fmt.Sprintf("SHOW WHATIF rtt '%s'", strings.Join(list, ","))
		results, err := conn.Exec(ctx, q).ReadAll()
		if err == nil && len(results) != 1 {
			err = fmt.Errorf("%d results to one statement", len(results))
		}
		if err != nil {
			var pe *pgconn.PgError
			if errors.As(err, &pe) {
				return nil, fmt.Errorf("%s: %s", q, pe.Message)
			}
			return nil, fmt.Errorf("whatif through %s: %w", addr, err)
		}
		res := results[0]
		if len(res.Rows) == 0 {
			return nil, nil
		}
		idx := map[string]int{}
		for i, fd := range res.FieldDescriptions {
			idx[fd.Name] = i
		}
		for _, c := range whatIfColumns {
			if _, ok := idx[c]; !ok {
				return nil, fmt.Errorf("%s: the answer has no column %q", q, c)
			}
		}
		for _, row := range res.Rows {
			v := func(c string) string { return string(row[idx[c]]) }
			key := strings.Join([]string{v("protocol"), v("user"), v("database"), v("application")}, "\x00")
			a := byKey[key]
			if a == nil {
				a = &whatIfApp{protocol: v("protocol"), user: v("user"), database: v("database"), application: v("application"), today: map[string]string{}}
				for _, c := range whatIfColumns[4:11] {
					a.today[c] = v(c)
				}
				byKey[key] = a
				apps = append(apps, a)
			}
			a.predictions = append(a.predictions, whatIfPrediction{rttMs: v("rtt_ms"), latencyMs: v("predicted_latency_ms"), tps: v("predicted_tps")})
		}
	}
	return apps, nil
}

// writeWhatIf prints one block per application: what it does today and
// an aligned table of its predictions.
func writeWhatIf(w io.Writer, apps []*whatIfApp) {
	if len(apps) == 0 {
		fmt.Fprintln(w, "no application completed a transaction in the window")
		return
	}
	for i, a := range apps {
		if i > 0 {
			fmt.Fprintln(w)
		}
		name := a.application
		if name == "" {
			name = "(no application name)"
		}
		fmt.Fprintf(w, "%s %s  user %s  database %s\n", a.protocol, name, a.user, a.database)
		t := a.today
		share := t["network_share"]
		if f, err := strconv.ParseFloat(share, 64); err == nil {
			share = fmt.Sprintf("%.1f%%", 100*f)
		}
		sessions := t["sessions"] + " sessions"
		if t["sessions"] == "1" {
			sessions = "1 session"
		}
		fmt.Fprintf(w, "  today: %s, %s TPS, concurrency %s, latency %s ms, %s round trips/txn (p95 %s), network share %s\n",
			sessions, fmtTPS(t["tps"]), trimNum(t["concurrency"]), fmtLatency(t["latency_ms"]),
			trimNum(t["round_trips"]), trimNum(t["round_trips_p95"]), share)
		rows := [][]string{{"added RTT (ms)", "latency (ms)", "TPS", "TPS change"}}
		today, _ := strconv.ParseFloat(t["tps"], 64)
		for _, p := range a.predictions {
			change := "-"
			if f, err := strconv.ParseFloat(p.tps, 64); err == nil && today > 0 {
				change = fmt.Sprintf("%+.1f%%", 100*(f/today-1))
			}
			rows = append(rows, []string{"+" + trimNum(p.rttMs), fmtLatency(p.latencyMs), fmtTPS(p.tps), change})
		}
		writeAligned(w, "  ", rows)
	}
}

// fmtLatency writes a console figure in ms with two decimals.
func fmtLatency(s string) string {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return s
	}
	return strconv.FormatFloat(f, 'f', 2, 64)
}

// fmtTPS writes a console TPS with one decimal, three below 10.
func fmtTPS(s string) string {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return s
	}
	if f < 10 {
		return strconv.FormatFloat(f, 'f', 3, 64)
	}
	return strconv.FormatFloat(f, 'f', 1, 64)
}

// trimNum drops the trailing zeros of a decimal: "10.000" is "10",
// "0.500" is "0.5".
func trimNum(s string) string {
	if !strings.Contains(s, ".") {
		return s
	}
	return strings.TrimSuffix(strings.TrimRight(s, "0"), ".")
}

// writeAligned writes rows with each column right-aligned to its widest
// cell, the first row being the header, followed by a rule.
func writeAligned(w io.Writer, indent string, rows [][]string) {
	width := make([]int, len(rows[0]))
	for _, r := range rows {
		for i, c := range r {
			width[i] = max(width[i], len(c))
		}
	}
	line := func(cells []string) {
		var b strings.Builder
		b.WriteString(indent)
		for i, c := range cells {
			if i > 0 {
				b.WriteString("  ")
			}
			b.WriteString(strings.Repeat(" ", width[i]-len(c)) + c)
		}
		fmt.Fprintln(w, b.String())
	}
	line(rows[0])
	rule := make([]string, len(width))
	for i, n := range width {
		rule[i] = strings.Repeat("-", n)
	}
	line(rule)
	for _, r := range rows[1:] {
		line(r)
	}
}
