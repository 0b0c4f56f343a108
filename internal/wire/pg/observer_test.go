package pg

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/session"
	"github.com/sluicelab/sluice/internal/whatif"
	"github.com/sluicelab/sluice/internal/wire"
)

// enc encodes protocol messages back to back.
func enc(msgs ...pgproto3.Message) []byte {
	var b []byte
	for _, m := range msgs {
		var err error
		b, err = m.Encode(b)
		if err != nil {
			panic(err)
		}
	}
	return b
}

// raw builds one message with an arbitrary type and payload.
func raw(typ byte, payload []byte) []byte {
	b := []byte{typ, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(b[1:], uint32(4+len(payload)))
	return append(b, payload...)
}

func dataRow(vals ...string) *pgproto3.DataRow {
	d := &pgproto3.DataRow{}
	for _, v := range vals {
		d.Values = append(d.Values, []byte(v))
	}
	return d
}

func complete(tag string) *pgproto3.CommandComplete {
	return &pgproto3.CommandComplete{CommandTag: []byte(tag)}
}

func pgErr(code string) *pgproto3.ErrorResponse {
	return &pgproto3.ErrorResponse{Severity: "ERROR", SeverityUnlocalized: "ERROR", Code: code, Message: "boom"}
}

var (
	rowDesc = &pgproto3.RowDescription{Fields: []pgproto3.FieldDescription{{Name: []byte("x"), DataTypeOID: 23, DataTypeSize: 4, Format: 0}}}
	ready   = &pgproto3.ReadyForQuery{TxStatus: 'I'}
	// startupDown is what a server sends before the first ReadyForQuery.
	startupDown = enc(
		&pgproto3.AuthenticationOk{},
		&pgproto3.ParameterStatus{Name: "server_version", Value: "15.0"},
		&pgproto3.BackendKeyData{ProcessID: 42, SecretKey: []byte{1, 2, 3, 4}},
		ready,
	)
)

// record is what a test compares of a statement.
type record struct {
	SQL      string
	Outcome  session.Outcome
	Rows     int64
	Code     string
	Up, Down int64
}

func (r record) String() string {
	return fmt.Sprintf("{%q %v rows=%d code=%q up=%d down=%d}", r.SQL, r.Outcome, r.Rows, r.Code, r.Up, r.Down)
}

// rig is a session with its two observers, fed by hand.
type rig struct {
	t    testing.TB
	reg  *session.Registry
	sess *session.Session
	up   *clientObserver
	down *serverObserver
	keys [][]byte
}

func newRig(t testing.TB, o Options) *rig {
	if o.Clock == nil {
		o.Clock = clock.NewFake(time.Unix(1000, 0))
	}
	r := &rig{t: t, reg: session.NewRegistry(session.Options{KeepStatements: 1 << 16})}
	r.sess = r.reg.Open(session.Info{Route: "test", Protocol: "postgres"}, o.Clock.Now())
	r.up, r.down = New(o).observers(r.sess, func(k []byte) { r.keys = append(r.keys, bytes.Clone(k)) })
	if o.WhatIf != nil {
		wi := o.WhatIf.Open(whatif.Key{Protocol: "postgres", User: "u"}, o.Clock.Now(), nil)
		r.up.wi, r.down.wi = wi, wi
	}
	return r
}

// started feeds the server's startup phase.
func (r *rig) started() *rig {
	r.t.Helper()
	r.server(startupDown)
	return r
}

func (r *rig) client(b []byte) {
	r.t.Helper()
	if err := r.up.Observe(b); err != nil {
		r.t.Fatalf("client observe: %v", err)
	}
}

func (r *rig) server(b []byte) {
	r.t.Helper()
	if err := r.down.Observe(b); err != nil {
		r.t.Fatalf("server observe: %v", err)
	}
}

// records returns every statement of the session, running or ended, in
// the order they began.
func (r *rig) records() []record {
	sts := append(r.reg.Active(), r.reg.Recent()...)
	sort.Slice(sts, func(i, j int) bool { return sts[i].ID < sts[j].ID })
	out := make([]record, 0, len(sts))
	for _, st := range sts {
		s := st.Snapshot()
		out = append(out, record{SQL: s.SQL, Outcome: s.Outcome, Rows: s.Rows, Code: s.Code, Up: s.BytesUp, Down: s.BytesDown})
	}
	return out
}

func checkRecords(t *testing.T, got, want []record) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d statements, want %d:\n got  %v\n want %v", len(got), len(want), got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Errorf("statement %d:\n got  %v\n want %v", i, got[i], want[i])
		}
	}
}

// exchange is one step of a transcript: client bytes or server bytes.
type exchange struct {
	fromClient bool
	b          []byte
}

func up(msgs ...pgproto3.Message) exchange   { return exchange{true, enc(msgs...)} }
func down(msgs ...pgproto3.Message) exchange { return exchange{false, enc(msgs...)} }

func TestStatements(t *testing.T) {
	const sel = "SELECT abalance FROM pgbench_accounts WHERE aid = $1"
	copyData := &pgproto3.CopyData{Data: []byte("1\tone\n")}
	tests := []struct {
		name   string
		steps  []exchange
		want   []record // Up/Down of -1 mean "all bytes of the steps"
		maxSQL int
	}{{
		name: "simple",
		steps: []exchange{
			up(&pgproto3.Query{String: "select 1"}),
			down(rowDesc, dataRow("1"), complete("SELECT 1"), ready),
		},
		want: []record{{SQL: "select 1", Outcome: session.OK, Rows: 1, Up: -1, Down: -1}},
	}, {
		name: "simple multi-statement with error",
		steps: []exchange{
			up(&pgproto3.Query{String: "insert into t values (1); select nope"}),
			down(complete("INSERT 0 1"), pgErr("42703"), ready),
		},
		want: []record{{SQL: "insert into t values (1); select nope", Outcome: session.Failed, Rows: 1, Code: "42703", Up: -1, Down: -1}},
	}, {
		name: "simple rows summed, tags without counts ignored",
		steps: []exchange{
			up(&pgproto3.Query{String: "begin; update t set x = 1; delete from t; commit"}),
			down(complete("BEGIN"), complete("UPDATE 3"), complete("DELETE 2"), complete("COMMIT"), ready),
		},
		want: []record{{SQL: "begin; update t set x = 1; delete from t; commit", Outcome: session.OK, Rows: 5, Up: -1, Down: -1}},
	}, {
		name: "empty query",
		steps: []exchange{
			up(&pgproto3.Query{String: ""}),
			down(&pgproto3.EmptyQueryResponse{}, ready),
		},
		want: []record{{SQL: "", Outcome: session.OK, Rows: -1, Up: -1, Down: -1}},
	}, {
		name: "cancelled",
		steps: []exchange{
			up(&pgproto3.Query{String: "select pg_sleep(30)"}),
			down(rowDesc, pgErr("57014"), ready),
		},
		want: []record{{SQL: "select pg_sleep(30)", Outcome: session.Cancelled, Rows: -1, Code: "57014", Up: -1, Down: -1}},
	}, {
		name: "extended unnamed",
		steps: []exchange{
			up(&pgproto3.Parse{Query: sel}, &pgproto3.Bind{Parameters: [][]byte{[]byte("7")}},
				&pgproto3.Describe{ObjectType: 'P'}, &pgproto3.Execute{}, &pgproto3.Sync{}),
			down(&pgproto3.ParseComplete{}, &pgproto3.BindComplete{}, rowDesc, dataRow("5"), dataRow("6"), complete("SELECT 2"), ready),
		},
		want: []record{{SQL: sel, Outcome: session.OK, Rows: 2, Up: -1, Down: -1}},
	}, {
		name: "named prepared, prepare round trip carried to the first execution",
		steps: []exchange{
			up(&pgproto3.Parse{Name: "P0_1", Query: sel}, &pgproto3.Describe{ObjectType: 'S', Name: "P0_1"}, &pgproto3.Sync{}),
			down(&pgproto3.ParseComplete{}, &pgproto3.ParameterDescription{ParameterOIDs: []uint32{23}}, rowDesc, ready),
			up(&pgproto3.Bind{PreparedStatement: "P0_1", Parameters: [][]byte{[]byte("1")}}, &pgproto3.Execute{}, &pgproto3.Sync{}),
			down(&pgproto3.BindComplete{}, dataRow("5"), complete("SELECT 1"), ready),
			up(&pgproto3.Bind{PreparedStatement: "P0_1", Parameters: [][]byte{[]byte("2")}}, &pgproto3.Execute{}, &pgproto3.Sync{}),
			down(&pgproto3.BindComplete{}, complete("SELECT 0"), ready),
		},
		want: []record{
			{SQL: sel, Outcome: session.OK, Rows: 1,
				Up:   int64(len(enc(&pgproto3.Parse{Name: "P0_1", Query: sel}, &pgproto3.Describe{ObjectType: 'S', Name: "P0_1"}, &pgproto3.Sync{}, &pgproto3.Bind{PreparedStatement: "P0_1", Parameters: [][]byte{[]byte("1")}}, &pgproto3.Execute{}, &pgproto3.Sync{}))),
				Down: int64(len(enc(&pgproto3.ParseComplete{}, &pgproto3.ParameterDescription{ParameterOIDs: []uint32{23}}, rowDesc, ready, &pgproto3.BindComplete{}, dataRow("5"), complete("SELECT 1"), ready)))},
			{SQL: sel, Outcome: session.OK, Rows: 0,
				Up:   int64(len(enc(&pgproto3.Bind{PreparedStatement: "P0_1", Parameters: [][]byte{[]byte("2")}}, &pgproto3.Execute{}, &pgproto3.Sync{}))),
				Down: int64(len(enc(&pgproto3.BindComplete{}, complete("SELECT 0"), ready)))},
		},
	}, {
		name: "named portal and close",
		steps: []exchange{
			up(&pgproto3.Parse{Name: "s1", Query: "select 1"}, &pgproto3.Bind{DestinationPortal: "c1", PreparedStatement: "s1"},
				&pgproto3.Execute{Portal: "c1"}, &pgproto3.Close{ObjectType: 'P', Name: "c1"}, &pgproto3.Execute{Portal: "c1"}, &pgproto3.Sync{}),
			down(&pgproto3.ParseComplete{}, &pgproto3.BindComplete{}, dataRow("1"), complete("SELECT 1"),
				&pgproto3.CloseComplete{}, pgErr("34000"), ready),
		},
		want: []record{
			{SQL: "select 1", Outcome: session.OK, Rows: 1,
				Up:   int64(len(enc(&pgproto3.Parse{Name: "s1", Query: "select 1"}, &pgproto3.Bind{DestinationPortal: "c1", PreparedStatement: "s1"}, &pgproto3.Execute{Portal: "c1"}))),
				Down: int64(len(enc(&pgproto3.ParseComplete{}, &pgproto3.BindComplete{}, dataRow("1"), complete("SELECT 1"))))},
			{SQL: "", Outcome: session.Failed, Rows: -1, Code: "34000",
				Up:   int64(len(enc(&pgproto3.Close{ObjectType: 'P', Name: "c1"}, &pgproto3.Execute{Portal: "c1"}, &pgproto3.Sync{}))),
				Down: int64(len(enc(&pgproto3.CloseComplete{}, pgErr("34000"), ready)))},
		},
	}, {
		name: "pipeline",
		steps: []exchange{
			up(&pgproto3.Parse{Name: "a", Query: "select $1"}, &pgproto3.Parse{Name: "b", Query: "insert into t values ($1)"},
				&pgproto3.Bind{PreparedStatement: "a"}, &pgproto3.Execute{},
				&pgproto3.Bind{PreparedStatement: "b"}, &pgproto3.Execute{}, &pgproto3.Sync{},
				&pgproto3.Bind{PreparedStatement: "a"}, &pgproto3.Execute{}, &pgproto3.Sync{}),
			down(&pgproto3.ParseComplete{}, &pgproto3.ParseComplete{},
				&pgproto3.BindComplete{}, dataRow("1"), complete("SELECT 1"),
				&pgproto3.BindComplete{}, complete("INSERT 0 1"), ready,
				&pgproto3.BindComplete{}, dataRow("1"), complete("SELECT 1"), ready),
		},
		want: []record{
			{SQL: "select $1", Outcome: session.OK, Rows: 1,
				Up:   int64(len(enc(&pgproto3.Parse{Name: "a", Query: "select $1"}, &pgproto3.Parse{Name: "b", Query: "insert into t values ($1)"}, &pgproto3.Bind{PreparedStatement: "a"}, &pgproto3.Execute{}))),
				Down: int64(len(enc(&pgproto3.ParseComplete{}, &pgproto3.ParseComplete{}, &pgproto3.BindComplete{}, dataRow("1"), complete("SELECT 1"))))},
			{SQL: "insert into t values ($1)", Outcome: session.OK, Rows: 1,
				Up:   int64(len(enc(&pgproto3.Bind{PreparedStatement: "b"}, &pgproto3.Execute{}, &pgproto3.Sync{}))),
				Down: int64(len(enc(&pgproto3.BindComplete{}, complete("INSERT 0 1"), ready)))},
			{SQL: "select $1", Outcome: session.OK, Rows: 1,
				Up:   int64(len(enc(&pgproto3.Bind{PreparedStatement: "a"}, &pgproto3.Execute{}, &pgproto3.Sync{}))),
				Down: int64(len(enc(&pgproto3.BindComplete{}, dataRow("1"), complete("SELECT 1"), ready)))},
		},
	}, {
		name: "pipeline aborted by an error skips the rest of the batch",
		steps: []exchange{
			up(&pgproto3.Parse{Query: "select 1/0"}, &pgproto3.Bind{}, &pgproto3.Execute{},
				&pgproto3.Parse{Query: "select 2"}, &pgproto3.Bind{}, &pgproto3.Execute{}, &pgproto3.Sync{},
				&pgproto3.Parse{Query: "select 3"}, &pgproto3.Bind{}, &pgproto3.Execute{}, &pgproto3.Sync{}),
			down(&pgproto3.ParseComplete{}, &pgproto3.BindComplete{}, pgErr("22012"), ready,
				&pgproto3.ParseComplete{}, &pgproto3.BindComplete{}, dataRow("3"), complete("SELECT 1"), ready),
		},
		want: []record{
			{SQL: "select 1/0", Outcome: session.Failed, Rows: -1, Code: "22012",
				Up:   int64(len(enc(&pgproto3.Parse{Query: "select 1/0"}, &pgproto3.Bind{}, &pgproto3.Execute{}))),
				Down: int64(len(enc(&pgproto3.ParseComplete{}, &pgproto3.BindComplete{}, pgErr("22012"))))},
			{SQL: "select 2", Outcome: session.Failed, Rows: -1, Code: "22012",
				Up:   int64(len(enc(&pgproto3.Parse{Query: "select 2"}, &pgproto3.Bind{}, &pgproto3.Execute{}, &pgproto3.Sync{}))),
				Down: int64(len(enc(ready)))},
			{SQL: "select 3", Outcome: session.OK, Rows: 1,
				Up:   int64(len(enc(&pgproto3.Parse{Query: "select 3"}, &pgproto3.Bind{}, &pgproto3.Execute{}, &pgproto3.Sync{}))),
				Down: int64(len(enc(&pgproto3.ParseComplete{}, &pgproto3.BindComplete{}, dataRow("3"), complete("SELECT 1"), ready)))},
		},
	}, {
		name: "portal suspended",
		steps: []exchange{
			up(&pgproto3.Parse{Query: "select g from generate_series(1,3) g"}, &pgproto3.Bind{}, &pgproto3.Execute{MaxRows: 2},
				&pgproto3.Execute{MaxRows: 2}, &pgproto3.Sync{}),
			down(&pgproto3.ParseComplete{}, &pgproto3.BindComplete{}, dataRow("1"), dataRow("2"), &pgproto3.PortalSuspended{},
				dataRow("3"), complete("SELECT 1"), ready),
		},
		want: []record{
			{SQL: "select g from generate_series(1,3) g", Outcome: session.OK, Rows: 2,
				Up:   int64(len(enc(&pgproto3.Parse{Query: "select g from generate_series(1,3) g"}, &pgproto3.Bind{}, &pgproto3.Execute{MaxRows: 2}))),
				Down: int64(len(enc(&pgproto3.ParseComplete{}, &pgproto3.BindComplete{}, dataRow("1"), dataRow("2"), &pgproto3.PortalSuspended{})))},
			{SQL: "select g from generate_series(1,3) g", Outcome: session.OK, Rows: 1,
				Up:   int64(len(enc(&pgproto3.Execute{MaxRows: 2}, &pgproto3.Sync{}))),
				Down: int64(len(enc(dataRow("3"), complete("SELECT 1"), ready)))},
		},
	}, {
		name: "copy in",
		steps: []exchange{
			up(&pgproto3.Query{String: "copy t from stdin"}),
			down(&pgproto3.CopyInResponse{ColumnFormatCodes: []uint16{0, 0}}),
			up(copyData, copyData, &pgproto3.CopyDone{}),
			down(complete("COPY 2"), ready),
		},
		want: []record{{SQL: "copy t from stdin", Outcome: session.OK, Rows: 2, Up: -1, Down: -1}},
	}, {
		name: "copy out",
		steps: []exchange{
			up(&pgproto3.Query{String: "copy t to stdout"}),
			down(&pgproto3.CopyOutResponse{ColumnFormatCodes: []uint16{0}}, copyData, copyData, copyData, &pgproto3.CopyDone{}, complete("COPY 3"), ready),
		},
		want: []record{{SQL: "copy t to stdout", Outcome: session.OK, Rows: 3, Up: -1, Down: -1}},
	}, {
		name: "copy in failed by the client",
		steps: []exchange{
			up(&pgproto3.Query{String: "copy t from stdin"}),
			down(&pgproto3.CopyInResponse{}),
			up(copyData, &pgproto3.CopyFail{Message: "no"}),
			down(pgErr("57014"), ready),
		},
		want: []record{{SQL: "copy t from stdin", Outcome: session.Cancelled, Rows: -1, Code: "57014", Up: -1, Down: -1}},
	}, {
		name: "replication stream is one statement",
		steps: []exchange{
			up(&pgproto3.Query{String: "IDENTIFY_SYSTEM"}),
			down(rowDesc, dataRow("x"), complete("IDENTIFY_SYSTEM"), ready),
			up(&pgproto3.Query{String: "START_REPLICATION 0/0 PHYSICAL"}),
			down(&pgproto3.CopyBothResponse{}, copyData, copyData),
			up(copyData),
			down(copyData),
			up(&pgproto3.CopyDone{}),
			down(&pgproto3.CopyDone{}, complete("START_REPLICATION"), ready),
		},
		want: []record{
			{SQL: "IDENTIFY_SYSTEM", Outcome: session.OK, Rows: -1,
				Up:   int64(len(enc(&pgproto3.Query{String: "IDENTIFY_SYSTEM"}))),
				Down: int64(len(enc(rowDesc, dataRow("x"), complete("IDENTIFY_SYSTEM"), ready)))},
			{SQL: "START_REPLICATION 0/0 PHYSICAL", Outcome: session.OK, Rows: -1,
				Up:   int64(len(enc(&pgproto3.Query{String: "START_REPLICATION 0/0 PHYSICAL"}, copyData, &pgproto3.CopyDone{}))),
				Down: int64(len(enc(&pgproto3.CopyBothResponse{}, copyData, copyData, copyData, &pgproto3.CopyDone{}, complete("START_REPLICATION"), ready)))},
		},
	}, {
		name: "fatal error ends everything in flight",
		steps: []exchange{
			up(&pgproto3.Query{String: "select 1"}, &pgproto3.Query{String: "select 2"}),
			down(&pgproto3.ErrorResponse{Severity: "FATAL", SeverityUnlocalized: "FATAL", Code: "57P01", Message: "terminating"}),
		},
		want: []record{
			{SQL: "select 1", Outcome: session.Failed, Rows: -1, Code: "57P01",
				Up:   int64(len(enc(&pgproto3.Query{String: "select 1"}))),
				Down: int64(len(enc(&pgproto3.ErrorResponse{Severity: "FATAL", SeverityUnlocalized: "FATAL", Code: "57P01", Message: "terminating"})))},
			{SQL: "select 2", Outcome: session.Failed, Rows: -1, Code: "57P01",
				Up: int64(len(enc(&pgproto3.Query{String: "select 2"})))},
		},
	}, {
		name: "function call records nothing and keeps the queue aligned",
		steps: []exchange{
			up(&pgproto3.FunctionCall{Function: 1598}),
			down(&pgproto3.FunctionCallResponse{Result: []byte("x")}, ready),
			up(&pgproto3.Query{String: "select 1"}),
			down(complete("SELECT 0"), ready),
		},
		want: []record{{SQL: "select 1", Outcome: session.OK, Rows: 0,
			Up:   int64(len(enc(&pgproto3.Query{String: "select 1"}))),
			Down: int64(len(enc(&pgproto3.FunctionCallResponse{Result: []byte("x")}, ready, complete("SELECT 0"), ready)))}},
	}, {
		name:   "SQL clipped at a UTF-8 boundary",
		maxSQL: 8,
		steps: []exchange{
			up(&pgproto3.Query{String: "select 'ü' || 'long tail'"}),
			down(complete("SELECT 1"), ready),
		},
		want: []record{{SQL: "select '", Outcome: session.OK, Rows: 1, Up: -1, Down: -1}},
	}, {
		name:   "prepared SQL clipped",
		maxSQL: 9,
		steps: []exchange{
			up(&pgproto3.Parse{Name: "n", Query: "select ééé"}, &pgproto3.Bind{PreparedStatement: "n"}, &pgproto3.Execute{}, &pgproto3.Sync{}),
			down(&pgproto3.ParseComplete{}, &pgproto3.BindComplete{}, complete("SELECT 1"), ready),
		},
		want: []record{{SQL: "select é", Outcome: session.OK, Rows: 1, Up: -1, Down: -1}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, Options{MaxSQL: tt.maxSQL}).started()
			var upAll, downAll int64
			for _, s := range tt.steps {
				if s.fromClient {
					upAll += int64(len(s.b))
					r.client(s.b)
				} else {
					downAll += int64(len(s.b))
					r.server(s.b)
				}
			}
			want := append([]record(nil), tt.want...)
			for i := range want {
				if want[i].Up == -1 {
					want[i].Up = upAll
				}
				if want[i].Down == -1 {
					want[i].Down = downAll
				}
			}
			checkRecords(t, r.records(), want)
			if n := r.up.t.queued(); n != 0 {
				t.Errorf("%d requests still in flight", n)
			}
		})
	}
}

func TestStartupPhaseBelongsToNoStatement(t *testing.T) {
	r := newRig(t, Options{})
	// A client may send its first query before the server is ready.
	r.client(enc(&pgproto3.Query{String: "select 1"}))
	r.server(startupDown)
	r.server(enc(complete("SELECT 1"), ready))
	checkRecords(t, r.records(), []record{{SQL: "select 1", Outcome: session.OK, Rows: 1,
		Up: int64(len(enc(&pgproto3.Query{String: "select 1"}))), Down: int64(len(enc(complete("SELECT 1"), ready)))}})
	if len(r.keys) != 1 || !bytes.Equal(r.keys[0], []byte{0, 0, 0, 42, 1, 2, 3, 4}) {
		t.Fatalf("cancel keys %x, want one of 0000002a01020304", r.keys)
	}
}

func TestBackendKeyDataLongKey(t *testing.T) {
	r := newRig(t, Options{})
	secret := bytes.Repeat([]byte{7}, 32) // protocol 3.2
	r.server(enc(&pgproto3.BackendKeyData{ProcessID: 9, SecretKey: secret}))
	if len(r.keys) != 1 || len(r.keys[0]) != 36 {
		t.Fatalf("keys %x", r.keys)
	}
}

func TestLongQueryBeginsBeforeItEnds(t *testing.T) {
	r := newRig(t, Options{MaxSQL: 16}).started()
	q := enc(&pgproto3.Query{String: strings.Repeat("x", 1000)})
	r.client(q[:100])
	act := r.sess.Active()
	if len(act) != 1 || act[0].SQL != strings.Repeat("x", 16) || act[0].BytesUp() != 100 {
		t.Fatalf("after 100 bytes: %v", r.records())
	}
	r.client(q[100:])
	if got := act[0].BytesUp(); got != int64(len(q)) {
		t.Fatalf("bytes up %d, want %d", got, len(q))
	}
}

func TestClientProtocolViolations(t *testing.T) {
	tests := []struct {
		name string
		b    []byte
		want string
	}{
		{"length below 4", []byte{'Q', 0, 0, 0, 3}, "invalid message length"},
		{"length over the limit", []byte{'Q', 0, 0, 4, 1}, "exceeds the limit of 1024 bytes"},
		{"negative length", []byte{'Q', 0xff, 0xff, 0xff, 0xff}, "exceeds the limit"},
		{"unknown type", raw('z', nil), "invalid frontend message type 'z'"},
		{"garbage", []byte("GET / HTTP/1.1\r\n"), "invalid frontend message type 'G'"},
		{"after a good message", append(enc(&pgproto3.Sync{}), 0, 0, 0, 0, 0), "invalid frontend message type 0x00"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, Options{MaxMessage: 1024}).started()
			err := r.up.Observe(tt.b)
			var fatal *wire.Fatal
			if !errors.As(err, &fatal) {
				t.Fatalf("err = %v, want *wire.Fatal", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want it to mention %q", err, tt.want)
			}
			var e pgproto3.ErrorResponse
			if fatal.Reply[0] != 'E' || e.Decode(fatal.Reply[5:]) != nil {
				t.Fatalf("reply %q is not an ErrorResponse", fatal.Reply)
			}
			if e.Severity != "FATAL" || e.Code != "08P01" || !strings.Contains(e.Message, tt.want) {
				t.Errorf("reply = %+v", e)
			}
			if err2 := r.up.Observe(enc(&pgproto3.Sync{})); err2 != err {
				t.Errorf("second call returned %v, want the same error", err2)
			}
		})
	}
}

func TestServerProtocolViolations(t *testing.T) {
	for _, b := range [][]byte{{'D', 0, 0, 0, 1}, raw('!', nil), {'D', 0x7f, 0, 0, 0}} {
		r := newRig(t, Options{MaxMessage: 1 << 20}).started()
		err := r.down.Observe(b)
		var fatal *wire.Fatal
		if err == nil || errors.As(err, &fatal) {
			t.Errorf("%x: err = %v, want a plain error", b, err)
		}
	}
}

func TestTagRows(t *testing.T) {
	tests := []struct {
		tag  string
		want int64
	}{
		{"SELECT 5\x00", 5},
		{"INSERT 0 12\x00", 12},
		{"UPDATE 0\x00", 0},
		{"DELETE 3\x00", 3},
		{"MERGE 4\x00", 4},
		{"FETCH 10\x00", 10},
		{"MOVE 2\x00", 2},
		{"COPY 1000000\x00", 1000000},
		{"CREATE TABLE\x00", -1},
		{"BEGIN\x00", -1},
		{"5\x00", -1},
		{"SELECT 99999999999999999999\x00", -1},
		{"SELECT 5", -1}, // unterminated
		{"\x00", -1},
		{"", -1},
	}
	for _, tt := range tests {
		if got := tagRows([]byte(tt.tag)); got != tt.want {
			t.Errorf("tagRows(%q) = %d, want %d", tt.tag, got, tt.want)
		}
	}
}

func TestClip(t *testing.T) {
	tests := []struct {
		in   string
		n    int
		want string
	}{
		{"abc", 5, "abc"},
		{"abcdef", 3, "abc"},
		{"aé", 2, "a"},
		{"a€b", 3, "a"},
		{"a€b", 4, "a€"},
		{"a\xffb", 2, "a\xff"},
		{"", 0, ""},
	}
	for _, tt := range tests {
		if got := string(clip([]byte(tt.in), tt.n)); got != tt.want {
			t.Errorf("clip(%q, %d) = %q, want %q", tt.in, tt.n, got, tt.want)
		}
	}
}

// transcript is a well-formed session exercising every path the observers
// take: each direction's bytes, fed all of the client's first.
func transcript() (cli, srv []byte) {
	var steps []exchange
	steps = append(steps,
		exchange{false, startupDown},
		up(&pgproto3.Query{String: "select 1; select 2"}),
		down(rowDesc, dataRow("1"), complete("SELECT 1"), rowDesc, dataRow("2"), complete("SELECT 1"), ready),
		up(&pgproto3.Parse{Name: "s", Query: "select $1::int"}, &pgproto3.Describe{ObjectType: 'S', Name: "s"}, &pgproto3.Sync{}),
		down(&pgproto3.ParseComplete{}, &pgproto3.ParameterDescription{ParameterOIDs: []uint32{23}}, rowDesc, ready),
		up(&pgproto3.Bind{PreparedStatement: "s", Parameters: [][]byte{[]byte("1")}}, &pgproto3.Execute{},
			&pgproto3.Bind{PreparedStatement: "s", Parameters: [][]byte{bytes.Repeat([]byte("p"), 3000)}}, &pgproto3.Execute{}, &pgproto3.Sync{}),
		down(&pgproto3.BindComplete{}, dataRow("1"), complete("SELECT 1"), &pgproto3.BindComplete{}, pgErr("22P02"), ready),
		up(&pgproto3.Query{String: "copy t from stdin"}),
		down(&pgproto3.CopyInResponse{ColumnFormatCodes: []uint16{0}}),
		up(&pgproto3.CopyData{Data: bytes.Repeat([]byte("row\n"), 500)}, &pgproto3.CopyDone{}),
		down(complete("COPY 500"), ready),
		up(&pgproto3.Query{String: "copy t to stdout"}),
		down(&pgproto3.CopyOutResponse{}, &pgproto3.CopyData{Data: bytes.Repeat([]byte("r"), 2000)}, &pgproto3.CopyDone{}, complete("COPY 1"), ready),
		up(&pgproto3.Query{String: strings.Repeat("select 'long' ", 400)}),
		down(&pgproto3.NoticeResponse{Severity: "NOTICE", Code: "00000", Message: "hi"}, &pgproto3.EmptyQueryResponse{}, ready),
		up(&pgproto3.Parse{Query: "select pg_sleep(1)"}, &pgproto3.Bind{}, &pgproto3.Execute{}, &pgproto3.Sync{}),
		down(&pgproto3.ParseComplete{}, &pgproto3.BindComplete{}, pgErr("57014"), ready),
		up(&pgproto3.Terminate{}),
	)
	for _, s := range steps {
		if s.fromClient {
			cli = append(cli, s.b...)
		} else {
			srv = append(srv, s.b...)
		}
	}
	return cli, srv
}

// feed runs cli then srv through a fresh rig in the given chunk sizes
// (cycled; 0 means whole) and returns the records and the errors.
func feed(t testing.TB, cli, srv []byte, sizes []int) ([]record, error, error) {
	// Round trips are counted too, so the fuzz targets hold that path to
	// never panicking either.
	r := newRig(t, Options{MaxSQL: 64, MaxMessage: 1 << 16, WhatIf: whatif.New(whatif.Options{})})
	run := func(o wire.Observer, b []byte) error {
		for i := 0; len(b) > 0; i++ {
			n := len(b)
			if len(sizes) > 0 && sizes[i%len(sizes)] > 0 {
				n = min(n, sizes[i%len(sizes)])
			}
			if err := o.Observe(b[:n]); err != nil {
				return err
			}
			b = b[n:]
		}
		return nil
	}
	e1 := run(r.up, cli)
	e2 := run(r.down, srv)
	return r.records(), e1, e2
}

func TestSplitAtEveryOffset(t *testing.T) {
	cli, srv := transcript()
	want, e1, e2 := feed(t, cli, srv, nil)
	if e1 != nil || e2 != nil {
		t.Fatal(e1, e2)
	}
	if len(want) != 7 {
		t.Fatalf("whole transcript gave %d statements: %v", len(want), want)
	}
	var sumUp, sumDown int64
	for _, r := range want {
		sumUp += r.Up
		sumDown += r.Down
	}
	if sumUp != int64(len(cli)-5) || sumDown != int64(len(srv)-len(startupDown)) {
		t.Errorf("statements hold %d/%d bytes, streams after startup %d/%d", sumUp, sumDown, len(cli)-5, len(srv)-len(startupDown))
	}
	for _, stream := range []string{"client", "server"} {
		b := cli
		if stream == "server" {
			b = srv
		}
		for k := 1; k < len(b); k++ {
			r := newRig(t, Options{MaxSQL: 64, MaxMessage: 1 << 16})
			var err error
			if stream == "client" {
				if err = r.up.Observe(b[:k]); err == nil {
					err = r.up.Observe(b[k:])
				}
				if err == nil {
					err = r.down.Observe(srv)
				}
			} else {
				if err = r.up.Observe(cli); err == nil {
					err = r.down.Observe(b[:k])
				}
				if err == nil {
					err = r.down.Observe(b[k:])
				}
			}
			if err != nil {
				t.Fatalf("%s split at %d: %v", stream, k, err)
			}
			got := r.records()
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("%s split at %d:\n got  %v\n want %v", stream, k, got, want)
			}
		}
	}
	for _, sizes := range [][]int{{1}, {2}, {3, 7}, {4, 5, 6}, {5}, {11, 1, 2}, {4096}} {
		got, e1, e2 := feed(t, cli, srv, sizes)
		if e1 != nil || e2 != nil {
			t.Fatal(sizes, e1, e2)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("chunks %v:\n got  %v\n want %v", sizes, got, want)
		}
	}
}

func TestHugeDataRowAcrossChunks(t *testing.T) {
	r := newRig(t, Options{}).started()
	r.client(enc(&pgproto3.Query{String: "select big"}))
	const size = 64 << 20
	hdr := []byte{'D', 0, 0, 0, 0}
	binary.BigEndian.PutUint32(hdr[1:], uint32(size+4))
	r.server(hdr[:3])
	r.server(hdr[3:])
	chunk := make([]byte, 32<<10)
	for n := 0; n < size; n += len(chunk) {
		r.server(chunk[:min(len(chunk), size-n)])
	}
	r.server(enc(complete("SELECT 1"), ready))
	got := r.records()
	if len(got) != 1 || got[0].Down != int64(size+5+len(enc(complete("SELECT 1"), ready))) || got[0].Rows != 1 {
		t.Fatalf("records %v", got)
	}
}

func TestSteadyPathAllocatesOnlyInTheRegistry(t *testing.T) {
	r := newRig(t, Options{}).started()
	sel := "SELECT abalance FROM pgbench_accounts WHERE aid = $1"
	r.client(enc(&pgproto3.Parse{Name: "P0_1", Query: sel}, &pgproto3.Describe{ObjectType: 'S', Name: "P0_1"}, &pgproto3.Sync{}))
	r.server(enc(&pgproto3.ParseComplete{}, &pgproto3.ParameterDescription{}, rowDesc, ready))
	cli := enc(&pgproto3.Bind{PreparedStatement: "P0_1", Parameters: [][]byte{[]byte("12345")}}, &pgproto3.Execute{}, &pgproto3.Sync{})
	srv := enc(&pgproto3.BindComplete{}, dataRow("0"), complete("SELECT 1"), ready)
	now := time.Unix(0, 0)
	registry := testing.AllocsPerRun(200, func() {
		r.sess.Begin(sel, now).End(now, session.OK, 1, "")
	})
	observed := testing.AllocsPerRun(200, func() {
		r.client(cli)
		r.server(srv)
	})
	if observed > registry {
		t.Errorf("one statement through the observers allocates %.1f times, the registry alone %.1f", observed, registry)
	}
	// A result streaming through a running statement allocates nothing.
	r.client(enc(&pgproto3.Query{String: "copy t to stdout"}))
	r.server(enc(&pgproto3.CopyOutResponse{}))
	rows := enc(&pgproto3.CopyData{Data: []byte("1\tabc\n")}, dataRow("x", "y"))
	if n := testing.AllocsPerRun(1000, func() { r.server(rows) }); n != 0 {
		t.Errorf("streaming allocates %.1f times per chunk", n)
	}
}
