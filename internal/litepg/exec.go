package litepg

import (
	"context"
	"database/sql/driver"
	"encoding/binary"
	"errors"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/sluicelab/sluice/internal/pgserver"
	"github.com/sluicelab/sluice/internal/sqlstate"
)

// execute runs a portal's statement. simple selects the simple query
// protocol, where a statement's RowDescription precedes its rows; in the
// extended protocol the client asks for it with Describe. maxRows > 0
// suspends a query after that many rows.
func (s *session) execute(pt *portal, maxRows int64, simple bool) error {
	st := pt.p.st
	if s.txStatus == 'E' && st.kind != skCommit && st.kind != skRollback &&
		!(st.savepoint && strings.HasPrefix(st.sql, "ROLLBACK TO")) {
		return errAborted
	}
	s.checkSchemaGen()
	ctx := s.startStatement()
	err := s.executeIn(ctx, pt, maxRows, simple)
	if s.endStatement() && err != nil {
		var ce *pgserver.ConnError
		if !errors.As(err, &ce) {
			err = errCanceled
		}
	}
	return err
}

func (s *session) executeIn(ctx context.Context, pt *portal, maxRows int64, simple bool) error {
	st := pt.p.st
	switch st.kind {
	case skEmpty:
		s.send(&pgproto3.EmptyQueryResponse{})
		return nil
	case skQuery:
		return s.runRows(ctx, pt, maxRows, simple)
	case skExec:
		return s.runExec(ctx, pt)
	case skExplain:
		return s.runExplain(ctx, pt, simple)
	case skCopy:
		return s.runCopy(ctx, pt)
	case skBegin:
		if s.txStatus != 'I' {
			s.notice(sqlstate.ActiveSQLTransaction, "there is already a transaction in progress")
		} else {
			s.txStatus, s.txBegun, s.txWrote = 'T', false, false
			s.txReadOnly, s.txImmediate = st.readOnly, st.immediate
		}
		s.complete(st.tag)
		return nil
	case skCommit:
		switch s.txStatus {
		case 'I':
			s.notice(sqlstate.NoActiveSQLTransaction, "there is no transaction in progress")
			s.complete("COMMIT")
		case 'E':
			s.endTx(false)
			s.complete("ROLLBACK")
		default:
			if err := s.endTx(true); err != nil {
				return err
			}
			s.complete("COMMIT")
		}
		return nil
	case skRollback:
		if s.txStatus == 'I' {
			s.notice(sqlstate.NoActiveSQLTransaction, "there is no transaction in progress")
		} else {
			s.endTx(false)
		}
		s.complete("ROLLBACK")
		return nil
	case skSet:
		value, err := checkSetting(st.setName, st.setValue)
		if err != nil {
			return err
		}
		s.setParam(st.setName, value)
		s.complete(st.tag)
		return nil
	case skReset:
		if st.setName == "all" {
			for name := range s.params {
				s.resetParam(name)
			}
		} else {
			s.resetParam(st.setName)
		}
		s.complete(st.tag)
		return nil
	case skShow:
		return s.runShow(st, simple)
	case skDeallocate:
		if st.name == "" {
			clear(s.stmts)
		} else {
			if _, ok := s.stmts[st.name]; !ok {
				return &pgError{code: sqlstate.InvalidSQLStatementName, msg: "prepared statement \"" + st.name + "\" does not exist"}
			}
			delete(s.stmts, st.name)
		}
		s.complete(st.tag)
		return nil
	case skDiscard:
		if s.txStatus != 'I' {
			return &pgError{code: sqlstate.ActiveSQLTransaction, msg: "DISCARD ALL cannot run inside a transaction block"}
		}
		s.closePortals()
		clear(s.stmts)
		for name := range s.params {
			s.resetParam(name)
		}
		s.complete(st.tag)
		return nil
	case skNoop:
		s.complete(st.tag)
		return nil
	}
	return &pgError{code: sqlstate.InternalError, msg: "unknown statement kind"}
}

// complete sends CommandComplete with tag.
func (s *session) complete(tag string) {
	s.send(&pgproto3.CommandComplete{CommandTag: []byte(tag)})
}

// notice sends a WARNING NoticeResponse.
func (s *session) notice(code, msg string) {
	s.send(&pgproto3.NoticeResponse{Severity: "WARNING", SeverityUnlocalized: "WARNING", Code: code, Message: msg})
}

// commandTag renders the tag of a statement that affected n rows.
func commandTag(tag string, n int64) string {
	switch tag {
	case "INSERT":
		return "INSERT 0 " + strconv.FormatInt(n, 10)
	case "SELECT", "UPDATE", "DELETE", "COPY":
		return tag + " " + strconv.FormatInt(n, 10)
	}
	return tag
}

// beforeStatement sets up the transaction for st: it begins the block's
// SQLite transaction on its first statement and takes the write lock
// for a statement that writes. locked reports a lock taken for this
// statement alone (autocommit), which the caller releases.
func (s *session) beforeStatement(ctx context.Context, st *stmt) (locked bool, err error) {
	if s.txStatus == 'I' {
		if st.savepoint {
			return false, &pgError{code: sqlstate.NoActiveSQLTransaction, msg: st.tag + " can only be used in transaction blocks"}
		}
		if st.write {
			if err := s.srv.acquireWrite(ctx); err != nil {
				return false, err
			}
			return true, nil
		}
		return false, nil
	}
	if st.noTx {
		return false, &pgError{code: sqlstate.ActiveSQLTransaction, msg: st.tag + " cannot run inside a transaction block"}
	}
	if st.write {
		if s.txReadOnly {
			return false, &pgError{code: sqlstate.ReadOnlySQLTransaction, msg: "cannot execute " + st.tag + " in a read-only transaction"}
		}
		s.txWrote = true
	}
	if !s.txBegun {
		if err := s.beginSQLite(ctx, st.write); err != nil {
			return false, err
		}
	}
	if st.write && !s.holdsLock {
		if err := s.srv.acquireWrite(ctx); err != nil {
			return false, err
		}
		s.holdsLock = true
	}
	return false, nil
}

// beginSQLite begins the SQLite transaction of a block, immediate (with
// the write lock) or deferred as the transaction mode decides.
func (s *session) beginSQLite(ctx context.Context, write bool) error {
	mode := s.srv.opts.TxMode
	immediate := write || s.txImmediate ||
		!s.txReadOnly && (mode == TxImmediate || mode == TxAdaptive && s.predictWrite)
	if immediate && !s.holdsLock {
		if err := s.srv.acquireWrite(ctx); err != nil {
			return err
		}
		s.holdsLock = true
	}
	sql := "BEGIN"
	if immediate {
		sql = "BEGIN IMMEDIATE"
	}
	if err := s.execSQL(ctx, sql); err != nil {
		if s.holdsLock {
			s.srv.releaseWrite()
			s.holdsLock = false
		}
		return err
	}
	s.txBegun = true
	return nil
}

// endTx ends the transaction block, committing or rolling back, and
// releases the write lock. The block ends even if COMMIT fails; the
// failure is returned and the transaction rolled back.
func (s *session) endTx(commit bool) error {
	s.closePortals()
	var err error
	if s.txBegun {
		bg := context.Background()
		if commit {
			if err = s.execSQL(bg, "COMMIT"); err != nil {
				s.execSQL(bg, "ROLLBACK")
			}
		} else if e := s.execSQL(bg, "ROLLBACK"); e != nil && !strings.Contains(e.Error(), "no transaction is active") {
			s.srv.log.Warn("litepg: rollback failed", "pid", s.pid, "err", e)
		}
	}
	if s.holdsLock {
		s.srv.releaseWrite()
		s.holdsLock = false
	}
	if s.srv.opts.TxMode == TxAdaptive {
		s.predictWrite = s.txWrote
	}
	s.txStatus, s.txBegun, s.txReadOnly, s.txImmediate, s.txWrote = 'I', false, false, false, false
	return err
}

// acquireStmt returns the pooled SQLite statement for sql, or a fresh one
// (own) if the pooled one has rows open.
func (s *session) acquireStmt(sql string) (ss *sqlStmt, own bool, err error) {
	ss, err = s.sqlStmt(sql)
	if err != nil {
		return nil, false, err
	}
	if !ss.busy {
		return ss, false, nil
	}
	sq, err := s.db.(driver.ConnPrepareContext).PrepareContext(s.baseCtx, sql)
	if err != nil {
		return nil, false, err
	}
	return &sqlStmt{sq: sq}, true, nil
}

// runExec runs a statement without rows.
func (s *session) runExec(ctx context.Context, pt *portal) error {
	st := pt.p.st
	locked, err := s.beforeStatement(ctx, st)
	if err != nil {
		return err
	}
	ss, own, err := s.acquireStmt(st.sql)
	var res driver.Result
	if err == nil {
		res, err = ss.sq.(driver.StmtExecContext).ExecContext(ctx, pt.args)
		if own {
			ss.sq.Close()
		}
	}
	if locked {
		s.srv.releaseWrite()
	}
	if err != nil {
		return err
	}
	if st.ddl {
		s.srv.schemaGen.Add(1)
		s.checkSchemaGen()
	}
	if st.savepoint && strings.HasPrefix(st.sql, "ROLLBACK TO") && s.txStatus == 'E' {
		s.txStatus = 'T'
	}
	var n int64
	switch st.tag {
	case "INSERT", "UPDATE", "DELETE":
		if res != nil {
			n, _ = res.RowsAffected()
		}
	}
	s.complete(commandTag(st.tag, n))
	return nil
}

// openRows starts a query for a portal.
func (s *session) openRows(ctx context.Context, pt *portal, sql string) error {
	st := pt.p.st
	locked, err := s.beforeStatement(ctx, st)
	if err != nil {
		return err
	}
	ss, own, err := s.acquireStmt(sql)
	if err != nil {
		if locked {
			s.srv.releaseWrite()
		}
		return err
	}
	rows, err := ss.sq.(driver.StmtQueryContext).QueryContext(ctx, pt.args)
	if err != nil {
		if own {
			ss.sq.Close()
		}
		if locked {
			s.srv.releaseWrite()
		}
		return err
	}
	ss.busy = true
	pt.rows, pt.ss, pt.ownStmt, pt.sent = rows, ss, own, 0
	if locked {
		pt.release = s.srv.releaseWrite
	}
	return nil
}

// rowColumns describes the columns of open rows for the simple protocol,
// reading the first row into first (nil at the end of the rows).
func (s *session) rowColumns(st *stmt, rows driver.Rows, dest []driver.Value) (cols []column, first []driver.Value, err error) {
	names := rows.Columns()
	decls := make([]string, len(names))
	if dt, ok := rows.(driver.RowsColumnTypeDatabaseTypeName); ok {
		for i := range decls {
			decls[i] = dt.ColumnTypeDatabaseTypeName(i)
		}
	}
	switch err := rows.Next(dest); {
	case err == io.EOF:
	case err != nil:
		return nil, nil, err
	default:
		first = dest
	}
	return s.columns(st, names, decls, first), first, nil
}

// runRows runs a query and streams its rows.
func (s *session) runRows(ctx context.Context, pt *portal, maxRows int64, simple bool) error {
	st := pt.p.st
	if pt.rows == nil {
		if err := s.openRows(ctx, pt, st.sql); err != nil {
			return err
		}
	}
	rows := pt.rows
	ncols := len(rows.Columns())
	dest := s.destFor(ncols)
	cols := pt.p.cols
	var first []driver.Value
	if simple {
		var err error
		cols, first, err = s.rowColumns(st, rows, dest)
		if err != nil {
			s.closePortal(pt)
			return err
		}
		s.sendRowDescription(cols, nil)
	} else if len(cols) != ncols {
		s.closePortal(pt)
		return &pgError{code: sqlstate.FeatureNotSupported, msg: "cached plan must not change result type"}
	}
	var sent int64
	for {
		if maxRows > 0 && sent >= maxRows {
			s.send(&pgproto3.PortalSuspended{})
			return nil
		}
		if first != nil {
			first = nil
		} else if err := rows.Next(dest); err == io.EOF {
			break
		} else if err != nil {
			s.closePortal(pt)
			return err
		}
		if err := s.sendRow(dest, cols, pt.formats); err != nil {
			s.closePortal(pt)
			return err
		}
		sent++
		pt.sent++
	}
	total := pt.sent
	s.closePortal(pt)
	s.complete(commandTag(st.tag, total))
	return nil
}

// destFor returns the session's value buffer sized for n columns.
func (s *session) destFor(n int) []driver.Value {
	if cap(s.dest) < n {
		s.dest = make([]driver.Value, n)
	}
	return s.dest[:n]
}

// sendRow encodes one row as a DataRow, straight into the output
// buffer.
func (s *session) sendRow(vals []driver.Value, cols []column, formats []int16) error {
	return s.pc.WriteMessage('D', func(b []byte) ([]byte, error) {
		return appendFields(b, vals, cols, formats)
	})
}

// appendFields appends a row as a field count and length-prefixed
// fields (NULL is length -1): the body of a DataRow and a binary COPY
// tuple. formats[i] == 1 selects column i's binary encoding; a short
// formats leaves the rest text.
func appendFields(b []byte, vals []driver.Value, cols []column, formats []int16) ([]byte, error) {
	b = binary.BigEndian.AppendUint16(b, uint16(len(vals)))
	for i, v := range vals {
		if v == nil {
			b = append(b, 0xff, 0xff, 0xff, 0xff)
			continue
		}
		at := len(b)
		b = append(b, 0, 0, 0, 0)
		var err error
		if i < len(formats) && formats[i] == 1 {
			b, err = appendBinary(b, v, cols[i].oid)
		} else {
			b, err = appendText(b, v, cols[i].oid)
		}
		if err != nil {
			return nil, err
		}
		binary.BigEndian.PutUint32(b[at:], uint32(len(b)-at-4))
	}
	return b, nil
}

// runExplain runs EXPLAIN QUERY PLAN and renders the plan as text rows.
func (s *session) runExplain(ctx context.Context, pt *portal, simple bool) error {
	st := pt.p.st
	ss, own, err := s.acquireStmt(st.sql)
	if err != nil {
		return err
	}
	if own {
		defer ss.sq.Close()
	}
	if s.txStatus != 'I' && !s.txBegun {
		if err := s.beginSQLite(ctx, false); err != nil {
			return err
		}
	}
	rows, err := ss.sq.(driver.StmtQueryContext).QueryContext(ctx, pt.args)
	if err != nil {
		return err
	}
	defer rows.Close()
	cols := []column{{name: "QUERY PLAN", oid: oidText}}
	if simple {
		s.sendRowDescription(cols, nil)
	}
	dest := make([]driver.Value, len(rows.Columns()))
	depth := map[int64]int{}
	var n int64
	for {
		if err := rows.Next(dest); err == io.EOF {
			break
		} else if err != nil {
			return err
		}
		if len(dest) < 4 {
			continue
		}
		id, _ := dest[0].(int64)
		parent, _ := dest[1].(int64)
		detail, _ := textArg(dest[3])
		d := 0
		if pd, ok := depth[parent]; ok {
			d = pd + 1
		}
		depth[id] = d
		line := detail
		if d > 0 {
			line = strings.Repeat("  ", d) + "->  " + detail
		}
		if err := s.sendRow([]driver.Value{line}, cols, pt.formats); err != nil {
			return err
		}
		n++
	}
	s.complete("EXPLAIN")
	return nil
}

// runShow answers SHOW.
func (s *session) runShow(st *stmt, simple bool) error {
	if st.setName == "all" {
		cols := []column{{"name", oidText}, {"setting", oidText}, {"description", oidText}}
		if simple {
			s.sendRowDescription(cols, nil)
		}
		names := slices.Sorted(maps.Keys(s.params))
		for _, k := range names {
			if err := s.sendRow([]driver.Value{showName(k), s.params[k], ""}, cols, nil); err != nil {
				return err
			}
		}
		s.complete("SHOW")
		return nil
	}
	v, ok := s.params[st.setName]
	if !ok {
		return &pgError{code: sqlstate.UndefinedObject, msg: "unrecognized configuration parameter \"" + st.setName + "\""}
	}
	cols := []column{{name: showName(st.setName), oid: oidText}}
	if simple {
		s.sendRowDescription(cols, nil)
	}
	if err := s.sendRow([]driver.Value{v}, cols, nil); err != nil {
		return err
	}
	s.complete("SHOW")
	return nil
}

// reportedSettings are reported to the client in ParameterStatus at
// startup and whenever they change, with PostgreSQL's spelling.
var reportedSettings = []string{
	"application_name", "client_encoding", "DateStyle", "default_transaction_read_only",
	"in_hot_standby", "integer_datetimes", "IntervalStyle", "is_superuser", "server_encoding",
	"server_version", "session_authorization", "standard_conforming_strings", "TimeZone",
}

// showName returns the spelling of a setting's name.
func showName(lower string) string {
	for _, n := range reportedSettings {
		if strings.ToLower(n) == lower {
			return n
		}
	}
	return lower
}

// defaultSettings are the settings a session starts with.
func defaultSettings(user string, srv *Server) map[string]string {
	maxConns := srv.opts.MaxConns
	if maxConns <= 0 {
		maxConns = 100
	}
	return map[string]string{
		"application_name":              "",
		"client_encoding":               "UTF8",
		"datestyle":                     "ISO, MDY",
		"default_transaction_read_only": "off",
		"in_hot_standby":                "off",
		"integer_datetimes":             "on",
		"intervalstyle":                 "postgres",
		"is_superuser":                  "on",
		"server_encoding":               "UTF8",
		"server_version":                ServerVersion,
		"server_version_num":            "150000",
		"session_authorization":         user,
		"standard_conforming_strings":   "on",
		"timezone":                      "UTC",
		"transaction_isolation":         "serializable",
		"default_transaction_isolation": "serializable",
		"transaction_read_only":         "off",
		"max_connections":               strconv.Itoa(maxConns),
		"search_path":                   `"$user", public`,
		"extra_float_digits":            "1",
		"statement_timeout":             "0",
		"lock_timeout":                  "0",
		"max_identifier_length":         "63",
		"block_size":                    "8192",
		"lc_collate":                    "C",
		"lc_ctype":                      "C",
		"synchronous_commit":            "on",
		"litepg.database_path":          srv.path,
	}
}

// readOnlySettings cannot be changed by SET or the startup packet.
var readOnlySettings = map[string]bool{
	"server_version": true, "server_version_num": true, "server_encoding": true,
	"integer_datetimes": true, "is_superuser": true, "in_hot_standby": true,
	"max_connections": true, "block_size": true, "max_identifier_length": true,
	"lc_collate": true, "lc_ctype": true, "litepg.database_path": true,
}

// checkSetting validates a new setting value and returns it normalized.
// Settings litepg cannot honour are refused with 0A000; the rest are
// recorded for SHOW and otherwise ignored.
func checkSetting(name, value string) (string, *pgError) {
	if readOnlySettings[name] {
		return "", &pgError{code: sqlstate.CantChangeRuntimeParam, msg: "parameter \"" + name + "\" cannot be changed"}
	}
	switch name {
	case "client_encoding":
		switch strings.ToUpper(strings.NewReplacer("-", "", "_", "").Replace(value)) {
		case "UTF8", "UNICODE":
			return "UTF8", nil
		case "SQLASCII":
			return "SQL_ASCII", nil
		}
		return "", unsupportedf("client_encoding %q is not supported; litepg speaks UTF8", value)
	case "standard_conforming_strings":
		if b, err := parseBool(value); err != nil || !b {
			return "", unsupportedf("standard_conforming_strings must be on")
		}
		return "on", nil
	}
	return value, nil
}

// setParam records a setting and reports it if the client tracks it.
func (s *session) setParam(name, value string) {
	old, had := s.params[name]
	s.params[name] = value
	if had && old == value {
		return
	}
	for _, n := range reportedSettings {
		if strings.ToLower(n) == name {
			s.send(&pgproto3.ParameterStatus{Name: n, Value: value})
		}
	}
}

// resetParam restores a setting's session default.
func (s *session) resetParam(name string) {
	if readOnlySettings[name] {
		return
	}
	def := defaultSettings(s.env.user, s.srv)
	if v, ok := s.startParams[name]; ok {
		s.setParam(name, v)
	} else if v, ok := def[name]; ok {
		s.setParam(name, v)
	} else {
		delete(s.params, name)
	}
}
