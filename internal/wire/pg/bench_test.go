package pg

import (
	"bytes"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/sluicelab/sluice/internal/session"
	"github.com/sluicelab/sluice/internal/whatif"
	"github.com/sluicelab/sluice/internal/wire/wiretest"
)

// BenchmarkObserve measures the observers on the steady path. For the
// statement mixes one op is one statement (a client chunk and a server
// chunk); every allocation left is the registry's own (see the
// registry sub-benchmark). For the streams one op is one 64 KiB chunk of
// a long COPY, cut at arbitrary offsets. The whatif variant counts the
// session's round trips in a what-if table too.
func BenchmarkObserve(b *testing.B) {
	const sel = "SELECT abalance FROM pgbench_accounts WHERE aid = $1;"
	b.Run("registry", func(b *testing.B) {
		r := newRig(b, Options{}).started()
		now := time.Unix(0, 0)
		b.ReportAllocs()
		for b.Loop() {
			r.sess.Begin(sel, now).End(now, session.OK, 1, "")
		}
	})
	b.Run("pgbench-S/prepared", func(b *testing.B) {
		r := newRig(b, Options{}).started()
		r.client(enc(&pgproto3.Parse{Name: "P0_1", Query: sel}, &pgproto3.Describe{ObjectType: 'S', Name: "P0_1"}, &pgproto3.Sync{}))
		r.server(enc(&pgproto3.ParseComplete{}, &pgproto3.ParameterDescription{ParameterOIDs: []uint32{23}}, rowDesc, ready))
		cli := enc(&pgproto3.Bind{PreparedStatement: "P0_1", Parameters: [][]byte{[]byte("48213")}}, &pgproto3.Execute{}, &pgproto3.Sync{})
		srv := enc(&pgproto3.BindComplete{}, dataRow("-2913"), complete("SELECT 1"), ready)
		benchStatements(b, r, cli, srv)
	})
	b.Run("pgbench-S/extended", func(b *testing.B) {
		r := newRig(b, Options{}).started()
		cli := enc(&pgproto3.Parse{Query: sel}, &pgproto3.Bind{Parameters: [][]byte{[]byte("48213")}},
			&pgproto3.Describe{ObjectType: 'P'}, &pgproto3.Execute{}, &pgproto3.Sync{})
		srv := enc(&pgproto3.ParseComplete{}, &pgproto3.BindComplete{}, rowDesc, dataRow("-2913"), complete("SELECT 1"), ready)
		benchStatements(b, r, cli, srv)
	})
	b.Run("pgbench-S/simple", func(b *testing.B) {
		r := newRig(b, Options{}).started()
		cli := enc(&pgproto3.Query{String: "SELECT abalance FROM pgbench_accounts WHERE aid = 48213;"})
		srv := enc(rowDesc, dataRow("-2913"), complete("SELECT 1"), ready)
		benchStatements(b, r, cli, srv)
	})
	b.Run("pgbench-S/simple/whatif", func(b *testing.B) {
		r := newRig(b, Options{WhatIf: whatif.New(whatif.Options{})}).started()
		cli := enc(&pgproto3.Query{String: "SELECT abalance FROM pgbench_accounts WHERE aid = 48213;"})
		srv := enc(rowDesc, dataRow("-2913"), complete("SELECT 1"), ready)
		benchStatements(b, r, cli, srv)
	})
	row := enc(&pgproto3.CopyData{Data: bytes.Repeat([]byte("x"), 97)})
	stream := bytes.Repeat(row, 2000) // 204 KB of 102-byte messages
	b.Run("copy-out", func(b *testing.B) {
		r := newRig(b, Options{}).started()
		r.client(enc(&pgproto3.Query{String: "copy pgbench_accounts to stdout"}))
		r.server(enc(&pgproto3.CopyOutResponse{}))
		wiretest.BenchStream(b, r.down, stream, 64<<10)
	})
	b.Run("copy-in", func(b *testing.B) {
		r := newRig(b, Options{}).started()
		r.client(enc(&pgproto3.Query{String: "copy pgbench_accounts from stdin"}))
		r.server(enc(&pgproto3.CopyInResponse{}))
		wiretest.BenchStream(b, r.up, stream, 64<<10)
	})
	b.Run("datarow-1GiB", func(b *testing.B) {
		r := newRig(b, Options{}).started()
		r.client(enc(&pgproto3.Query{String: "select big"}))
		hdr := []byte{'D', 0x3f, 0xff, 0xff, 0xff} // one DataRow of 1 GiB - 1
		chunk := make([]byte, 64<<10)
		b.SetBytes(int64(len(chunk)))
		b.ReportAllocs()
		for b.Loop() {
			var err error
			if r.down.fr.inHeader() {
				err = r.down.Observe(hdr)
			}
			if err == nil {
				err = r.down.Observe(chunk[:min(len(chunk), r.down.fr.rem)])
			}
			if err != nil {
				b.Fatal(err)
			}
		}
	})
}

func benchStatements(b *testing.B, r *rig, cli, srv []byte) {
	b.SetBytes(int64(len(cli) + len(srv)))
	b.ReportAllocs()
	for b.Loop() {
		if err := r.up.Observe(cli); err != nil {
			b.Fatal(err)
		}
		if err := r.down.Observe(srv); err != nil {
			b.Fatal(err)
		}
	}
}
