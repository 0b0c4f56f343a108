package litepg

import (
	"net"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/pgserver/pgtest"
)

// FuzzSession sends arbitrary bytes to a session after startup. The
// server must not crash, and a fresh session must still work.
func FuzzSession(f *testing.F) {
	f.Add(pgtest.Encode(&pgproto3.Query{String: "SELECT 1"}))
	f.Add(pgtest.Encode(&pgproto3.Parse{Query: "SELECT $1::int"}, &pgproto3.Bind{Parameters: [][]byte{[]byte("1")}},
		&pgproto3.Describe{ObjectType: 'P'}, &pgproto3.Execute{MaxRows: 1}, &pgproto3.Sync{}))
	f.Add(pgtest.Encode(&pgproto3.Parse{Name: "a", Query: "SELECT x FROM generate_series(1, 3) AS g(x)"},
		&pgproto3.Bind{PreparedStatement: "a", ResultFormatCodes: []int16{1}}, &pgproto3.Execute{MaxRows: 2},
		&pgproto3.Execute{}, &pgproto3.Close{ObjectType: 'S', Name: "a"}, &pgproto3.Sync{}))
	f.Add(pgtest.Encode(&pgproto3.Query{String: "CREATE TABLE IF NOT EXISTS f (a INT, b TEXT); COPY f FROM STDIN"},
		&pgproto3.CopyData{Data: []byte("1\tx\n2\t")}, &pgproto3.CopyData{Data: []byte("y\n")}, &pgproto3.CopyDone{}))
	f.Add(pgtest.Encode(&pgproto3.Query{String: "COPY f FROM STDIN (FORMAT binary)"},
		&pgproto3.CopyData{Data: []byte(binarySignature + "\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02")}, &pgproto3.CopyFail{Message: "x"}))
	f.Add(pgtest.Encode(&pgproto3.Query{String: "BEGIN"}, &pgproto3.Bind{PreparedStatement: "nope"}, &pgproto3.Sync{},
		&pgproto3.Query{String: "ROLLBACK"}))
	f.Add([]byte{'B', 0, 0, 0, 4})
	f.Add([]byte{'Q', 0xff, 0xff, 0xff, 0xff})

	// A virtual clock that never moves: pg_sleep waits for a cancel.
	_, url := startServer(f, Options{Clock: clock.NewFake(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC))})
	addr := addrOf(url)
	startup := pgtest.Encode(&pgproto3.StartupMessage{ProtocolVersion: pgproto3.ProtocolVersion30,
		Parameters: map[string]string{"user": "fuzz"}})
	f.Fuzz(func(t *testing.T, data []byte) {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		conn.SetDeadline(time.Now().Add(5 * time.Second))
		fe := pgproto3.NewFrontend(conn, conn)
		if _, err := conn.Write(startup); err != nil {
			t.Fatal(err)
		}
		var key pgproto3.CancelRequest
		for {
			m, err := fe.Receive()
			if err != nil {
				t.Fatalf("startup: %v", err)
			}
			if k, ok := m.(*pgproto3.BackendKeyData); ok {
				key.ProcessID, key.SecretKey = k.ProcessID, append([]byte{}, k.SecretKey...)
			}
			if _, ok := m.(*pgproto3.ReadyForQuery); ok {
				break
			}
		}
		conn.Write(data)
		conn.Write([]byte{'X', 0, 0, 0, 4})
		conn.(*net.TCPConn).CloseWrite()
		// Read what comes back for a moment; then cancel whatever the
		// input may have left running and hang up.
		conn.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		buf := make([]byte, 64<<10)
		for {
			if _, err := conn.Read(buf); err != nil {
				break
			}
		}
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Write(pgtest.Encode(&key))
			c.Close()
		}
	})
}
