package pg

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/whatif"
	"github.com/sluicelab/sluice/internal/wire"
	"github.com/sluicelab/sluice/internal/wire/wiretest"
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
	tests := []wiretest.WhatIfCase{
		{
			Name: "pgbench tpcb-like, simple protocol",
			Steps: []wiretest.Exchange{
				{q("BEGIN;"), ok("BEGIN", inTxn)},
				{q("UPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid = 1;"), ok("UPDATE 1", inTxn)},
				{q("SELECT abalance FROM pgbench_accounts WHERE aid = 1;"), enc(rowDesc, dataRow("1"), complete("SELECT 1"), inTxn)},
				{q("UPDATE pgbench_tellers SET tbalance = tbalance + 1 WHERE tid = 1;"), ok("UPDATE 1", inTxn)},
				{q("UPDATE pgbench_branches SET bbalance = bbalance + 1 WHERE bid = 1;"), ok("UPDATE 1", inTxn)},
				{q("INSERT INTO pgbench_history VALUES (1, 1, 1, 1, now());"), ok("INSERT 0 1", inTxn)},
				{q("END;"), ok("COMMIT", ready)},
			},
			Txns: 1, RoundTrips: 7,
		},
		{
			Name: "autocommit statements are a transaction each",
			Steps: []wiretest.Exchange{
				{q("SELECT 1"), enc(rowDesc, dataRow("1"), complete("SELECT 1"), ready)},
				{q("SELECT 2"), enc(rowDesc, dataRow("2"), complete("SELECT 1"), ready)},
			},
			Txns: 2, RoundTrips: 1,
		},
		{
			Name: "a failed transaction ends at ROLLBACK",
			Steps: []wiretest.Exchange{
				{q("BEGIN"), ok("BEGIN", inTxn)},
				{q("SELECT 1/0"), enc(&pgproto3.ErrorResponse{Severity: "ERROR", Code: "22012", Message: "division by zero"}, failed)},
				{q("ROLLBACK"), ok("ROLLBACK", ready)},
			},
			Txns: 1, RoundTrips: 3,
		},
		{
			Name: "an extended batch is one round trip; a prepare round trip is no transaction",
			Steps: []wiretest.Exchange{
				{enc(&pgproto3.Parse{Name: "s1", Query: "SELECT $1"}, &pgproto3.Describe{ObjectType: 'S', Name: "s1"}, &pgproto3.Sync{}),
					enc(&pgproto3.ParseComplete{}, &pgproto3.ParameterDescription{ParameterOIDs: []uint32{23}}, rowDesc, ready)},
				{enc(&pgproto3.Bind{PreparedStatement: "s1"}, &pgproto3.Execute{}, &pgproto3.Sync{}),
					enc(&pgproto3.BindComplete{}, dataRow("1"), complete("SELECT 1"), ready)},
			},
			Txns: 1, RoundTrips: 1,
		},
		{
			Name: "a pipelined transaction is one round trip",
			Steps: []wiretest.Exchange{
				{enc(&pgproto3.Query{String: "BEGIN"}, &pgproto3.Bind{}, &pgproto3.Execute{}, &pgproto3.Sync{},
					&pgproto3.Query{String: "COMMIT"}),
					enc(complete("BEGIN"), inTxn, &pgproto3.BindComplete{}, complete("UPDATE 1"), inTxn, complete("COMMIT"), ready)},
			},
			Txns: 1, RoundTrips: 1,
		},
	}
	wiretest.RunWhatIfCases(t, time.Unix(1000, 0), tests, func(t *testing.T, clk *clock.Fake, tb *whatif.Table) (wire.Observer, wire.Observer) {
		r := newRig(t, Options{Clock: clk, WhatIf: tb}).started()
		return r.up, r.down
	})
}
