package litepg

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/sluicelab/sluice/internal/pgserver/pgtest"
)

// frontend is a raw protocol client for checking exact message flows.
type frontend struct {
	*pgtest.Client
}

// addrOf extracts host:port from a URL made by startServer.
func addrOf(url string) string {
	rest := url[strings.Index(url, "@")+1:]
	return rest[:strings.Index(rest, "/")]
}

func dial(t *testing.T, url string) *frontend {
	t.Helper()
	return &frontend{pgtest.Dial(t, addrOf(url), 30*time.Second)}
}

// start dials and completes the startup phase.
func start(t *testing.T, url string) *frontend {
	t.Helper()
	fe := dial(t, url)
	fe.Send(&pgproto3.StartupMessage{ProtocolVersion: pgproto3.ProtocolVersion30,
		Parameters: map[string]string{"user": "lab", "database": "lab"}})
	got := fe.untilReady()
	if got[0] != "AuthOK" || got[len(got)-1] != "Ready I" {
		t.Fatalf("startup: %v", got)
	}
	return fe
}

// untilReady reads messages up to ReadyForQuery and renders each as a
// short string.
func (fe *frontend) untilReady() []string {
	fe.T.Helper()
	var out []string
	for {
		m, err := fe.FE.Receive()
		if err != nil {
			fe.T.Fatalf("receive after %v: %v", out, err)
		}
		s := render(m)
		if s == "" {
			continue
		}
		out = append(out, s)
		if strings.HasPrefix(s, "Ready") {
			return out
		}
	}
}

// render describes a backend message, by its type name when it has no
// fields to show; ParameterStatus, BackendKeyData and NoticeResponse
// render as "" and are skipped.
func render(m pgproto3.BackendMessage) string {
	switch m := m.(type) {
	case *pgproto3.AuthenticationOk:
		return "AuthOK"
	case *pgproto3.ParameterStatus, *pgproto3.BackendKeyData, *pgproto3.NoticeResponse:
		return ""
	case *pgproto3.ReadyForQuery:
		return "Ready " + string(m.TxStatus)
	case *pgproto3.PortalSuspended:
		return "Suspended"
	case *pgproto3.EmptyQueryResponse:
		return "Empty"
	case *pgproto3.ErrorResponse:
		return "Error " + m.Code
	case *pgproto3.CommandComplete:
		return "Complete " + string(m.CommandTag)
	case *pgproto3.ParameterDescription:
		return fmt.Sprint("Params ", m.ParameterOIDs)
	case *pgproto3.RowDescription:
		var f []string
		for _, d := range m.Fields {
			f = append(f, fmt.Sprintf("%s:%d:%d", d.Name, d.DataTypeOID, d.Format))
		}
		return "Rows " + strings.Join(f, ",")
	case *pgproto3.DataRow:
		var f []string
		for _, v := range m.Values {
			if v == nil {
				f = append(f, "NULL")
			} else {
				f = append(f, fmt.Sprintf("%q", v))
			}
		}
		return "Data " + strings.Join(f, ",")
	case *pgproto3.NegotiateProtocolVersion:
		return fmt.Sprintf("Negotiate %d %v", m.NewestMinorProtocol, m.UnrecognizedOptions)
	}
	// ParseComplete, BindComplete, CloseComplete, NoData, ...
	return strings.TrimPrefix(fmt.Sprintf("%T", m), "*pgproto3.")
}

func expectFlow(t *testing.T, got []string, want ...string) {
	t.Helper()
	if strings.Join(got, " | ") != strings.Join(want, " | ") {
		t.Fatalf("flow\n got: %s\nwant: %s", strings.Join(got, " | "), strings.Join(want, " | "))
	}
}

func int8Bytes(n int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(n)) }

func TestExtendedProtocolFlows(t *testing.T) {
	_, url := startServer(t, Options{})
	fe := start(t, url)
	fe.Send(&pgproto3.Query{String: sbCreate + "; INSERT INTO sbtest1(k, c, pad) VALUES (1,'a','x'),(2,'b','y'),(3,'c','z')"})
	expectFlow(t, fe.untilReady(), "Complete CREATE TABLE", "Complete INSERT 0 3", "Ready I")

	// Statement descriptions drive pgx's parameter encoding.
	for _, tc := range []struct{ sql, params, rows string }{
		{"SELECT c FROM sbtest1 WHERE id=$1", "Params [20]", "Rows c:1042:0"},
		{"SELECT c FROM sbtest1 WHERE id BETWEEN $1 AND $2", "Params [20 20]", "Rows c:1042:0"},
		{"SELECT SUM(k) FROM sbtest1 WHERE id BETWEEN $1 AND $2", "Params [20 20]", "Rows sum:20:0"},
		{"UPDATE sbtest1 SET c=$1 WHERE id=$2", "Params [1042 20]", "NoData"},
		{"UPDATE sbtest1 SET k=k+1 WHERE id=$1", "Params [20]", "NoData"},
		{"INSERT INTO sbtest1 (id, k, c, pad) VALUES ($1, $2, $3, $4)", "Params [20 20 1042 1042]", "NoData"},
		{"DELETE FROM sbtest1 WHERE id=$1", "Params [20]", "NoData"},
		{"SELECT id, k AS kk, c || 'x', count(*), 1 FROM sbtest1 GROUP BY id", "Params []", "Rows id:20:0,kk:20:0,?column?:25:0,count:20:0,?column?:23:0"},
		{"SELECT repeat('x', $1) FROM generate_series(1, 3)", "Params [20]", "Rows repeat:25:0"},
		{"SELECT pg_sleep(0)", "Params []", "Rows pg_sleep:2278:0"},
		{"SHOW TimeZone", "Params []", "Rows TimeZone:25:0"},
		{"BEGIN", "Params []", "NoData"},
	} {
		fe.Send(&pgproto3.Parse{Query: tc.sql}, &pgproto3.Describe{ObjectType: 'S'}, &pgproto3.Sync{})
		expectFlow(t, fe.untilReady(), "ParseComplete", tc.params, tc.rows, "Ready I")
	}

	// Binary parameters and results.
	fe.Send(&pgproto3.Parse{Name: "pt", Query: "SELECT id, c FROM sbtest1 WHERE id = $1"},
		&pgproto3.Bind{PreparedStatement: "pt", ParameterFormatCodes: []int16{1}, Parameters: [][]byte{int8Bytes(2)}, ResultFormatCodes: []int16{1, 0}},
		&pgproto3.Describe{ObjectType: 'P'}, &pgproto3.Execute{}, &pgproto3.Sync{})
	expectFlow(t, fe.untilReady(), "ParseComplete", "BindComplete", "Rows id:20:1,c:1042:0",
		`Data "\x00\x00\x00\x00\x00\x00\x00\x02","b"`, "Complete SELECT 1", "Ready I")

	// Portal suspension with a row limit.
	fe.Send(&pgproto3.Bind{PreparedStatement: "nosuch"}, &pgproto3.Sync{})
	expectFlow(t, fe.untilReady(), "Error 26000", "Ready I")
	fe.Send(&pgproto3.Parse{Query: "SELECT id FROM sbtest1 ORDER BY id"}, &pgproto3.Bind{},
		&pgproto3.Execute{MaxRows: 2}, &pgproto3.Execute{MaxRows: 2}, &pgproto3.Sync{})
	expectFlow(t, fe.untilReady(), "ParseComplete", "BindComplete", `Data "1"`, `Data "2"`, "Suspended",
		`Data "3"`, "Complete SELECT 3", "Ready I")

	// An error discards messages until Sync; the session recovers.
	fe.Send(&pgproto3.Parse{Query: "SELEC 1"}, &pgproto3.Bind{}, &pgproto3.Execute{}, &pgproto3.Sync{})
	expectFlow(t, fe.untilReady(), "Error 42601", "Ready I")
	fe.Send(&pgproto3.Parse{Query: "SELEC 1"}, &pgproto3.Query{String: "SELECT 1"}, &pgproto3.Sync{})
	expectFlow(t, fe.untilReady(), "Error 42601", "Ready I")
	fe.Send(&pgproto3.Parse{Query: "SELECT $1::int"}, &pgproto3.Bind{}, &pgproto3.Execute{}, &pgproto3.Sync{})
	expectFlow(t, fe.untilReady(), "ParseComplete", "Error 08P01", "Ready I")
	fe.Send(&pgproto3.Parse{Query: "SELECT 1"}, &pgproto3.Bind{}, &pgproto3.Execute{}, &pgproto3.Sync{})
	expectFlow(t, fe.untilReady(), "ParseComplete", "BindComplete", `Data "1"`, "Complete SELECT 1", "Ready I")

	// A suspended portal lives until the end of its transaction block.
	fe.Send(&pgproto3.Query{String: "BEGIN"})
	expectFlow(t, fe.untilReady(), "Complete BEGIN", "Ready T")
	fe.Send(&pgproto3.Parse{Query: "SELECT id FROM sbtest1 ORDER BY id"}, &pgproto3.Bind{DestinationPortal: "cur"},
		&pgproto3.Execute{Portal: "cur", MaxRows: 1}, &pgproto3.Sync{})
	expectFlow(t, fe.untilReady(), "ParseComplete", "BindComplete", `Data "1"`, "Suspended", "Ready T")
	fe.Send(&pgproto3.Execute{Portal: "cur", MaxRows: 1}, &pgproto3.Sync{})
	expectFlow(t, fe.untilReady(), `Data "2"`, "Suspended", "Ready T")
	fe.Send(&pgproto3.Query{String: "COMMIT"})
	expectFlow(t, fe.untilReady(), "Complete COMMIT", "Ready I")
	fe.Send(&pgproto3.Execute{Portal: "cur"}, &pgproto3.Sync{})
	expectFlow(t, fe.untilReady(), "Error 34000", "Ready I")

	// An error inside a transaction block leaves it failed until ROLLBACK.
	fe.Send(&pgproto3.Parse{Query: "BEGIN"}, &pgproto3.Bind{}, &pgproto3.Execute{},
		&pgproto3.Parse{Query: "SELECT * FROM nowhere"}, &pgproto3.Bind{}, &pgproto3.Execute{},
		&pgproto3.Parse{Query: "SELECT 1"}, &pgproto3.Sync{})
	expectFlow(t, fe.untilReady(), "ParseComplete", "BindComplete", "Complete BEGIN", "Error 42P01", "Ready E")
	fe.Send(&pgproto3.Parse{Query: "SELECT 1"}, &pgproto3.Bind{}, &pgproto3.Execute{}, &pgproto3.Sync{})
	expectFlow(t, fe.untilReady(), "ParseComplete", "BindComplete", "Error 25P02", "Ready E")
	fe.Send(&pgproto3.Query{String: "ROLLBACK"})
	expectFlow(t, fe.untilReady(), "Complete ROLLBACK", "Ready I")

	// Named statements: duplicates, Close, unknown portals.
	fe.Send(&pgproto3.Parse{Name: "s", Query: "SELECT 1"}, &pgproto3.Parse{Name: "s", Query: "SELECT 2"}, &pgproto3.Sync{})
	expectFlow(t, fe.untilReady(), "ParseComplete", "Error 42P05", "Ready I")
	fe.Send(&pgproto3.Close{ObjectType: 'S', Name: "s"}, &pgproto3.Parse{Name: "s", Query: "SELECT 2"},
		&pgproto3.Bind{PreparedStatement: "s", DestinationPortal: "p"}, &pgproto3.Execute{Portal: "p"},
		&pgproto3.Close{ObjectType: 'P', Name: "p"}, &pgproto3.Execute{Portal: "p"}, &pgproto3.Sync{})
	expectFlow(t, fe.untilReady(), "CloseComplete", "ParseComplete", "BindComplete", `Data "2"`, "Complete SELECT 1",
		"CloseComplete", "Error 34000", "Ready I")
	fe.Send(&pgproto3.Parse{Query: "SELECT 1; SELECT 2"}, &pgproto3.Sync{})
	expectFlow(t, fe.untilReady(), "Error 42601", "Ready I")

	// Flush sends what is buffered without ending the exchange.
	fe.Send(&pgproto3.Parse{Query: "SELECT 3"}, &pgproto3.Flush{})
	if m, err := fe.FE.Receive(); err != nil || render(m) != "ParseComplete" {
		t.Fatalf("after Flush: %v, %v", render(m), err)
	}
	fe.Send(&pgproto3.Sync{})
	expectFlow(t, fe.untilReady(), "Ready I")
}

func TestSimpleQueryFlows(t *testing.T) {
	_, url := startServer(t, Options{})
	fe := start(t, url)
	for _, tc := range []struct {
		sql  string
		want []string
	}{
		{"", []string{"Empty", "Ready I"}},
		{" ; -- nothing", []string{"Empty", "Ready I"}},
		{"SELECT 1 AS a, 'x' AS b; SELECT NULL", []string{"Rows a:23:0,b:25:0", `Data "1","x"`, "Complete SELECT 1",
			"Rows ?column?:25:0", "Data NULL", "Complete SELECT 1", "Ready I"}},
		{"SELECT 1; SELECT * FROM nowhere; SELECT 3", []string{"Rows ?column?:23:0", `Data "1"`, "Complete SELECT 1", "Error 42P01", "Ready I"}},
		{"SELECT 1; SELEC 2", []string{"Error 42601", "Ready I"}},
		{"BEGIN; SELECT 1 = 1", []string{"Complete BEGIN", "Rows ?column?:16:0", `Data "t"`, "Complete SELECT 1", "Ready T"}},
		{"BEGIN", []string{"Complete BEGIN", "Ready T"}},
		{"COMMIT", []string{"Complete COMMIT", "Ready I"}},
		{"SELECT $1", []string{"Error 42P02", "Ready I"}},
		{"SHOW server_version", []string{"Rows server_version:25:0", `Data "15.0 (litepg)"`, "Complete SHOW", "Ready I"}},
		{"SET TIME ZONE 'UTC'; RESET ALL; DISCARD ALL", []string{"Complete SET", "Complete RESET", "Complete DISCARD ALL", "Ready I"}},
		{"SELECT x FROM (SELECT 7 AS x)", []string{"Rows x:20:0", `Data "7"`, "Complete SELECT 1", "Ready I"}},
		{"VALUES (1, 'a'), (2, 'b')", []string{"Rows column1:23:0,column2:25:0", `Data "1","a"`, `Data "2","b"`, "Complete SELECT 2", "Ready I"}},
		{"EXPLAIN SELECT 1", []string{"Rows QUERY PLAN:25:0", `Data "SCAN CONSTANT ROW"`, "Complete EXPLAIN", "Ready I"}},
	} {
		fe.Send(&pgproto3.Query{String: tc.sql})
		expectFlow(t, fe.untilReady(), tc.want...)
	}
	fe.Send(&pgproto3.FunctionCall{Function: 1})
	expectFlow(t, fe.untilReady(), "Error 0A000", "Ready I")
}

func TestStartupVariants(t *testing.T) {
	_, url := startServer(t, Options{})
	// SSL and GSS encryption are refused with 'N'; the client goes on in
	// the clear.
	fe := dial(t, url)
	for _, m := range []pgproto3.FrontendMessage{&pgproto3.SSLRequest{}, &pgproto3.GSSEncRequest{}} {
		fe.Send(m)
		b := make([]byte, 1)
		if _, err := fe.Conn.Read(b); err != nil || b[0] != 'N' {
			t.Fatalf("%T: %q, %v", m, b, err)
		}
	}
	fe.Send(&pgproto3.StartupMessage{ProtocolVersion: pgproto3.ProtocolVersion32,
		Parameters: map[string]string{"user": "lab", "_pq_.extension": "x", "application_name": "probe"}})
	got := fe.untilReady()
	if got[0] != "Negotiate 0 [_pq_.extension]" || got[1] != "AuthOK" {
		t.Fatalf("3.2 startup: %v", got)
	}
	fe.Send(&pgproto3.Query{String: "SHOW application_name"})
	expectFlow(t, fe.untilReady(), "Rows application_name:25:0", `Data "probe"`, "Complete SHOW", "Ready I")

	// Missing user, replication and foreign encodings are refused.
	for _, params := range []map[string]string{
		{"database": "x"},
		{"user": "lab", "replication": "database"},
		{"user": "lab", "client_encoding": "LATIN1"},
	} {
		fe := dial(t, url)
		fe.Send(&pgproto3.StartupMessage{ProtocolVersion: pgproto3.ProtocolVersion30, Parameters: params})
		m, err := fe.FE.Receive()
		if err != nil {
			t.Fatal(err)
		}
		if e, ok := m.(*pgproto3.ErrorResponse); !ok || e.Severity != "FATAL" {
			t.Fatalf("%v: %s", params, render(m))
		}
	}

	// A CancelRequest with a wrong key is ignored; the connection closes.
	fe = dial(t, url)
	fe.Send(&pgproto3.CancelRequest{ProcessID: 1, SecretKey: []byte{1, 2, 3, 4}})
	if _, err := fe.Conn.Read(make([]byte, 1)); err == nil {
		t.Fatal("cancel connection stayed open")
	}
}

func TestMaxConns(t *testing.T) {
	_, url := startServer(t, Options{MaxConns: 1})
	start(t, url)
	fe := dial(t, url)
	fe.Send(&pgproto3.StartupMessage{ProtocolVersion: pgproto3.ProtocolVersion30, Parameters: map[string]string{"user": "lab"}})
	m, err := fe.FE.Receive()
	if err != nil {
		t.Fatal(err)
	}
	if render(m) != "Error 53300" {
		t.Fatalf("second connection: %s", render(m))
	}
}

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
