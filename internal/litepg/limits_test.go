package litepg

import (
	"encoding/binary"
	"io"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgproto3"
)

// TestOversizedMessage: a message announcing more than the limit gets a
// FATAL ErrorResponse 54000 before the server closes the connection, as
// a plain message and as CopyData inside COPY FROM STDIN.
func TestOversizedMessage(t *testing.T) {
	_, url := startServer(t, Options{})
	for _, tc := range []struct {
		name  string
		setup []pgproto3.FrontendMessage
		typ   byte
	}{
		{"Query", nil, 'Q'},
		{"CopyData", []pgproto3.FrontendMessage{
			&pgproto3.Query{String: "CREATE TABLE big_copy (t text)"},
			&pgproto3.Query{String: "COPY big_copy FROM STDIN"},
		}, 'd'},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fe := start(t, url)
			for _, m := range tc.setup {
				fe.send(m)
				if _, isCopy := m.(*pgproto3.Query); isCopy && strings.HasPrefix(m.(*pgproto3.Query).String, "COPY") {
					if got, err := fe.f.Receive(); err != nil {
						t.Fatal(err)
					} else if _, ok := got.(*pgproto3.CopyInResponse); !ok {
						t.Fatalf("COPY answered %T", got)
					}
					continue
				}
				fe.untilReady()
			}
			hdr := []byte{tc.typ, 0, 0, 0, 0}
			binary.BigEndian.PutUint32(hdr[1:], maxMessageLen+4+1)
			if _, err := fe.conn.Write(hdr); err != nil {
				t.Fatal(err)
			}
			reply, err := io.ReadAll(fe.conn)
			if err != nil {
				t.Fatalf("read: %v (got %q)", err, reply)
			}
			if len(reply) < 5 || reply[0] != 'E' {
				t.Fatalf("reply %q is not an ErrorResponse", reply)
			}
			var e pgproto3.ErrorResponse
			if err := e.Decode(reply[5:]); err != nil {
				t.Fatal(err)
			}
			if e.Severity != "FATAL" || e.Code != "54000" || !strings.Contains(e.Message, strconv.Itoa(maxMessageLen)) {
				t.Errorf("got %s %s %q, want FATAL 54000 naming the limit", e.Severity, e.Code, e.Message)
			}
		})
	}
}
