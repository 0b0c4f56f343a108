package mysql

import (
	"log/slog"
	"testing"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/session"
	"github.com/sluicelab/sluice/internal/whatif"
	"github.com/sluicelab/sluice/internal/wire"
	"github.com/sluicelab/sluice/internal/wire/wiretest"
)

// TestWhatIfRoundTrips feeds the observers whole conversations, one
// command and its answer at a time, 1 ms of virtual time apart, and
// checks the round trips and transactions the what-if table counts.
func TestWhatIfRoundTrips(t *testing.T) {
	const inTrans = statusInTrans | 0x0002 // with SERVER_STATUS_AUTOCOMMIT
	const auto = 0x0002
	okIn, okOut := pk(1, okPayload(0, inTrans)), pk(1, okPayload(1, auto))
	rs := func(status uint16) []byte { b, _ := resultSet(1, false, 1, [][]string{{"x"}}, status); return b }
	prepareOK := append(append(append([]byte{0x00}, le32(1)...), le16(0)...), le16(0)...)
	prepareOK = append(prepareOK, 0, 0, 0)
	exec := pk(0, []byte{comStmtExecute}, le32(1), []byte{0}, le32(1))
	tests := []wiretest.WhatIfCase{
		{
			Name: "BEGIN, statements, COMMIT",
			Steps: []wiretest.Exchange{
				{query("BEGIN"), okIn},
				{query("SELECT c FROM sbtest1 WHERE id=1"), rs(inTrans)},
				{query("UPDATE sbtest1 SET k=k+1 WHERE id=1"), pk(1, okPayload(1, inTrans))},
				{query("COMMIT"), okOut},
			},
			Txns: 1, RoundTrips: 4,
		},
		{
			Name: "autocommit statements are a transaction each",
			Steps: []wiretest.Exchange{
				{query("SELECT 1"), rs(auto)},
				{query("SELECT 2"), rs(auto)},
				{query("SELECT 3"), rs(auto)},
			},
			Txns: 3, RoundTrips: 1,
		},
		{
			Name: "an error inside a transaction keeps it open",
			Steps: []wiretest.Exchange{
				{query("BEGIN"), okIn},
				{query("SELECT nope"), pk(1, errPayload(1054, "42S22", "Unknown column"))},
				{query("ROLLBACK"), okOut},
			},
			Txns: 1, RoundTrips: 3,
		},
		{
			Name: "a prepare and a ping outside a transaction are none",
			Steps: []wiretest.Exchange{
				{pk(0, []byte{comStmtPrepare}, []byte("SELECT 1")), pk(1, prepareOK)},
				{pk(0, []byte{comPing}), pk(1, okPayload(0, auto))},
				{exec, rs(auto)},
			},
			Txns: 1, RoundTrips: 1,
		},
		{
			Name: "commands without an answer are no round trip",
			Steps: []wiretest.Exchange{
				{query("BEGIN"), okIn},
				{append(pk(0, []byte{comStmtClose}, le32(9)), query("COMMIT")...), okOut},
			},
			Txns: 1, RoundTrips: 2,
		},
	}
	wiretest.RunWhatIfCases(t, t0, tests, func(t *testing.T, clk *clock.Fake, tb *whatif.Table) (wire.Observer, wire.Observer) {
		sess := session.NewRegistry(session.Options{}).Open(session.Info{Route: "test", Protocol: "mysql"}, t0)
		u, d := newObservers(connConfig{
			sess: sess, clock: clk, log: slog.New(slog.DiscardHandler),
			maxSQL: 64, maxPacket: 32 << 20, caps: testCaps,
		})
		u.c.wi = tb.Open(whatif.Key{Protocol: "mysql"}, clk.Now(), nil)
		return u, d
	})
}
