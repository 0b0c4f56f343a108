package admin

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/pgserver"
	"github.com/sluicelab/sluice/internal/sqlstate"
	"github.com/sluicelab/sluice/internal/wlm"
	"github.com/sluicelab/sluice/internal/wlm/ddl"
)

// Type OIDs of the columns the console returns: text for SHOW and the
// small SELECT, the column's type for SQL over the views.
const (
	boolOID   = 16
	int8OID   = 20
	textOID   = 25
	float8OID = 701
)

// maxMessage bounds a client message body, in bytes. A message
// announcing more ends the connection with FATAL 54000.
const maxMessage = 4 << 20

// conn is one client connection's statement handling; package pgserver
// serves the protocol around it. Used by the connection's goroutine
// only.
type conn struct {
	s  *Server
	pc *pgserver.Conn

	// actor is who the console's changes are recorded as.
	actor wlm.Actor
	// Client parameters set with SET (application_name, ...): accepted
	// for drivers' sake, with no effect.
	params map[string]string
	// Extended protocol state.
	stmts   map[string]*prepared
	portals map[string]*portal
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
	res     answer
	next    int // next row of res to send
}

// backend opens console sessions for package pgserver.
type backend struct{ s *Server }

// Check accepts every startup packet: the user is checked by
// authentication.
func (backend) Check(*pgserver.Startup) error { return nil }

// Cancel ignores cancel requests: console statements are not
// cancellable.
func (backend) Cancel(pgserver.Key) {}

func (b backend) Open(ctx context.Context, pc *pgserver.Conn, st *pgserver.Startup) (*pgserver.Session, error) {
	s := b.s
	c := &conn{s: s, pc: pc, stmts: map[string]*prepared{}, portals: map[string]*portal{}, params: map[string]string{}}
	for k, v := range st.Params {
		if clientParams[strings.ToLower(k)] {
			c.params[strings.ToLower(k)] = v
		}
	}
	c.actor = wlm.Actor{Surface: wlm.SurfaceConsole, User: st.User, Addr: pc.RemoteAddr().String()}
	s.log.Debug("admin console: connected", "client", pc.RemoteAddr().String(), "user", st.User)
	var key [8]byte
	rand.Read(key[:])
	return &pgserver.Session{
		Handler: c,
		Key:     pgserver.Key{ProcessID: binary.BigEndian.Uint32(key[:4]) & 0x7fffffff, Secret: key[4:]},
		Params: []pgserver.Param{
			{Name: "server_version", Value: s.version},
			{Name: "server_encoding", Value: "UTF8"},
			{Name: "client_encoding", Value: "UTF8"},
			{Name: "DateStyle", Value: "ISO, MDY"},
			{Name: "IntervalStyle", Value: "postgres"},
			{Name: "TimeZone", Value: "UTC"},
			{Name: "integer_datetimes", Value: "on"},
			{Name: "standard_conforming_strings", Value: "on"},
			{Name: "is_superuser", Value: "on"},
			{Name: "session_authorization", Value: st.User},
			{Name: "application_name", Value: st.Params["application_name"]},
		},
	}, nil
}

func (s *Server) serveConn(ctx context.Context, nc net.Conn) {
	err := pgserver.Serve(ctx, nc, &s.cfg, backend{s})
	log := s.log.With("client", nc.RemoteAddr().String())
	switch {
	case errors.Is(err, pgserver.ErrAuthFailed):
		log.Warn("admin console: authentication failed")
	case err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, net.ErrClosed) && ctx.Err() == nil:
		log.Debug("admin console: connection ended", "err", err)
	}
}

// TxStatus is always idle: the console has no transactions.
func (c *conn) TxStatus() byte { return 'I' }

// Sync drops the unnamed portal.
func (c *conn) Sync() { delete(c.portals, "") }

// End has nothing to release.
func (c *conn) End() {}

// Error converts err, a *ddl.Error or any other (internal_error).
func (c *conn) Error(err error) *pgproto3.ErrorResponse {
	e := &ddl.Error{Code: sqlstate.InternalError, Message: err.Error()}
	errors.As(err, &e)
	return &pgproto3.ErrorResponse{
		Severity: "ERROR", SeverityUnlocalized: "ERROR",
		Code: e.Code, Message: e.Message, Detail: e.Detail, Hint: e.Hint, Position: int32(e.Position),
	}
}

func (c *conn) sendNotices(res *answer) {
	for _, n := range res.Warnings {
		c.pc.Send(&pgproto3.NoticeResponse{Severity: "WARNING", SeverityUnlocalized: "WARNING", Code: sqlstate.Warning, Message: n})
	}
	for _, n := range res.Notices {
		c.pc.Send(&pgproto3.NoticeResponse{Severity: "NOTICE", SeverityUnlocalized: "NOTICE", Code: sqlstate.SuccessfulCompletion, Message: n})
	}
}

func rowDescription(res *answer, formats []int16) *pgproto3.RowDescription {
	rd := &pgproto3.RowDescription{Fields: make([]pgproto3.FieldDescription, len(res.Columns))}
	for i, name := range res.Columns {
		oid := res.oid(i)
		rd.Fields[i] = pgproto3.FieldDescription{
			Name: []byte(name), DataTypeOID: oid, DataTypeSize: typeSize(oid), TypeModifier: -1, Format: formatOf(formats, i),
		}
	}
	return rd
}

// formatOf returns the result format of column i under Bind's codes.
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

func dataRow(res *answer, r int, formats []int16) *pgproto3.DataRow {
	row := res.Rows[r]
	vals := make([][]byte, len(row))
	for i, v := range row {
		if v.Valid {
			vals[i] = encode(res.oid(i), v.String, formatOf(formats, i))
		}
	}
	return &pgproto3.DataRow{Values: vals}
}

// simpleQuery runs every statement of a Query message; the first error
// ends it.
func (c *conn) Query(ctx context.Context, sql string) error {
	sts, err := ddl.Parse(sql)
	if err != nil {
		return err
	}
	if len(sts) == 0 {
		c.pc.Send(&pgproto3.EmptyQueryResponse{})
		return nil
	}
	for _, st := range sts {
		res, err := c.exec(ctx, st)
		if err != nil {
			return err
		}
		if res.Columns != nil {
			c.pc.Send(rowDescription(&res, nil))
			for r := range res.Rows {
				c.pc.Send(dataRow(&res, r, nil))
			}
		}
		c.sendNotices(&res)
		c.pc.Send(&pgproto3.CommandComplete{CommandTag: []byte(res.Tag)})
	}
	return nil
}

func (c *conn) Parse(_ context.Context, m *pgproto3.Parse) error {
	sts, err := ddl.Parse(m.Query)
	if err != nil {
		return err
	}
	if len(sts) > 1 {
		return ddl.Errorf(sqlstate.SyntaxError, sts[1].Position(), "cannot insert multiple commands into a prepared statement")
	}
	if len(m.ParameterOIDs) > 0 {
		return ddl.Errorf(sqlstate.FeatureNotSupported, 0, "the admin console takes no statement parameters")
	}
	p := &prepared{}
	if len(sts) == 1 {
		p.st = sts[0]
	}
	c.stmts[m.Name] = p
	c.pc.Send(&pgproto3.ParseComplete{})
	return nil
}

func (c *conn) Bind(_ context.Context, m *pgproto3.Bind) error {
	p := c.stmts[m.PreparedStatement]
	if p == nil {
		return ddl.Errorf(sqlstate.InvalidSQLStatementName, 0, "prepared statement %q does not exist", m.PreparedStatement)
	}
	if len(m.Parameters) > 0 {
		return ddl.Errorf(sqlstate.ProtocolViolation, 0, "bind message supplies %d parameters, but prepared statement %q requires 0", len(m.Parameters), m.PreparedStatement)
	}
	c.portals[m.DestinationPortal] = &portal{p: p, formats: append([]int16(nil), m.ResultFormatCodes...)}
	c.pc.Send(&pgproto3.BindComplete{})
	return nil
}

// returnsRows reports whether st answers with rows.
func returnsRows(st ddl.Statement) bool {
	switch s := st.(type) {
	case *ddl.Show, *ddl.Select, *ddl.Query:
		return true
	case *ddl.SessionCommand:
		return s.Column != ""
	case *ddl.SessionQuery:
		return true
	}
	return false
}

func (c *conn) Describe(ctx context.Context, m *pgproto3.Describe) error {
	var p *prepared
	var formats []int16
	var pt *portal
	if m.ObjectType == 'S' {
		p = c.stmts[m.Name]
		if p == nil {
			return ddl.Errorf(sqlstate.InvalidSQLStatementName, 0, "prepared statement %q does not exist", m.Name)
		}
		c.pc.Send(&pgproto3.ParameterDescription{})
	} else {
		pt = c.portals[m.Name]
		if pt == nil {
			return ddl.Errorf(sqlstate.InvalidCursorName, 0, "portal %q does not exist", m.Name)
		}
		p, formats = pt.p, pt.formats
	}
	if p.st == nil || !returnsRows(p.st) {
		c.pc.Send(&pgproto3.NoData{})
		return nil
	}
	// A session function acts: its one column is known without running it.
	if sc, ok := p.st.(*ddl.SessionCommand); ok {
		c.pc.Send(rowDescription(&answer{Columns: []string{sc.Column}, OIDs: []uint32{boolOID}}, formats))
		return nil
	}
	if sq, ok := p.st.(*ddl.SessionQuery); ok {
		c.pc.Send(rowDescription(&answer{Columns: []string{sq.Column}, OIDs: []uint32{boolOID}}, formats))
		return nil
	}
	// SHOW and SELECT only read: running them tells their columns.
	res, err := c.exec(ctx, p.st)
	if err != nil {
		return err
	}
	if pt != nil {
		pt.ran, pt.res = true, res
	}
	c.pc.Send(rowDescription(&res, formats))
	return nil
}

func (c *conn) Execute(ctx context.Context, m *pgproto3.Execute) error {
	pt := c.portals[m.Portal]
	if pt == nil {
		return ddl.Errorf(sqlstate.InvalidCursorName, 0, "portal %q does not exist", m.Portal)
	}
	if pt.p.st == nil {
		c.pc.Send(&pgproto3.EmptyQueryResponse{})
		return nil
	}
	if !pt.ran {
		res, err := c.exec(ctx, pt.p.st)
		if err != nil {
			return err
		}
		pt.ran, pt.res = true, res
	}
	end := len(pt.res.Rows)
	if m.MaxRows > 0 && uint64(end-pt.next) > uint64(m.MaxRows) {
		for r := pt.next; r < pt.next+int(m.MaxRows); r++ {
			c.pc.Send(dataRow(&pt.res, r, pt.formats))
		}
		pt.next += int(m.MaxRows)
		c.pc.Send(&pgproto3.PortalSuspended{})
		return nil
	}
	for r := pt.next; r < end; r++ {
		c.pc.Send(dataRow(&pt.res, r, pt.formats))
	}
	pt.next = len(pt.res.Rows)
	c.sendNotices(&pt.res)
	c.pc.Send(&pgproto3.CommandComplete{CommandTag: []byte(pt.res.Tag)})
	return nil
}

// Close drops a statement or portal; dropping one that does not exist
// is not an error.
func (c *conn) Close(_ context.Context, m *pgproto3.Close) error {
	if m.ObjectType == 'S' {
		delete(c.stmts, m.Name)
	} else {
		delete(c.portals, m.Name)
	}
	c.pc.Send(&pgproto3.CloseComplete{})
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

// exec runs st: client parameters, RELOAD and SHOW CONFIG, SQL over the
// views and session commands here, everything else by the manager.
func (c *conn) exec(ctx context.Context, st ddl.Statement) (answer, error) {
	if p := c.s.pace; p != nil {
		if err := clock.SleepUntil(ctx, c.s.clk, p.Reserve(c.s.clk.Now(), 1)); err != nil {
			return answer{}, ddl.Errorf(sqlstate.QueryCanceled, 0, "the statement waited for its turn until its connection ended: %v", err)
		}
	}
	if c.s.sync != nil {
		if err := c.s.sync.SyncRegistry(ctx); err != nil {
			return answer{}, ddl.Errorf(sqlstate.QueryCanceled, 0, "the statement waited for the registry to catch up until its connection ended: %v", err)
		}
	}
	ctx = wlm.WithActor(ctx, c.actor)
	if res, ok, err := c.reloadStatement(ctx, st); ok {
		return textAnswer(res), err
	}
	if res, ok, err := c.fleetStatement(ctx, st); ok {
		return res, err
	}
	switch s := st.(type) {
	case *ddl.Query:
		return c.query(ctx, s)
	case *ddl.Select:
		if s.From != "" {
			q, err := ddl.QueryOf(s)
			if err != nil {
				return answer{}, err
			}
			return c.query(ctx, q)
		}
	case *ddl.SessionCommand:
		return c.sessionCommand(ctx, s)
	case *ddl.SessionQuery:
		return c.sessionQuery(ctx, s)
	case *ddl.Set:
		if clientParams[s.Name] {
			c.params[s.Name] = s.Value.Text
			if s.Value.Kind == ddl.Default {
				delete(c.params, s.Name)
			}
			return answer{Tag: "SET"}, nil
		}
	case *ddl.Reset:
		if clientParams[s.Name] {
			delete(c.params, s.Name)
			return answer{Tag: "RESET"}, nil
		}
	case *ddl.Show:
		if clientParams[s.Name] {
			return textAnswer(wlm.Result{Tag: "SHOW", Columns: []string{s.Name}, Rows: [][]string{{c.params[s.Name]}}}), nil
		}
	}
	res, err := c.s.catalog.ExecStatement(ctx, st)
	return textAnswer(res), err
}
