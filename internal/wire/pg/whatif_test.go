package pg

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/whatif"
)

// TestWhatIfRoundTrips feeds the observers whole conversations, a
// message exchange at a time, 1 ms of virtual time apart, and checks the
// round trips and transactions the what-if table counts.
func TestWhatIfRoundTrips(t *testing.T) {
	var (
		inTxn  = &pgproto3.ReadyForQuery{TxStatus: 'T'}
		failed = &pgproto3.ReadyForQuery{TxStatus: 'E'}
		q      = func(sql string) []byte { return enc(&pgproto3.Query{String: sql}) }
		ok     = func(tag string, st *pgproto3.ReadyForQuery) []byte { return enc(complete(tag), st) }
	)
	// exchange is one client chunk and the server's answer to it.
	type exchange struct{ cli, srv []byte }
	tests := []struct {
		name       string
		steps      []exchange
		txns       int64
		roundTrips float64
	}{
		{
			name: "pgbench tpcb-like, simple protocol",
			steps: []exchange{
				{q("BEGIN;"), ok("BEGIN", inTxn)},
				{q("UPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid = 1;"), ok("UPDATE 1", inTxn)},
				{q("SELECT abalance FROM pgbench_accounts WHERE aid = 1;"), enc(rowDesc, dataRow("1"), complete("SELECT 1"), inTxn)},
				{q("UPDATE pgbench_tellers SET tbalance = tbalance + 1 WHERE tid = 1;"), ok("UPDATE 1", inTxn)},
				{q("UPDATE pgbench_branches SET bbalance = bbalance + 1 WHERE bid = 1;"), ok("UPDATE 1", inTxn)},
				{q("INSERT INTO pgbench_history VALUES (1, 1, 1, 1, now());"), ok("INSERT 0 1", inTxn)},
				{q("END;"), ok("COMMIT", ready)},
			},
			txns: 1, roundTrips: 7,
		},
		{
			name: "autocommit statements are a transaction each",
			steps: []exchange{
				{q("SELECT 1"), enc(rowDesc, dataRow("1"), complete("SELECT 1"), ready)},
				{q("SELECT 2"), enc(rowDesc, dataRow("2"), complete("SELECT 1"), ready)},
			},
			txns: 2, roundTrips: 1,
		},
		{
			name: "a failed transaction ends at ROLLBACK",
			steps: []exchange{
				{q("BEGIN"), ok("BEGIN", inTxn)},
				{q("SELECT 1/0"), enc(&pgproto3.ErrorResponse{Severity: "ERROR", Code: "22012", Message: "division by zero"}, failed)},
				{q("ROLLBACK"), ok("ROLLBACK", ready)},
			},
			txns: 1, roundTrips: 3,
		},
		{
			name: "an extended batch is one round trip; a prepare round trip is no transaction",
			steps: []exchange{
				{enc(&pgproto3.Parse{Name: "s1", Query: "SELECT $1"}, &pgproto3.Describe{ObjectType: 'S', Name: "s1"}, &pgproto3.Sync{}),
					enc(&pgproto3.ParseComplete{}, &pgproto3.ParameterDescription{ParameterOIDs: []uint32{23}}, rowDesc, ready)},
				{enc(&pgproto3.Bind{PreparedStatement: "s1"}, &pgproto3.Execute{}, &pgproto3.Sync{}),
					enc(&pgproto3.BindComplete{}, dataRow("1"), complete("SELECT 1"), ready)},
			},
			txns: 1, roundTrips: 1,
		},
		{
			name: "a pipelined transaction is one round trip",
			steps: []exchange{
				{enc(&pgproto3.Query{String: "BEGIN"}, &pgproto3.Bind{}, &pgproto3.Execute{}, &pgproto3.Sync{},
					&pgproto3.Query{String: "COMMIT"}),
					enc(complete("BEGIN"), inTxn, &pgproto3.BindComplete{}, complete("UPDATE 1"), inTxn, complete("COMMIT"), ready)},
			},
			txns: 1, roundTrips: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clock.NewFake(time.Unix(1000, 0))
			tb := whatif.New(whatif.Options{})
			r := newRig(t, Options{Clock: clk, WhatIf: tb}).started()
			for _, s := range tt.steps {
				r.client(s.cli)
				clk.Advance(time.Millisecond)
				r.server(s.srv)
				clk.Advance(time.Millisecond)
			}
			apps := tb.Snapshot(clk.Now())
			if tt.txns == 0 {
				if len(apps) != 0 {
					t.Fatalf("apps %+v, want none", apps)
				}
				return
			}
			if len(apps) != 1 || apps[0].Transactions != tt.txns || apps[0].RoundTrips != tt.roundTrips {
				t.Fatalf("apps %+v, want %d transactions of %v round trips", apps, tt.txns, tt.roundTrips)
			}
			// Every answer came 1 ms after its request.
			if want := time.Duration(tt.roundTrips) * time.Millisecond; apps[0].ServerTime != want {
				t.Errorf("server time %v, want %v", apps[0].ServerTime, want)
			}
		})
	}
}
