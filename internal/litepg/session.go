package litepg

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5/pgproto3"
	sqlite "modernc.org/sqlite"

	"github.com/sluicelab/sluice/internal/pgserver"
	"github.com/sluicelab/sluice/internal/sqlstate"
)

// Limits of the per-session caches.
const (
	maxParsed  = 512 // described statements by query text
	maxPooled  = 256 // prepared SQLite statements by SQLite text
	maxSchemas = 256 // tables whose columns are cached
)

// prepared is a described statement: a Parse result or one statement of
// a simple query. It is immutable once built and may be shared by
// several statement names.
type prepared struct {
	st        *stmt
	paramOIDs []uint32
	// cols are the result columns; nil for statements without rows. A
	// simple query describes its columns from the rows instead.
	cols []column
}

// column is a described result column.
type column struct {
	name string
	oid  uint32
}

// sqlStmt is a prepared SQLite statement. busy marks one whose rows are
// open in a suspended portal.
type sqlStmt struct {
	sq   driver.Stmt
	busy bool
}

// portal is a bound statement ready to run.
type portal struct {
	p       *prepared
	args    []driver.NamedValue
	formats []int16 // per result column, nil = all text
	// An open cursor of a portal suspended by an Execute row limit.
	rows    driver.Rows
	ss      *sqlStmt
	ownStmt bool   // ss was prepared for this portal alone
	release func() // gives back the write lock the rows hold
	sent    int64
}

// tableCol is a column of a table in the schema cache.
type tableCol struct {
	name string // lower case
	oid  uint32 // declared type, oidUnknown if none
}

// session is one client connection. Everything but the cancellation
// fields is owned by the session's goroutine.
type session struct {
	srv     *Server
	pc      *pgserver.Conn
	db      driver.Conn
	baseCtx context.Context

	pid    uint32
	secret [4]byte
	env    env
	params map[string]string // settings for SHOW, lower-case names

	// Transaction state.
	txStatus     byte // 'I' idle, 'T' in a block, 'E' failed block
	txBegun      bool // the SQLite transaction of the block has begun
	txReadOnly   bool // BEGIN READ ONLY
	txImmediate  bool // BEGIN IMMEDIATE
	txWrote      bool // the block ran a statement that writes
	holdsLock    bool // the block holds the server's write lock
	predictWrite bool // the previous block wrote (TxAdaptive)

	stmts   map[string]*prepared
	portals map[string]*portal

	parsed    map[string]*prepared
	pool      map[string]*sqlStmt
	schema    map[string][]tableCol
	schemaGen uint64

	dest  []driver.Value
	field []byte // one COPY field being rendered

	startParams map[string]string // settings from the startup packet

	cancelMu sync.Mutex // guards the fields below
	// running is set while a statement executes; a CancelRequest that
	// arrives at another time is ignored, as in PostgreSQL.
	running    bool
	stmtCtx    context.Context
	stmtCancel context.CancelFunc
	canceled   bool // the running statement was canceled
}

func newSession(ctx context.Context, srv *Server, pc *pgserver.Conn) *session {
	return &session{
		srv:         srv,
		pc:          pc,
		baseCtx:     ctx,
		txStatus:    'I',
		params:      map[string]string{},
		startParams: map[string]string{},
		stmts:       map[string]*prepared{},
		portals:     map[string]*portal{},
		parsed:      map[string]*prepared{},
		pool:        map[string]*sqlStmt{},
		schema:      map[string][]tableCol{},
	}
}

// End rolls back an open transaction and releases everything the
// session holds.
func (s *session) End() {
	s.closePortals()
	if s.txStatus != 'I' {
		s.endTx(false)
	}
	for _, ss := range s.pool {
		ss.sq.Close()
	}
	s.pool = nil
	if s.db != nil {
		s.db.Close()
	}
	s.srv.unregister(s)
	s.cancelMu.Lock()
	if s.stmtCancel != nil {
		s.stmtCancel()
	}
	s.cancelMu.Unlock()
}

// send buffers a message for the client.
func (s *session) send(m pgproto3.BackendMessage) { s.pc.Send(m) }

// flush writes buffered messages to the client.
func (s *session) flush() error { return s.pc.Flush() }

// TxStatus is the transaction status: 'I', 'T' or 'E'.
func (s *session) TxStatus() byte { return s.txStatus }

// Error converts a statement error and marks a transaction block
// failed.
func (s *session) Error(err error) *pgproto3.ErrorResponse {
	if s.txStatus == 'T' {
		s.txStatus = 'E'
	}
	var r pgserver.Responder
	if errors.As(err, &r) {
		return r.ErrorResponse()
	}
	return toPGError(err).ErrorResponse()
}

// Sync closes every portal outside a transaction block.
func (s *session) Sync() {
	if s.txStatus == 'I' {
		s.closePortals()
	}
}

// Query runs a Query message: each statement in turn, stopping at the
// first error.
func (s *session) Query(_ context.Context, q string) error {
	defer func() {
		s.closeUnnamed()
		if s.txStatus == 'I' {
			s.closePortals()
		}
	}()
	sts, err := translate(q, s.env)
	if err != nil {
		return err
	}
	for _, st := range sts {
		if st.nparams > 0 {
			return &pgError{code: sqlstate.UndefinedParameter, msg: "there is no parameter $1"}
		}
		pt := &portal{p: &prepared{st: st}}
		err = s.execute(pt, 0, true)
		s.closePortal(pt)
		if err != nil {
			return err
		}
	}
	return nil
}

// closeUnnamed drops the unnamed statement and portal, as a simple Query
// does in PostgreSQL.
func (s *session) closeUnnamed() {
	delete(s.stmts, "")
	if pt := s.portals[""]; pt != nil {
		s.closePortal(pt)
		delete(s.portals, "")
	}
}

// Parse prepares a statement.
func (s *session) Parse(_ context.Context, m *pgproto3.Parse) error {
	if m.Name != "" {
		if _, exists := s.stmts[m.Name]; exists {
			return &pgError{code: sqlstate.DuplicatePreparedStatement, msg: fmt.Sprintf("prepared statement %q already exists", m.Name)}
		}
	}
	p, err := s.prepare(m.Query, m.ParameterOIDs)
	if err != nil {
		return err
	}
	s.stmts[m.Name] = p
	s.send(&pgproto3.ParseComplete{})
	return nil
}

// prepare translates and describes a statement for the extended protocol.
// Results are cached by query text and parameter types until the schema
// changes.
func (s *session) prepare(query string, oids []uint32) (*prepared, error) {
	s.checkSchemaGen()
	key := query
	if len(oids) > 0 {
		var b strings.Builder
		b.WriteString(query)
		for _, o := range oids {
			b.WriteByte(0)
			b.WriteString(strconv.FormatUint(uint64(o), 10))
		}
		key = b.String()
	}
	if p, ok := s.parsed[key]; ok {
		return p, nil
	}
	sts, err := translate(query, s.env)
	if err != nil {
		return nil, err
	}
	if len(sts) > 1 {
		return nil, syntaxErrorf("cannot insert multiple commands into a prepared statement")
	}
	st := sts[0]
	p := &prepared{st: st}
	n := max(st.nparams, len(oids))
	p.paramOIDs = make([]uint32, n)
	for i := range p.paramOIDs {
		switch {
		case i < len(oids) && oids[i] != 0:
			p.paramOIDs[i] = oids[i]
		case i < len(st.params):
			p.paramOIDs[i] = paramOID(s.resolve(st.params[i], st))
		default:
			p.paramOIDs[i] = oidText
		}
	}
	switch st.kind {
	case skQuery:
		if _, err := s.sqlStmt(st.sql); err != nil {
			return nil, err
		}
		ci, ok := s.db.(interface {
			ColumnInfo(query string) ([]sqlite.ColumnInfo, error)
		})
		if !ok {
			return nil, errors.New("litepg: SQLite driver lacks ColumnInfo")
		}
		infos, err := ci.ColumnInfo(st.sql)
		if err != nil {
			return nil, err
		}
		names := make([]string, len(infos))
		decls := make([]string, len(infos))
		for i, in := range infos {
			names[i], decls[i] = in.Name, in.DeclType
		}
		p.cols = s.columns(st, names, decls, nil)
	case skExec, skExplain:
		if _, err := s.sqlStmt(st.sql); err != nil {
			return nil, err
		}
		if st.kind == skExplain {
			p.cols = []column{{name: "QUERY PLAN", oid: oidText}}
		}
	case skShow:
		if st.setName == "all" {
			p.cols = []column{{"name", oidText}, {"setting", oidText}, {"description", oidText}}
		} else {
			p.cols = []column{{name: showName(st.setName), oid: oidText}}
		}
	case skCopy:
		if st.copy.query != nil {
			if _, err := s.sqlStmt(st.copy.query.sql); err != nil {
				return nil, err
			}
		}
	}
	if len(s.parsed) >= maxParsed {
		clear(s.parsed)
	}
	s.parsed[key] = p
	return p, nil
}

// Bind creates a portal from a prepared statement.
func (s *session) Bind(_ context.Context, m *pgproto3.Bind) error {
	p, ok := s.stmts[m.PreparedStatement]
	if !ok {
		return &pgError{code: sqlstate.InvalidSQLStatementName, msg: fmt.Sprintf("prepared statement %q does not exist", m.PreparedStatement)}
	}
	if len(m.Parameters) != len(p.paramOIDs) {
		return &pgError{code: sqlstate.ProtocolViolation, msg: fmt.Sprintf("bind message supplies %d parameters, but prepared statement %q requires %d",
			len(m.Parameters), m.PreparedStatement, len(p.paramOIDs))}
	}
	pf := m.ParameterFormatCodes
	if len(pf) > 1 && len(pf) != len(m.Parameters) {
		return &pgError{code: sqlstate.ProtocolViolation, msg: fmt.Sprintf("bind message has %d parameter formats but %d parameters", len(pf), len(m.Parameters))}
	}
	var pt *portal
	if old, exists := s.portals[m.DestinationPortal]; exists {
		if m.DestinationPortal != "" {
			return &pgError{code: sqlstate.DuplicateCursor, msg: fmt.Sprintf("cursor %q already exists", m.DestinationPortal)}
		}
		s.closePortal(old)
		pt = old // reuse the unnamed portal's memory
		*pt = portal{args: pt.args[:0], formats: pt.formats[:0]}
	} else {
		pt = &portal{}
	}
	pt.p = p
	for i, raw := range m.Parameters {
		var f int16
		switch len(pf) {
		case 0:
		case 1:
			f = pf[0]
		default:
			f = pf[i]
		}
		v, err := decodeParam(raw, p.paramOIDs[i], f)
		if err != nil {
			return err
		}
		pt.args = append(pt.args, driver.NamedValue{Ordinal: i + 1, Value: v})
	}
	rf := m.ResultFormatCodes
	ncols := len(p.cols)
	switch {
	case len(rf) == 0:
		pt.formats = nil
	case len(rf) == 1:
		if rf[0] != 0 {
			for range ncols {
				pt.formats = append(pt.formats, rf[0])
			}
		}
	case len(rf) == ncols:
		pt.formats = append(pt.formats, rf...)
	default:
		return &pgError{code: sqlstate.ProtocolViolation, msg: fmt.Sprintf("bind message has %d result formats but query has %d columns", len(rf), ncols)}
	}
	for _, f := range pt.formats {
		if f != 0 && f != 1 {
			return &pgError{code: sqlstate.ProtocolViolation, msg: fmt.Sprintf("unsupported format code: %d", f)}
		}
	}
	s.portals[m.DestinationPortal] = pt
	s.send(&pgproto3.BindComplete{})
	return nil
}

// Describe reports a statement's parameter and result types or a
// portal's result types.
func (s *session) Describe(_ context.Context, m *pgproto3.Describe) error {
	if m.ObjectType == 'S' {
		p, ok := s.stmts[m.Name]
		if !ok {
			return &pgError{code: sqlstate.InvalidSQLStatementName, msg: fmt.Sprintf("prepared statement %q does not exist", m.Name)}
		}
		oids := make([]uint32, len(p.paramOIDs))
		copy(oids, p.paramOIDs)
		s.send(&pgproto3.ParameterDescription{ParameterOIDs: oids})
		s.sendRowDescription(p.cols, nil)
		return nil
	}
	pt, ok := s.portals[m.Name]
	if !ok {
		return &pgError{code: sqlstate.InvalidCursorName, msg: fmt.Sprintf("portal %q does not exist", m.Name)}
	}
	s.sendRowDescription(pt.p.cols, pt.formats)
	return nil
}

// sendRowDescription sends RowDescription for cols, or NoData if there
// are none.
func (s *session) sendRowDescription(cols []column, formats []int16) {
	if cols == nil {
		s.send(&pgproto3.NoData{})
		return
	}
	fields := make([]pgproto3.FieldDescription, len(cols))
	for i, c := range cols {
		var f int16
		if i < len(formats) {
			f = formats[i]
		}
		fields[i] = pgproto3.FieldDescription{
			Name:         []byte(c.name),
			DataTypeOID:  c.oid,
			DataTypeSize: typeSize(c.oid),
			TypeModifier: -1,
			Format:       f,
		}
	}
	s.send(&pgproto3.RowDescription{Fields: fields})
}

// Execute runs a portal.
func (s *session) Execute(_ context.Context, m *pgproto3.Execute) error {
	pt, ok := s.portals[m.Portal]
	if !ok {
		return &pgError{code: sqlstate.InvalidCursorName, msg: fmt.Sprintf("portal %q does not exist", m.Portal)}
	}
	maxRows := int64(m.MaxRows)
	if m.MaxRows > 1<<31-1 {
		maxRows = 0
	}
	return s.execute(pt, maxRows, false)
}

// Close drops a statement or portal; dropping one that does not
// exist is not an error.
func (s *session) Close(_ context.Context, m *pgproto3.Close) error {
	if m.ObjectType == 'S' {
		delete(s.stmts, m.Name)
	} else if pt, ok := s.portals[m.Name]; ok {
		s.closePortal(pt)
		delete(s.portals, m.Name)
	}
	s.send(&pgproto3.CloseComplete{})
	return nil
}

// closePortal closes a portal's open cursor.
func (s *session) closePortal(pt *portal) {
	if pt.rows != nil {
		pt.rows.Close()
		pt.rows = nil
	}
	if pt.ss != nil {
		if pt.ownStmt {
			pt.ss.sq.Close()
		} else {
			pt.ss.busy = false
		}
		pt.ss = nil
	}
	if pt.release != nil {
		pt.release()
		pt.release = nil
	}
}

// closePortals closes every portal, as the end of a transaction does.
func (s *session) closePortals() {
	for name, pt := range s.portals {
		s.closePortal(pt)
		delete(s.portals, name)
	}
}

// checkSchemaGen drops cached schema and descriptions after a schema
// change anywhere on the server.
func (s *session) checkSchemaGen() {
	if g := s.srv.schemaGen.Load(); g != s.schemaGen {
		clear(s.schema)
		clear(s.parsed)
		s.schemaGen = g
	}
}

// sqlStmt returns the pooled SQLite statement for sql, preparing it on
// first use.
func (s *session) sqlStmt(sql string) (*sqlStmt, error) {
	if ss, ok := s.pool[sql]; ok {
		return ss, nil
	}
	sq, err := s.db.(driver.ConnPrepareContext).PrepareContext(s.baseCtx, sql)
	if err != nil {
		return nil, err
	}
	if len(s.pool) >= maxPooled {
		for k, ss := range s.pool {
			if !ss.busy {
				ss.sq.Close()
				delete(s.pool, k)
			}
		}
	}
	ss := &sqlStmt{sq: sq}
	s.pool[sql] = ss
	return ss, nil
}

// execSQL runs an internal SQLite statement without arguments.
func (s *session) execSQL(ctx context.Context, sql string) error {
	ss, err := s.sqlStmt(sql)
	if err != nil {
		return err
	}
	_, err = ss.sq.(driver.StmtExecContext).ExecContext(ctx, nil)
	return err
}

// tableColumns returns the columns of a table (nil if there is none).
func (s *session) tableColumns(table string) []tableCol {
	table = strings.ToLower(table)
	if cols, ok := s.schema[table]; ok {
		return cols
	}
	ss, err := s.sqlStmt("SELECT name, type FROM pragma_table_info(?1)")
	if err != nil {
		return nil
	}
	rows, err := ss.sq.(driver.StmtQueryContext).QueryContext(s.baseCtx, []driver.NamedValue{{Ordinal: 1, Value: table}})
	if err != nil {
		return nil
	}
	defer rows.Close()
	var cols []tableCol
	dest := make([]driver.Value, 2)
	for rows.Next(dest) == nil {
		name, _ := textArg(dest[0])
		decl, _ := textArg(dest[1])
		cols = append(cols, tableCol{name: strings.ToLower(name), oid: declTypeOID(decl)})
	}
	if len(s.schema) >= maxSchemas {
		clear(s.schema)
	}
	s.schema[table] = cols
	return cols
}

// resolve finds the type a hint describes, oidUnknown if it cannot.
func (s *session) resolve(h typeHint, st *stmt) uint32 {
	switch {
	case h.oid != 0:
		return h.oid
	case h.ref != nil:
		return s.refType(h.ref, st)
	}
	switch h.fn {
	case "sum":
		switch s.resolve(h.args[0], st) {
		case oidInt2, oidInt4, oidInt8:
			return oidInt8
		case oidFloat4, oidFloat8:
			return oidFloat8
		}
	case "same":
		return s.resolve(h.args[0], st)
	case "arith":
		result := uint32(oidInt8)
		for _, a := range h.args {
			switch s.resolve(a, st) {
			case oidInt2, oidInt4, oidInt8:
			case oidFloat4, oidFloat8:
				result = oidFloat8
			default:
				return oidUnknown
			}
		}
		return result
	}
	return oidUnknown
}

// refType looks a column reference up in the tables st names.
func (s *session) refType(ref *colRef, st *stmt) uint32 {
	var tables []string
	if ref.table != "" {
		t, ok := st.tables[ref.table]
		if !ok {
			t = ref.table
		}
		tables = []string{t}
	} else {
		for _, t := range st.tables {
			tables = append(tables, t)
		}
		sort.Strings(tables)
	}
	col := strings.ToLower(ref.column)
	for _, t := range tables {
		cols := s.tableColumns(t)
		if ref.column == "" {
			if ref.index >= 0 && ref.index < len(cols) {
				return cols[ref.index].oid
			}
			continue
		}
		for _, c := range cols {
			if c.name == col {
				return c.oid
			}
		}
	}
	return oidUnknown
}

// columns describes result columns from SQLite's column names and
// declared types, the statement's hints and, when given, a first row.
// Types still unknown are reported as text.
func (s *session) columns(st *stmt, names, decls []string, first []driver.Value) []column {
	cols := make([]column, len(names))
	useHints := st.cols != nil && len(st.cols) == len(names)
	for i := range cols {
		cols[i].name = names[i]
		if useHints {
			cols[i].name = st.cols[i].name
		}
		oid := declTypeOID(decls[i])
		if oid == oidUnknown && useHints {
			oid = s.resolve(st.cols[i].hint, st)
		}
		if oid == oidUnknown && first != nil && first[i] != nil {
			oid = runtimeOID(first[i])
		}
		if oid == oidUnknown {
			oid = oidText
		}
		cols[i].oid = reportable(oid)
	}
	return cols
}

// statementContext returns the context of the running statement.
func (s *session) statementContext() context.Context {
	s.cancelMu.Lock()
	defer s.cancelMu.Unlock()
	if s.stmtCtx == nil {
		return s.baseCtx
	}
	return s.stmtCtx
}

// startStatement marks a statement running and returns its context,
// which a CancelRequest cancels.
func (s *session) startStatement() context.Context {
	s.cancelMu.Lock()
	defer s.cancelMu.Unlock()
	if s.stmtCtx == nil || s.stmtCtx.Err() != nil {
		s.stmtCtx, s.stmtCancel = context.WithCancel(s.baseCtx)
	}
	s.running, s.canceled = true, false
	return s.stmtCtx
}

// endStatement marks the statement done and reports whether it was
// canceled.
func (s *session) endStatement() bool {
	s.cancelMu.Lock()
	defer s.cancelMu.Unlock()
	s.running = false
	c := s.canceled
	s.canceled = false
	return c
}

// cancelStatement cancels the running statement, if any.
func (s *session) cancelStatement() {
	s.cancelMu.Lock()
	defer s.cancelMu.Unlock()
	if s.running && s.stmtCancel != nil {
		s.canceled = true
		s.stmtCancel()
	}
}
