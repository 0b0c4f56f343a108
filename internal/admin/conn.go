package admin

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/xdg-go/scram"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/linger"
	"github.com/sluicelab/sluice/internal/wlm"
	"github.com/sluicelab/sluice/internal/wlm/ddl"
)

// textOID is the type of every column the console returns.
const textOID = 25

// maxMessage bounds a client message body, in bytes. A message
// announcing more ends the connection with FATAL 54000.
const maxMessage = 4 << 20

// SQLSTATEs the console sends that package ddl does not name.
const (
	codeInvalidAuthorization = "28000" // invalid_authorization_specification
	codeProgramLimitExceeded = "54000" // program_limit_exceeded
)

// conn is one client connection.
type conn struct {
	s    *Server
	nc   net.Conn
	be   *pgproto3.Backend
	user string

	// Client parameters set with SET (application_name, ...): accepted
	// for drivers' sake, with no effect. Used by the connection's
	// goroutine only.
	params map[string]string
	// Extended protocol state, used by the connection's goroutine only.
	stmts   map[string]*prepared
	portals map[string]*portal
	skip    bool // after an error: discard messages until Sync
}

// prepared is a parsed statement of the extended protocol.
type prepared struct {
	st ddl.Statement // nil for an empty query
}

// portal is a bound statement, possibly partly executed.
type portal struct {
	p       *prepared
	formats []int16 // result format codes as Bind gave them
	ran     bool    // the statement has been executed
	res     wlm.Result
	next    int // next row of res to send
}

// fatal sends a FATAL error and flushes it.
func (c *conn) fatal(code, format string, args ...any) {
	c.be.Send(&pgproto3.ErrorResponse{Severity: "FATAL", SeverityUnlocalized: "FATAL", Code: code, Message: fmt.Sprintf(format, args...)})
	c.be.Flush()
}

func (s *Server) serveConn(ctx context.Context, nc net.Conn) {
	c := &conn{s: s, nc: nc, be: pgproto3.NewBackend(nc, nc), stmts: map[string]*prepared{}, portals: map[string]*portal{}, params: map[string]string{}}
	c.be.SetMaxBodyLen(maxMessage)
	nc.SetDeadline(clock.SocketDeadline(AuthTimeout))
	startup, ok := c.startup()
	if !ok {
		return
	}
	c.user = startup.Parameters["user"]
	for k, v := range startup.Parameters {
		if clientParams[strings.ToLower(k)] {
			c.params[strings.ToLower(k)] = v
		}
	}
	if c.user == "" {
		c.fatal(codeInvalidAuthorization, "no user name specified in startup packet")
		return
	}
	log := s.log.With("client", nc.RemoteAddr().String(), "user", c.user)
	// Downgrade clients that ask for a newer minor version or protocol
	// extensions to plain 3.0.
	var unknown []string
	for k := range startup.Parameters {
		if strings.HasPrefix(k, "_pq_.") {
			unknown = append(unknown, k)
		}
	}
	if startup.ProtocolVersion != pgproto3.ProtocolVersion30 || len(unknown) > 0 {
		c.be.Send(&pgproto3.NegotiateProtocolVersion{NewestMinorProtocol: 0, UnrecognizedOptions: unknown})
	}
	if !c.authenticate(ctx) {
		log.Warn("admin console: authentication failed")
		return
	}
	nc.SetDeadline(time.Time{})
	log.Info("admin console: connected")
	c.be.Send(&pgproto3.AuthenticationOk{})
	params := [][2]string{
		{"server_version", s.version},
		{"server_encoding", "UTF8"},
		{"client_encoding", "UTF8"},
		{"DateStyle", "ISO, MDY"},
		{"IntervalStyle", "postgres"},
		{"TimeZone", "UTC"},
		{"integer_datetimes", "on"},
		{"standard_conforming_strings", "on"},
		{"is_superuser", "on"},
		{"session_authorization", c.user},
		{"application_name", startup.Parameters["application_name"]},
	}
	for _, p := range params {
		c.be.Send(&pgproto3.ParameterStatus{Name: p[0], Value: p[1]})
	}
	var key [8]byte
	rand.Read(key[:])
	c.be.Send(&pgproto3.BackendKeyData{ProcessID: binary.BigEndian.Uint32(key[:4]) & 0x7fffffff, SecretKey: key[4:]})
	c.ready()
	if err := c.loop(ctx); err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && ctx.Err() == nil {
		log.Debug("admin console: connection ended", "err", err)
	}
}

// startup reads the startup packet, refusing SSL and GSS encryption.
func (c *conn) startup() (*pgproto3.StartupMessage, bool) {
	for {
		msg, err := c.be.ReceiveStartupMessage()
		if err != nil {
			return nil, false
		}
		switch m := msg.(type) {
		case *pgproto3.SSLRequest, *pgproto3.GSSEncRequest:
			if _, err := c.nc.Write([]byte{'N'}); err != nil {
				return nil, false
			}
		case *pgproto3.StartupMessage:
			return m, true
		default:
			// CancelRequest: console statements are not cancellable.
			return nil, false
		}
	}
}

// authenticate runs SCRAM-SHA-256, or with AllowNoPassword accepts
// DefaultUser only. Unknown users go through the same exchange with decoy
// credentials, so a client cannot tell them from a wrong password.
func (c *conn) authenticate(ctx context.Context) bool {
	if c.s.trust {
		if c.user != DefaultUser {
			c.fatal(codeInvalidAuthorization, "role %q does not exist", c.user)
			return false
		}
		return true
	}
	creds, known := c.s.creds[c.user]
	if !known {
		creds = c.s.decoy
	}
	srv, err := scram.SHA256.NewServer(func(string) (scram.StoredCredentials, error) { return creds, nil })
	if err != nil {
		c.fatal(ddl.CodeInternal, "authentication setup failed")
		return false
	}
	conv := srv.NewConversation()
	failed := func() bool {
		c.fatal(ddl.CodeInvalidPassword, "password authentication failed for user %q", c.user)
		return false
	}
	c.be.Send(&pgproto3.AuthenticationSASL{AuthMechanisms: []string{"SCRAM-SHA-256"}})
	if err := c.be.Flush(); err != nil {
		return false
	}
	if err := c.be.SetAuthType(pgproto3.AuthTypeSASL); err != nil {
		return false
	}
	msg, err := c.receive(ctx)
	if err != nil {
		return false
	}
	first, ok := msg.(*pgproto3.SASLInitialResponse)
	if !ok {
		c.fatal(ddl.CodeProtocolViolation, "expected SASL response, got %T", msg)
		return false
	}
	if first.AuthMechanism != "SCRAM-SHA-256" {
		c.fatal(ddl.CodeProtocolViolation, "client selected an invalid SASL authentication mechanism")
		return false
	}
	out, err := conv.Step(string(first.Data))
	if err != nil {
		return failed()
	}
	c.be.Send(&pgproto3.AuthenticationSASLContinue{Data: []byte(out)})
	if err := c.be.Flush(); err != nil {
		return false
	}
	if err := c.be.SetAuthType(pgproto3.AuthTypeSASLContinue); err != nil {
		return false
	}
	msg, err = c.receive(ctx)
	if err != nil {
		return false
	}
	final, ok := msg.(*pgproto3.SASLResponse)
	if !ok {
		c.fatal(ddl.CodeProtocolViolation, "expected SASL response, got %T", msg)
		return false
	}
	out, err = conv.Step(string(final.Data))
	if err != nil || !conv.Valid() || !known {
		return failed()
	}
	c.be.Send(&pgproto3.AuthenticationSASLFinal{Data: []byte(out)})
	return true
}

// lingerTimeout bounds how long a connection ended mid-message keeps
// reading what the client still sends, so the client can read the FATAL
// error instead of having its write reset.
const lingerTimeout = 5 * time.Second

// receive reads the next client message. A message longer than
// maxMessage is answered with FATAL 54000, and the rest of it drained
// (package linger), before the error is returned, so the client learns
// why the connection ends.
func (c *conn) receive(ctx context.Context) (pgproto3.FrontendMessage, error) {
	msg, err := c.be.Receive()
	var tooLong *pgproto3.ExceededMaxBodyLenErr
	if errors.As(err, &tooLong) {
		c.fatal(codeProgramLimitExceeded, "message of %d bytes exceeds the console's limit of %d bytes", tooLong.ActualBodyLen, tooLong.MaxExpectedBodyLen)
		linger.Drain(ctx, c.nc, c.s.clk, int64(tooLong.ActualBodyLen), lingerTimeout)
	}
	return msg, err
}

// ready sends ReadyForQuery and flushes.
func (c *conn) ready() error {
	c.be.Send(&pgproto3.ReadyForQuery{TxStatus: 'I'})
	return c.be.Flush()
}

// sendError sends err as an ErrorResponse.
func (c *conn) sendError(err error) {
	e := &ddl.Error{Code: ddl.CodeInternal, Message: err.Error()}
	errors.As(err, &e)
	c.be.Send(&pgproto3.ErrorResponse{
		Severity: "ERROR", SeverityUnlocalized: "ERROR",
		Code: e.Code, Message: e.Message, Detail: e.Detail, Hint: e.Hint, Position: int32(e.Position),
	})
}

func (c *conn) sendNotices(res *wlm.Result) {
	for _, n := range res.Notices {
		c.be.Send(&pgproto3.NoticeResponse{Severity: "NOTICE", SeverityUnlocalized: "NOTICE", Code: "00000", Message: n})
	}
}

func rowDescription(cols []string, formats []int16) *pgproto3.RowDescription {
	rd := &pgproto3.RowDescription{Fields: make([]pgproto3.FieldDescription, len(cols))}
	for i, name := range cols {
		rd.Fields[i] = pgproto3.FieldDescription{
			Name: []byte(name), DataTypeOID: textOID, DataTypeSize: -1, TypeModifier: -1, Format: formatOf(formats, i),
		}
	}
	return rd
}

// formatOf returns the result format of column i under Bind's codes. The
// binary format of text is its bytes, so the values sent are the same.
func formatOf(formats []int16, i int) int16 {
	switch len(formats) {
	case 0:
		return 0
	case 1:
		return formats[0]
	}
	if i < len(formats) {
		return formats[i]
	}
	return 0
}

func dataRow(row []string) *pgproto3.DataRow {
	vals := make([][]byte, len(row))
	for i, v := range row {
		vals[i] = []byte(v)
	}
	return &pgproto3.DataRow{Values: vals}
}

func (c *conn) loop(ctx context.Context) error {
	for {
		msg, err := c.receive(ctx)
		if err != nil {
			return err
		}
		if _, ok := msg.(*pgproto3.Terminate); ok {
			return nil
		}
		if c.skip {
			if _, ok := msg.(*pgproto3.Sync); !ok {
				continue
			}
		}
		switch m := msg.(type) {
		case *pgproto3.Query:
			c.simpleQuery(ctx, m.String)
			err = c.ready()
		case *pgproto3.Parse:
			err = c.parse(m)
		case *pgproto3.Bind:
			err = c.bind(m)
		case *pgproto3.Describe:
			err = c.describe(ctx, m)
		case *pgproto3.Execute:
			err = c.execute(ctx, m)
		case *pgproto3.Close:
			if m.ObjectType == 'S' {
				delete(c.stmts, m.Name)
			} else {
				delete(c.portals, m.Name)
			}
			c.be.Send(&pgproto3.CloseComplete{})
		case *pgproto3.Sync:
			c.skip = false
			delete(c.portals, "")
			err = c.ready()
		case *pgproto3.Flush:
			err = c.be.Flush()
		default:
			err = c.fail(ddl.Errorf(ddl.CodeProtocolViolation, 0, "unsupported message %T", msg))
		}
		if err != nil {
			return err
		}
	}
}

// fail reports err in the extended protocol: it sends the error and
// discards messages until Sync.
func (c *conn) fail(err error) error {
	c.sendError(err)
	c.skip = true
	return c.be.Flush()
}

// simpleQuery runs every statement of a Query message; the first error
// ends it.
func (c *conn) simpleQuery(ctx context.Context, sql string) {
	sts, err := ddl.Parse(sql)
	if err != nil {
		c.sendError(err)
		return
	}
	if len(sts) == 0 {
		c.be.Send(&pgproto3.EmptyQueryResponse{})
		return
	}
	for _, st := range sts {
		res, err := c.exec(ctx, st)
		if err != nil {
			c.sendError(err)
			return
		}
		if res.Columns != nil {
			c.be.Send(rowDescription(res.Columns, nil))
			for _, row := range res.Rows {
				c.be.Send(dataRow(row))
			}
		}
		c.sendNotices(&res)
		c.be.Send(&pgproto3.CommandComplete{CommandTag: []byte(res.Tag)})
	}
}

func (c *conn) parse(m *pgproto3.Parse) error {
	sts, err := ddl.Parse(m.Query)
	if err != nil {
		return c.fail(err)
	}
	if len(sts) > 1 {
		return c.fail(ddl.Errorf(ddl.CodeSyntax, sts[1].Position(), "cannot insert multiple commands into a prepared statement"))
	}
	if len(m.ParameterOIDs) > 0 {
		return c.fail(ddl.Errorf(ddl.CodeNotSupported, 0, "the admin console takes no statement parameters"))
	}
	p := &prepared{}
	if len(sts) == 1 {
		p.st = sts[0]
	}
	c.stmts[m.Name] = p
	c.be.Send(&pgproto3.ParseComplete{})
	return nil
}

func (c *conn) bind(m *pgproto3.Bind) error {
	p := c.stmts[m.PreparedStatement]
	if p == nil {
		return c.fail(ddl.Errorf("26000", 0, "prepared statement %q does not exist", m.PreparedStatement))
	}
	if len(m.Parameters) > 0 {
		return c.fail(ddl.Errorf(ddl.CodeProtocolViolation, 0, "bind message supplies %d parameters, but prepared statement %q requires 0", len(m.Parameters), m.PreparedStatement))
	}
	c.portals[m.DestinationPortal] = &portal{p: p, formats: append([]int16(nil), m.ResultFormatCodes...)}
	c.be.Send(&pgproto3.BindComplete{})
	return nil
}

// returnsRows reports whether st answers with rows.
func returnsRows(st ddl.Statement) bool {
	switch st.(type) {
	case *ddl.Show, *ddl.Select:
		return true
	}
	return false
}

func (c *conn) describe(ctx context.Context, m *pgproto3.Describe) error {
	var p *prepared
	var formats []int16
	var pt *portal
	if m.ObjectType == 'S' {
		p = c.stmts[m.Name]
		if p == nil {
			return c.fail(ddl.Errorf("26000", 0, "prepared statement %q does not exist", m.Name))
		}
		c.be.Send(&pgproto3.ParameterDescription{})
	} else {
		pt = c.portals[m.Name]
		if pt == nil {
			return c.fail(ddl.Errorf("34000", 0, "portal %q does not exist", m.Name))
		}
		p, formats = pt.p, pt.formats
	}
	if p.st == nil || !returnsRows(p.st) {
		c.be.Send(&pgproto3.NoData{})
		return nil
	}
	// SHOW and SELECT only read: running them tells their columns.
	res, err := c.exec(ctx, p.st)
	if err != nil {
		return c.fail(err)
	}
	if pt != nil {
		pt.ran, pt.res = true, res
	}
	c.be.Send(rowDescription(res.Columns, formats))
	return nil
}

func (c *conn) execute(ctx context.Context, m *pgproto3.Execute) error {
	pt := c.portals[m.Portal]
	if pt == nil {
		return c.fail(ddl.Errorf("34000", 0, "portal %q does not exist", m.Portal))
	}
	if pt.p.st == nil {
		c.be.Send(&pgproto3.EmptyQueryResponse{})
		return nil
	}
	if !pt.ran {
		res, err := c.exec(ctx, pt.p.st)
		if err != nil {
			return c.fail(err)
		}
		pt.ran, pt.res = true, res
	}
	rows := pt.res.Rows[pt.next:]
	if m.MaxRows > 0 && uint64(len(rows)) > uint64(m.MaxRows) {
		for _, row := range rows[:m.MaxRows] {
			c.be.Send(dataRow(row))
		}
		pt.next += int(m.MaxRows)
		c.be.Send(&pgproto3.PortalSuspended{})
		return nil
	}
	for _, row := range rows {
		c.be.Send(dataRow(row))
	}
	pt.next = len(pt.res.Rows)
	c.sendNotices(&pt.res)
	c.be.Send(&pgproto3.CommandComplete{CommandTag: []byte(pt.res.Tag)})
	return nil
}

// clientParams are PostgreSQL session settings that drivers set on
// connect. The console accepts SET, RESET and SHOW of them so those
// drivers work; they change nothing.
var clientParams = map[string]bool{
	"application_name": true, "client_encoding": true, "datestyle": true,
	"extra_float_digits": true, "intervalstyle": true, "timezone": true,
	"search_path": true, "statement_timeout": true, "client_min_messages": true,
	"lock_timeout": true, "idle_in_transaction_session_timeout": true,
	"standard_conforming_strings": true, "bytea_output": true,
}

// exec runs st: client parameters here, everything else by the manager.
func (c *conn) exec(ctx context.Context, st ddl.Statement) (wlm.Result, error) {
	switch s := st.(type) {
	case *ddl.Set:
		if clientParams[s.Name] {
			c.params[s.Name] = s.Value.Text
			if s.Value.Kind == ddl.Default {
				delete(c.params, s.Name)
			}
			return wlm.Result{Tag: "SET"}, nil
		}
	case *ddl.Reset:
		if clientParams[s.Name] {
			delete(c.params, s.Name)
			return wlm.Result{Tag: "RESET"}, nil
		}
	case *ddl.Show:
		if clientParams[s.Name] {
			return wlm.Result{Tag: "SHOW", Columns: []string{s.Name}, Rows: [][]string{{c.params[s.Name]}}}, nil
		}
	}
	return c.s.mgr.ExecStatement(ctx, st)
}
