package mysql

import (
	"bytes"
	"fmt"
	"log/slog"
	"testing"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/session"
	"github.com/sluicelab/sluice/internal/whatif"
	"github.com/sluicelab/sluice/internal/wire/wiretest"
)

// BenchmarkObserve measures the observers on two shapes of traffic.
//
// point-select: one op is a sysbench-like point select, a
// COM_STMT_EXECUTE and its one-row binary result, observed as it comes
// off the wire (one chunk per direction). Its allocations are those of
// session.Session.Begin (the Statement and the session's active list);
// the observers allocate nothing. point-select/whatif counts the
// session's round trips in a what-if table too.
//
// large-result: one op is one 32 KiB chunk of a large text result set
// (rows of ~100 bytes, cut anywhere) in the middle of a statement:
// nothing is allocated.
//
// binlog-stream: one op is one 32 KiB chunk of a replica's binlog
// stream (row events of 200 bytes, cut anywhere) in the middle of its
// dump: nothing is allocated.
func BenchmarkObserve(b *testing.B) {
	b.Run("point-select", func(b *testing.B) { benchPointSelect(b, nil) })
	b.Run("point-select/whatif", func(b *testing.B) { benchPointSelect(b, whatif.New(whatif.Options{})) })
	b.Run("large-result", func(b *testing.B) {
		sess, d := bigResult(b)
		// A stream of rows, cut into 32 KiB chunks at arbitrary offsets.
		var rows []byte
		for i := 0; len(rows) < 1<<20; i++ {
			rows = append(rows, pk(uint8(4+i), lstr(fmt.Sprint(i)), lstr(string(bytes.Repeat([]byte{'x'}, 90))))...)
		}
		wiretest.BenchStream(b, d, rows, 32<<10)
		if len(sess.Active()) != 1 || sess.Active()[0].BytesDown() == 0 {
			b.Fatal("statement not followed")
		}
	})
	b.Run("binlog-stream", func(b *testing.B) {
		sess, u, d := defaultObservers()
		if err := run([]step{up(binlogDump())}, u, d, 0); err != nil {
			b.Fatal(err)
		}
		// Row events of ~200 bytes, cut into 32 KiB chunks at arbitrary
		// offsets.
		var events []byte
		for i := 0; len(events) < 1<<20; i++ {
			events = append(events, binlogEvent(uint8(1+i), 0x1e, bytes.Repeat([]byte{byte(i)}, 180))...)
		}
		wiretest.BenchStream(b, d, events, 32<<10)
		if len(sess.Active()) != 1 || sess.Active()[0].BytesDown() == 0 {
			b.Fatal("dump not followed")
		}
	})
}

// benchPointSelect is the point-select benchmark, counting round trips
// in tb when it is not nil.
func benchPointSelect(b *testing.B, tb *whatif.Table) {
	reg := session.NewRegistry(session.Options{KeepStatements: 16})
	sess := reg.Open(session.Info{}, t0)
	u, d := newObservers(connConfig{
		sess: sess, clock: clock.NewFake(t0), log: slog.New(slog.DiscardHandler),
		maxSQL: defaultMaxSQL, maxPacket: defaultMaxPacket, caps: testCaps, ext: extCacheMetadata,
	})
	prepareOK := append(append(append([]byte{0x00}, le32(1)...), le16(1)...), le16(1)...)
	prepareOK = append(prepareOK, 0, 0, 0)
	if tb != nil {
		u.c.wi = tb.Open(whatif.Key{Protocol: "mysql"}, t0, nil)
	}
	if err := run([]step{
		up(pk(0, []byte{comStmtPrepare}, []byte("SELECT c FROM sbtest1 WHERE id=?"))),
		down(pk(1, prepareOK), pk(2, colDef("?")), pk(3, colDef("c"))),
	}, u, d, 0); err != nil {
		b.Fatal(err)
	}
	exec := pk(0, []byte{comStmtExecute}, le32(1), []byte{0}, le32(1), []byte{0, 1, 0x03, 0}, le32(4242))
	row := append([]byte{0x00, 0x00}, lstr("83868641912-28773972837-60736120486-75162659906-27563526494-20381887404")...)
	answer := bytes.Join([][]byte{pk(1, []byte{1, 0}), pk(2, row), pk(3, okEOFPayload(2))}, nil)
	b.SetBytes(int64(len(exec) + len(answer)))
	b.ReportAllocs()
	for b.Loop() {
		if err := u.Observe(exec); err != nil {
			b.Fatal(err)
		}
		if err := d.Observe(answer); err != nil {
			b.Fatal(err)
		}
	}
	if n := len(reg.Recent()); n == 0 {
		b.Fatal("no statements recorded")
	}
}
