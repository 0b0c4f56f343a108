package pgserver

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/sluicelab/sluice/internal/pgserver/pgtest"
	"github.com/sluicelab/sluice/internal/testenv"
)

// memHandler answers every statement from memory: a Query or Execute
// of "fail" fails, a Parse of "bad" fails, anything else returns one row
// holding its text.
type memHandler struct {
	c        *Conn
	portals  map[string]string
	stmts    map[string]string
	ended    bool
	syncs    int
	failures int
}

func (h *memHandler) row(sql string) error {
	if sql == "fail" {
		return &Error{Code: "42000", Message: "failed as asked"}
	}
	h.c.Send(&pgproto3.RowDescription{Fields: []pgproto3.FieldDescription{{Name: []byte("q"), DataTypeOID: 25, DataTypeSize: -1, TypeModifier: -1}}})
	if err := h.c.WriteMessage('D', func(b []byte) ([]byte, error) {
		b = binary.BigEndian.AppendUint16(b, 1)
		b = binary.BigEndian.AppendUint32(b, uint32(len(sql)))
		return append(b, sql...), nil
	}); err != nil {
		return err
	}
	h.c.Send(&pgproto3.CommandComplete{CommandTag: []byte("SELECT 1")})
	return nil
}

// reply sends m, the whole answer to a message.
func (h *memHandler) reply(m pgproto3.BackendMessage) error {
	h.c.Send(m)
	return nil
}

func (h *memHandler) Query(_ context.Context, sql string) error { return h.row(sql) }
func (h *memHandler) Parse(_ context.Context, m *pgproto3.Parse) error {
	if m.Query == "bad" {
		return &Error{Code: "42601", Message: "syntax error"}
	}
	h.stmts[m.Name] = m.Query
	return h.reply(&pgproto3.ParseComplete{})
}
func (h *memHandler) Bind(_ context.Context, m *pgproto3.Bind) error {
	q, err := lookup(h.stmts, m.PreparedStatement, "26000")
	if err != nil {
		return err
	}
	h.portals[m.DestinationPortal] = q
	return h.reply(&pgproto3.BindComplete{})
}
func (h *memHandler) Describe(context.Context, *pgproto3.Describe) error {
	return h.reply(&pgproto3.NoData{})
}
func (h *memHandler) Execute(_ context.Context, m *pgproto3.Execute) error {
	q, err := lookup(h.portals, m.Portal, "34000")
	if err != nil {
		return err
	}
	return h.row(q)
}

// lookup finds a statement or portal, failing with code.
func lookup(m map[string]string, name, code string) (string, error) {
	q, ok := m[name]
	if !ok {
		return "", &Error{Code: code, Message: fmt.Sprintf("%q does not exist", name)}
	}
	return q, nil
}
func (h *memHandler) Close(context.Context, *pgproto3.Close) error {
	return h.reply(&pgproto3.CloseComplete{})
}
func (h *memHandler) Sync()          { h.syncs++ }
func (h *memHandler) TxStatus() byte { return 'I' }
func (h *memHandler) Error(err error) *pgproto3.ErrorResponse {
	h.failures++
	return Response(err)
}
func (h *memHandler) End() { h.ended = true }

// memBackend opens memHandlers and records cancel requests.
type memBackend struct {
	mu       sync.Mutex
	canceled []Key // guarded by mu
}

func (*memBackend) Check(st *Startup) error {
	if st.Params["database"] == "refused" {
		return &Error{Code: "3D000", Message: "database does not exist"}
	}
	return nil
}

func (*memBackend) Open(_ context.Context, c *Conn, st *Startup) (*Session, error) {
	h := &memHandler{c: c, portals: map[string]string{}, stmts: map[string]string{}}
	return &Session{Handler: h, Key: Key{ProcessID: 7, Secret: []byte{1, 2, 3, 4}}, Params: []Param{{"server_version", "15.0"}}}, nil
}

func (b *memBackend) Cancel(k Key) {
	b.mu.Lock()
	b.canceled = append(b.canceled, k)
	b.mu.Unlock()
}

// serve runs Serve on a loopback listener with cfg and returns its
// address.
func serve(t testing.TB, cfg *Config, b Backend) string {
	t.Helper()
	ctx := t.Context()
	return testenv.Serve(t, func(nc net.Conn) { Serve(ctx, nc, cfg, b) })
}

// client is a raw protocol client.
type client struct {
	*pgtest.Client
}

func dial(t testing.TB, addr string) *client {
	t.Helper()
	return &client{pgtest.Dial(t, addr, 10*time.Second)}
}

// trace receives messages until ReadyForQuery or the end of the
// connection and names them: "T D C Z", errors as "E:<code>".
func (c *client) trace() string {
	c.T.Helper()
	var out []string
	for {
		m, err := c.FE.Receive()
		if err != nil {
			out = append(out, "EOF")
			return strings.Join(out, " ")
		}
		switch m := m.(type) {
		case *pgproto3.ErrorResponse:
			out = append(out, m.Severity+":"+m.Code)
		case *pgproto3.ReadyForQuery:
			return strings.Join(append(out, "Z"), " ")
		default:
			out = append(out, strings.TrimPrefix(fmt.Sprintf("%T", m), "*pgproto3."))
		}
	}
}

func startup(params ...string) *pgproto3.StartupMessage {
	m := &pgproto3.StartupMessage{ProtocolVersion: pgproto3.ProtocolVersion30, Parameters: map[string]string{}}
	for i := 0; i+1 < len(params); i += 2 {
		m.Parameters[params[i]] = params[i+1]
	}
	return m
}

func TestStartup(t *testing.T) {
	for _, tc := range []struct {
		name   string
		auth   Auth
		msg    *pgproto3.StartupMessage
		sslReq bool
		want   string
	}{
		{"trust", Auth{}, startup("user", "u"), false,
			"AuthenticationOk ParameterStatus BackendKeyData Z"},
		{"ssl declined", Auth{}, startup("user", "u"), true,
			"AuthenticationOk ParameterStatus BackendKeyData Z"},
		{"no user", Auth{}, startup("database", "d"), false, "FATAL:28000 EOF"},
		{"unknown role", Auth{User: "admin"}, startup("user", "u"), false, "FATAL:28000 EOF"},
		{"refused by backend", Auth{}, startup("user", "u", "database", "refused"), false, "FATAL:3D000 EOF"},
		{"protocol extension", Auth{}, startup("user", "u", "_pq_.x", "1"), false,
			"NegotiateProtocolVersion AuthenticationOk ParameterStatus BackendKeyData Z"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := serve(t, &Config{Auth: tc.auth}, &memBackend{})
			c := dial(t, addr)
			if tc.sslReq {
				c.Send(&pgproto3.SSLRequest{})
				var b [1]byte
				if _, err := io.ReadFull(c.Conn, b[:]); err != nil || b[0] != 'N' {
					t.Fatalf("SSLRequest answered %q, %v", b, err)
				}
			}
			c.Send(tc.msg)
			if got := c.trace(); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// TestAuth authenticates a real client (pgconn) with each method.
func TestAuth(t *testing.T) {
	creds, err := NewCredentials(map[string]string{"admin": "s3cret"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, user, password string
		auth                 Auth
		wantCode             string // "" for success
	}{
		{"trust", "any", "", Auth{}, ""},
		{"scram", "admin", "s3cret", Auth{Method: SCRAM, Credentials: creds}, ""},
		{"scram wrong password", "admin", "nope", Auth{Method: SCRAM, Credentials: creds}, "28P01"},
		{"scram unknown user", "eve", "s3cret", Auth{Method: SCRAM, Credentials: creds}, "28P01"},
		{"cleartext", "u", "pw", Auth{Method: Cleartext, Password: "pw"}, ""},
		{"cleartext wrong user", "v", "pw", Auth{Method: Cleartext, Password: "pw", User: "u"}, "28P01"},
		{"md5", "u", "pw", Auth{Method: MD5, Password: "pw"}, ""},
		{"md5 wrong password", "u", "px", Auth{Method: MD5, Password: "pw"}, "28P01"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := serve(t, &Config{Auth: tc.auth, AuthTimeout: 10 * time.Second}, &memBackend{})
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			url := fmt.Sprintf("postgres://%s:%s@%s/db?sslmode=disable", tc.user, tc.password, addr)
			conn, err := pgconn.Connect(ctx, url)
			if tc.wantCode == "" {
				if err != nil {
					t.Fatal(err)
				}
				defer conn.Close(ctx)
				if _, err := conn.Exec(ctx, "hello").ReadAll(); err != nil {
					t.Fatal(err)
				}
				return
			}
			var pe *pgconn.PgError
			if !errors.As(err, &pe) || pe.Code != tc.wantCode {
				t.Fatalf("got %v, want SQLSTATE %s", err, tc.wantCode)
			}
		})
	}
}

// TestMessages drives the loop after startup with message sequences.
func TestMessages(t *testing.T) {
	for _, tc := range []struct {
		name string
		msgs []pgproto3.FrontendMessage
		want []string // one trace per ReadyForQuery expected
	}{
		{"simple", []pgproto3.FrontendMessage{&pgproto3.Query{String: "x"}},
			[]string{"RowDescription DataRow CommandComplete Z"}},
		{"simple error", []pgproto3.FrontendMessage{&pgproto3.Query{String: "fail"}},
			[]string{"ERROR:42000 Z"}},
		{"extended", []pgproto3.FrontendMessage{&pgproto3.Parse{Query: "x"}, &pgproto3.Bind{}, &pgproto3.Describe{ObjectType: 'P'},
			&pgproto3.Execute{}, &pgproto3.Close{ObjectType: 'P'}, &pgproto3.Sync{}},
			[]string{"ParseComplete BindComplete NoData RowDescription DataRow CommandComplete CloseComplete Z"}},
		{"error skips to sync", []pgproto3.FrontendMessage{&pgproto3.Parse{Query: "bad"}, &pgproto3.Bind{}, &pgproto3.Execute{},
			&pgproto3.Query{String: "skipped"}, &pgproto3.Sync{}, &pgproto3.Query{String: "after"}},
			[]string{"ERROR:42601 Z", "RowDescription DataRow CommandComplete Z"}},
		{"execute error", []pgproto3.FrontendMessage{&pgproto3.Parse{Query: "fail"}, &pgproto3.Bind{}, &pgproto3.Execute{}, &pgproto3.Sync{}},
			[]string{"ParseComplete BindComplete ERROR:42000 Z"}},
		{"copy data outside copy", []pgproto3.FrontendMessage{&pgproto3.CopyData{Data: []byte("x")}, &pgproto3.CopyDone{}, &pgproto3.Sync{}},
			[]string{"Z"}},
		{"function call", []pgproto3.FrontendMessage{&pgproto3.FunctionCall{}},
			[]string{"ERROR:0A000 Z"}},
		{"unexpected message", []pgproto3.FrontendMessage{&pgproto3.PasswordMessage{Password: "x"}, &pgproto3.Sync{}},
			[]string{"ERROR:08P01 Z"}},
		{"terminate", []pgproto3.FrontendMessage{&pgproto3.Terminate{}},
			[]string{"EOF"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dial(t, serve(t, &Config{}, &memBackend{}))
			c.Send(startup("user", "u"))
			c.trace()
			c.Send(tc.msgs...)
			for _, want := range tc.want {
				if got := c.trace(); got != want {
					t.Errorf("got %q, want %q", got, want)
				}
			}
		})
	}
}

// TestBadInput: malformed bytes end the connection with FATAL 08P01;
// an over-limit message with FATAL 54000.
func TestBadInput(t *testing.T) {
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"unknown type", []byte{'!', 0, 0, 0, 4}, "FATAL:08P01 EOF"},
		{"short length", []byte{'Q', 0, 0, 0, 1}, "FATAL:08P01 EOF"},
		{"bad bind body", []byte{'B', 0, 0, 0, 5, 'x'}, "FATAL:08P01 EOF"},
		{"over limit", []byte{'Q', 0, 0, 8, 0}, "FATAL:54000 EOF"},
		{"truncated", []byte{'Q', 0, 0, 0, 9, 'x'}, "EOF"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dial(t, serve(t, &Config{MaxMessage: 1 << 10}, &memBackend{}))
			c.Send(startup("user", "u"))
			c.trace()
			c.Conn.Write(tc.data)
			c.Conn.(*net.TCPConn).CloseWrite()
			if got := c.trace(); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// TestCancelRequest: a CancelRequest reaches Backend.Cancel with its key
// and the connection closes.
func TestCancelRequest(t *testing.T) {
	b := &memBackend{}
	c := dial(t, serve(t, &Config{}, b))
	c.Send(&pgproto3.CancelRequest{ProcessID: 7, SecretKey: []byte{1, 2, 3, 4}})
	if got := c.trace(); got != "EOF" {
		t.Fatalf("got %q, want EOF", got)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.canceled) != 1 || b.canceled[0].ProcessID != 7 || string(b.canceled[0].Secret) != "\x01\x02\x03\x04" {
		t.Errorf("canceled %v", b.canceled)
	}
}
