package pgserver

import (
	"net"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/sluicelab/sluice/internal/pgserver/pgtest"
)

// FuzzServe sends arbitrary bytes after startup. The server must not
// panic, every reply must decode as backend messages, and the
// connection must end cleanly or with an ErrorResponse: the input ends
// with Terminate, so a server still in step closes without one.
func FuzzServe(f *testing.F) {
	f.Add(pgtest.Encode(&pgproto3.Query{String: "x"}))
	f.Add(pgtest.Encode(&pgproto3.Parse{Query: "bad"}, &pgproto3.Bind{}, &pgproto3.Sync{}))
	f.Add(pgtest.Encode(&pgproto3.Parse{Query: "x"}, &pgproto3.Bind{}, &pgproto3.Execute{}, &pgproto3.Sync{}))
	f.Add([]byte{'B', 0, 0, 0, 4})
	f.Add([]byte{'Q', 0xff, 0xff, 0xff, 0xff})
	addr := serve(f, &Config{MaxMessage: 1 << 16}, &memBackend{})
	start := pgtest.Encode(startup("user", "fuzz"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c := dial(t, addr)
		c.Conn.Write(start)
		if got := c.trace(); got != "AuthenticationOk ParameterStatus BackendKeyData Z" {
			t.Fatalf("startup: %s", got)
		}
		go func() {
			c.Conn.Write(data)
			c.Conn.Write([]byte{'X', 0, 0, 0, 4})
			c.Conn.(*net.TCPConn).CloseWrite()
		}()
		c.Conn.SetDeadline(time.Now().Add(5 * time.Second))
		var last pgproto3.BackendMessage
		for {
			m, err := c.FE.Receive()
			if err != nil {
				if ne, ok := err.(net.Error); ok && ne.Timeout() {
					t.Fatal("the server neither answered nor closed")
				}
				break
			}
			last = m
		}
		switch m := last.(type) {
		case nil, *pgproto3.ReadyForQuery, *pgproto3.ParseComplete, *pgproto3.BindComplete, *pgproto3.NoData,
			*pgproto3.CommandComplete, *pgproto3.CloseComplete:
		case *pgproto3.ErrorResponse:
			if m.Code == "" {
				t.Fatal("ErrorResponse without a SQLSTATE")
			}
		default:
			t.Fatalf("the connection ended after %T", last)
		}
	})
}
