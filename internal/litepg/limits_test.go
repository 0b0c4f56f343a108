package litepg

import (
	"encoding/binary"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/sluicelab/sluice/internal/pgserver/pgtest"
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
				fe.Send(m)
				if _, isCopy := m.(*pgproto3.Query); isCopy && strings.HasPrefix(m.(*pgproto3.Query).String, "COPY") {
					if got, err := fe.FE.Receive(); err != nil {
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
			if _, err := fe.Conn.Write(hdr); err != nil {
				t.Fatal(err)
			}
			pgtest.ExpectFatal(t, fe.Conn, "54000", strconv.Itoa(maxMessageLen))
		})
	}
}
