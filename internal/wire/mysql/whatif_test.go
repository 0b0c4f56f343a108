package mysql

import (
	"log/slog"
	"testing"
	"time"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/session"
	"github.com/sluicelab/sluice/internal/whatif"
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
	type exchange struct{ cli, srv []byte }
	tests := []struct {
		name       string
		steps      []exchange
		txns       int64
		roundTrips float64
	}{
		{
			name: "BEGIN, statements, COMMIT",
			steps: []exchange{
				{query("BEGIN"), okIn},
				{query("SELECT c FROM sbtest1 WHERE id=1"), rs(inTrans)},
				{query("UPDATE sbtest1 SET k=k+1 WHERE id=1"), pk(1, okPayload(1, inTrans))},
				{query("COMMIT"), okOut},
			},
			txns: 1, roundTrips: 4,
		},
		{
			name: "autocommit statements are a transaction each",
			steps: []exchange{
				{query("SELECT 1"), rs(auto)},
				{query("SELECT 2"), rs(auto)},
				{query("SELECT 3"), rs(auto)},
			},
			txns: 3, roundTrips: 1,
		},
		{
			name: "an error inside a transaction keeps it open",
			steps: []exchange{
				{query("BEGIN"), okIn},
				{query("SELECT nope"), pk(1, errPayload(1054, "42S22", "Unknown column"))},
				{query("ROLLBACK"), okOut},
			},
			txns: 1, roundTrips: 3,
		},
		{
			name: "a prepare and a ping outside a transaction are none",
			steps: []exchange{
				{pk(0, []byte{comStmtPrepare}, []byte("SELECT 1")), pk(1, prepareOK)},
				{pk(0, []byte{comPing}), pk(1, okPayload(0, auto))},
				{exec, rs(auto)},
			},
			txns: 1, roundTrips: 1,
		},
		{
			name: "commands without an answer are no round trip",
			steps: []exchange{
				{query("BEGIN"), okIn},
				{append(pk(0, []byte{comStmtClose}, le32(9)), query("COMMIT")...), okOut},
			},
			txns: 1, roundTrips: 2,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clock.NewFake(t0)
			tb := whatif.New(whatif.Options{})
			reg := session.NewRegistry(session.Options{})
			sess := reg.Open(session.Info{Route: "test", Protocol: "mysql"}, t0)
			u, d := newObservers(connConfig{
				sess: sess, clock: clk, log: slog.New(slog.DiscardHandler),
				maxSQL: 64, maxPacket: 32 << 20, caps: testCaps,
			})
			u.c.wi = tb.Open(whatif.Key{Protocol: "mysql"}, clk.Now(), nil)
			for _, s := range tt.steps {
				if err := u.Observe(s.cli); err != nil {
					t.Fatal(err)
				}
				clk.Advance(time.Millisecond)
				if err := d.Observe(s.srv); err != nil {
					t.Fatal(err)
				}
				clk.Advance(time.Millisecond)
			}
			apps := tb.Snapshot(clk.Now())
			if len(apps) != 1 || apps[0].Transactions != tt.txns || apps[0].RoundTrips != tt.roundTrips {
				t.Fatalf("apps %+v, want %d transactions of %v round trips", apps, tt.txns, tt.roundTrips)
			}
			if want := time.Duration(tt.roundTrips) * time.Millisecond; apps[0].ServerTime != want {
				t.Errorf("server time %v, want %v", apps[0].ServerTime, want)
			}
		})
	}
}
