package wlm

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/session"
	"github.com/sluicelab/sluice/internal/sqlstate"
	"github.com/sluicelab/sluice/internal/whatif"
	"github.com/sluicelab/sluice/internal/wlm/ddl"
	"github.com/sluicelab/sluice/internal/wlm/views"
)

// TestShowWhatIf: SHOW WHATIF lists each application at the default
// RTTs, SHOW WHATIF RTT '...' at the ones given, SELECT reads the whatif
// view, and a bad RTT is 22023 at its position.
func TestShowWhatIf(t *testing.T) {
	clk := clock.NewFake(t0)
	m := newTestManager(t, ManagerOptions{Clock: clk, Registry: session.NewRegistry(session.Options{})})
	cols := []string{"protocol", "user", "database", "application", "sessions", "tps", "concurrency",
		"round_trips", "round_trips_p95", "latency_ms", "network_share", "rtt_ms", "predicted_latency_ms", "predicted_tps"}
	if res := mustExec(t, m, "SHOW WHATIF"); len(res.Rows) != 0 || !reflect.DeepEqual(res.Columns, cols) {
		t.Fatalf("SHOW WHATIF without a table = %+v", res)
	}
	tb := whatif.New(whatif.Options{})
	m.Views().Register("whatif", views.WhatIfSource{Table: tb})
	// One session, 10 transactions of 5 round trips of 1 ms, back to
	// back over 50 ms, and then 950 ms of nothing.
	c := tb.Open(whatif.Key{Protocol: "postgres", User: "u", Database: "d", Application: "a"}, clk.Now(), nil)
	now := clk.Now()
	for range 10 {
		for j := range 5 {
			c.Send(now, true)
			now = now.Add(time.Millisecond)
			c.Done(now, true, j < 4)
		}
	}
	clk.Advance(time.Second)

	res := mustExec(t, m, "SHOW WHATIF")
	if len(res.Rows) != 4 {
		t.Fatalf("SHOW WHATIF rows %v, want one per default RTT", res.Rows)
	}
	// 10 transactions in 1 s; latency 5 ms; at +10 ms: 55 ms, and the
	// closed loop's cycle (5 ms) becomes 55 ms: 10 x 5/55.
	want := []string{"postgres", "u", "d", "a", "1", "10.000", "0.050", "5.000", "5.000", "5.000", "0.000", "10.000", "55.000", "0.909"}
	if !reflect.DeepEqual(res.Rows[2], want) {
		t.Errorf("SHOW WHATIF row at 10 ms:\n%v, want\n%v", res.Rows[2], want)
	}
	res = mustExec(t, m, "SHOW WHATIF RTT '2ms, 20ms'")
	if len(res.Rows) != 2 || res.Rows[0][11] != "2.000" || res.Rows[1][11] != "20.000" || res.Rows[1][12] != "105.000" {
		t.Errorf("SHOW WHATIF RTT '2ms, 20ms' = %v", res.Rows)
	}
	if res := mustExec(t, m, "show whatif rtt 3"); len(res.Rows) != 1 || res.Rows[0][11] != "3.000" {
		t.Errorf("show whatif rtt 3 = %v", res.Rows)
	}
	res = mustExec(t, m, "SELECT application, rtt_ms, predicted_tps FROM whatif")
	if len(res.Rows) != 4 || res.Rows[3][0] != "a" || res.Rows[3][1] != "50.000" {
		t.Errorf("SELECT FROM whatif = %+v", res)
	}
	for _, q := range []string{"SHOW WHATIF RTT 'soon'", "SHOW WHATIF RTT '-1ms'"} {
		_, err := m.Service().Exec(context.Background(), q)
		var e *ddl.Error
		if !errors.As(err, &e) || e.Code != sqlstate.InvalidParameterValue || e.Position != 17 {
			t.Errorf("%s: %v, want 22023 at 17", q, err)
		}
	}
	if _, err := m.Service().Exec(context.Background(), "SHOW WHATIF RTT"); err == nil {
		t.Error("SHOW WHATIF RTT without a value: no error")
	}
}
