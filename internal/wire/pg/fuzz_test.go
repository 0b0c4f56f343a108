package pg

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/sluicelab/sluice/internal/session"
)

func startupBytes(params map[string]string) []byte {
	b, err := (&pgproto3.StartupMessage{ProtocolVersion: pgproto3.ProtocolVersion30, Parameters: params}).Encode(nil)
	if err != nil {
		panic(err)
	}
	return b
}

func FuzzParseStartup(f *testing.F) {
	f.Add(startupBytes(map[string]string{"user": "sluice", "database": "sluice", "application_name": "psql"}))
	f.Add(startupBytes(map[string]string{"user": "u", "replication": "database"}))
	f.Add(startupBytes(map[string]string{"user": "rep", "replication": "true", "application_name": "walreceiver"}))
	f.Add(startupBytes(nil))
	f.Add(sslRequestPacket)
	f.Add([]byte{0, 0, 0, 8, 4, 210, 22, 48})                                // GSSENCRequest
	f.Add([]byte{0, 0, 0, 16, 4, 210, 22, 46, 0, 0, 0, 42, 1, 2, 3, 4})      // CancelRequest
	f.Add([]byte{0, 0, 0, 12, 0, 2, 0, 0, 'u', 0, 'x', 0})                   // protocol 2.0
	f.Add([]byte{0, 0, 0, 14, 0, 3, 0, 0, 'u', 's', 'e', 'r', 0, 'x'})       // no terminator
	f.Add([]byte{0, 0, 0, 13, 0, 3, 0, 2, 'a', 0, 'b', 0, 0})                // 3.2
	f.Add([]byte{0x16, 3, 1, 0, 200})                                        // TLS ClientHello
	f.Add([]byte{0, 0, 0, 4})                                                // too short
	f.Add([]byte{0x7f, 0xff, 0xff, 0xff})                                    // too long
	f.Add(append([]byte{0, 0, 1, 12, 4, 210, 22, 46}, make([]byte, 260)...)) // cancel, 3.2 key
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := parseStartup(data)
		if err == nil {
			if !bytes.Equal(p.raw, data) {
				t.Fatal("raw differs from input")
			}
			switch p.kind {
			case packetStartup:
				if p.version>>16 != 3 {
					t.Fatalf("accepted version %x", p.version)
				}
				_, _ = p.user(), p.database()
				if k := p.sessionKind(); k == session.KindReplication && p.database() != "" && p.param("database") == "" {
					t.Fatalf("physical replication startup with database %q", p.database())
				}
			case packetCancel:
				if len(p.key) < 8 || len(p.key) > 4+maxSecret {
					t.Fatalf("key of %d bytes", len(p.key))
				}
			case packetSSL, packetGSSENC:
				if len(data) != 8 {
					t.Fatal("request of wrong length accepted")
				}
			default:
				t.Fatalf("kind %d", p.kind)
			}
		}
		for _, tlsOK := range []bool{false, true} {
			raw, direct, err := readPacket(bytes.NewReader(data), tlsOK)
			switch {
			case err != nil:
			case direct:
				if !tlsOK || data[0] != tlsHandshakeRecord {
					t.Fatal("direct TLS reported wrongly")
				}
			default:
				if n := int(binary.BigEndian.Uint32(raw)); n != len(raw) || n > maxStartupPacket || !bytes.Equal(raw, data[:n]) {
					t.Fatalf("read %d bytes with length word %d", len(raw), n)
				}
			}
		}
	})
}

func FuzzObserve(f *testing.F) {
	// The whole transcript is split every way by TestSplitAtEveryOffset;
	// its head keeps the fuzzer's inputs small and fast.
	cli, srv := transcript()
	cli, srv = cli[:min(len(cli), 1500)], srv[:min(len(srv), 1500)]
	f.Add(cli, srv, []byte{1})
	f.Add(cli, srv, []byte{3, 250, 7})
	f.Add(cli[:len(cli)/2], srv[:len(srv)/3], []byte{5, 5, 5})
	f.Add([]byte("GET / HTTP/1.1\r\n\r\n"), []byte{}, []byte{2})
	f.Add(enc(&pgproto3.Query{String: "select 1"}), enc(ready, complete("SELECT 1"), ready), []byte{0})
	f.Add([]byte{'Q', 0, 0, 0, 3}, []byte{'Z', 0, 0, 0, 4}, []byte{1})
	f.Add(enc(&pgproto3.Parse{Name: "a", Query: "x"}, &pgproto3.Bind{PreparedStatement: "a"}, &pgproto3.Execute{}, &pgproto3.Sync{}),
		enc(ready, pgErr("42P01"), &pgproto3.ErrorResponse{Severity: "FATAL", Code: "57P01"}), []byte{9, 1})
	// A physical replication session: IDENTIFY_SYSTEM, then
	// START_REPLICATION's CopyBoth stream both ways, ended by CopyDone.
	f.Add(enc(&pgproto3.Query{String: "IDENTIFY_SYSTEM"}, &pgproto3.Query{String: "START_REPLICATION SLOT s PHYSICAL 0/3000000 TIMELINE 1"},
		&pgproto3.CopyData{Data: []byte("r status")}, &pgproto3.CopyDone{}),
		enc(ready, complete("IDENTIFY_SYSTEM"), ready, &pgproto3.CopyBothResponse{}, &pgproto3.CopyData{Data: []byte("w wal")},
			&pgproto3.CopyData{Data: []byte("k keepalive")}, &pgproto3.CopyDone{}, complete("START_STREAMING"), ready), []byte{7, 3, 11})
	f.Fuzz(func(t *testing.T, cli, srv, chunks []byte) {
		sizes := make([]int, len(chunks))
		for i, c := range chunks {
			sizes[i] = int(c) // 0: the rest in one piece
		}
		want, we1, we2 := feed(t, cli, srv, nil)
		got, ge1, ge2 := feed(t, cli, srv, sizes)
		if fmt.Sprint(we1, we2) != fmt.Sprint(ge1, ge2) {
			t.Fatalf("errors differ: whole %v %v, chunked %v %v", we1, we2, ge1, ge2)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("records differ:\n whole   %v\n chunked %v", want, got)
		}
		var sum int64
		for _, r := range got {
			if r.Up < 0 || r.Down < 0 {
				t.Fatalf("negative bytes in %v", r)
			}
			sum += r.Up
		}
		if sum > int64(len(cli)) {
			t.Fatalf("statements hold %d client bytes of %d", sum, len(cli))
		}
	})
}
