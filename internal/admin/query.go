package admin

// This file runs SQL over the workload manager's views (package
// viewsql) and the session commands, and encodes typed results.

import (
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/offpath"
	"github.com/sluicelab/sluice/internal/session"
	"github.com/sluicelab/sluice/internal/sqlstate"
	"github.com/sluicelab/sluice/internal/wlm"
	"github.com/sluicelab/sluice/internal/wlm/ddl"
	"github.com/sluicelab/sluice/internal/wlm/views"
	"github.com/sluicelab/sluice/internal/wlm/views/viewsql"
)

// answer is the outcome of one statement as the console sends it.
type answer struct {
	Tag     string
	Columns []string // nil for a statement that returns no rows
	// OIDs are the columns' types; nil means every column is text.
	OIDs    []uint32
	Rows    [][]sql.NullString // Valid false for NULL
	Notices []string
	// Warnings are sent as NoticeResponses of severity WARNING (SQLSTATE
	// 01000), as PostgreSQL warns of a pg_cancel_backend of no backend.
	Warnings []string
}

// textAnswer converts a manager's result, whose columns are all text.
func textAnswer(r wlm.Result) answer {
	a := answer{Tag: r.Tag, Columns: r.Columns, Notices: r.Notices, Rows: make([][]sql.NullString, len(r.Rows))}
	for i, row := range r.Rows {
		out := make([]sql.NullString, len(row))
		for j, v := range row {
			out[j] = sql.NullString{String: v, Valid: true}
		}
		a.Rows[i] = out
	}
	return a
}

// oid returns the type of column i.
func (a *answer) oid(i int) uint32 {
	if i < len(a.OIDs) {
		return a.OIDs[i]
	}
	return textOID
}

// typeSize is the pg_type.typlen of oid.
func typeSize(oid uint32) int16 {
	switch oid {
	case boolOID:
		return 1
	case int8OID, float8OID:
		return 8
	}
	return -1
}

// encode writes the text v of a column of type oid in format (0 text, 1
// binary). The binary form of text is its bytes; of int8, float8 and
// bool, PostgreSQL's fixed-size big-endian form.
func encode(oid uint32, v string, format int16) []byte {
	if format == 1 {
		switch oid {
		case int8OID:
			if n, err := strconv.ParseInt(v, 10, 64); err == nil {
				return binary.BigEndian.AppendUint64(nil, uint64(n))
			}
		case float8OID:
			if f, err := strconv.ParseFloat(v, 64); err == nil {
				return binary.BigEndian.AppendUint64(nil, math.Float64bits(f))
			}
		case boolOID:
			if v == "t" {
				return []byte{1}
			}
			return []byte{0}
		}
	}
	return []byte(v)
}

// oidOf is the PostgreSQL type of a view column type.
func oidOf(t views.Type) uint32 {
	switch t {
	case views.Integer:
		return int8OID
	case views.Real:
		return float8OID
	}
	return textOID
}

// errQueryTimeout is the cause of a query that ran out of QueryTimeout.
var errQueryTimeout = errors.New("console query timed out")

// query runs q over a snapshot of the views it names, bounded by the
// server's query timeout and row limit.
func (c *conn) query(ctx context.Context, q *ddl.Query) (answer, error) {
	for _, qn := range q.Qualified {
		schema := qn.Qualifier.Name
		if schema == "information_schema" || schema == "pg_catalog" && !c.isView(qn.Name.Name) {
			// psql's \d and friends, drivers' type queries.
			e := ddl.Errorf(sqlstate.FeatureNotSupported, qn.Name.Pos, "unsupported SELECT: the sluice admin console has no %s.%s", schema, qn.Name.Name)
			e.Hint = "Views: " + strings.Join(views.Names, ", ") + "; and SHOW " + strings.ToUpper(strings.Join(views.Lists, " | ")) + "."
			return answer{}, e
		}
	}
	var names []string
	for _, n := range q.Names {
		if slices.Contains(views.Names, n) {
			names = append(names, n)
		}
	}
	tables := c.s.views.ViewTables(names)
	cluster, notices := c.clusterTables(ctx, q)
	for n, t := range cluster {
		tables[n] = t
	}
	qctx, cancel := clock.WithTimeout(ctx, c.s.clk, c.s.queryTimeout, errQueryTimeout)
	defer cancel()
	var res *viewsql.Result
	err := c.s.engine.Do(qctx, func(ctx context.Context) error {
		var err error
		res, err = viewsql.Query(ctx, tables, q.SQL, viewsql.Options{MaxRows: c.s.maxRows})
		return err
	})
	if err != nil {
		return answer{}, placed(engineError(qctx, err), q)
	}
	a := answer{Tag: "SELECT " + strconv.Itoa(len(res.Rows)), Columns: res.Columns, Rows: res.Rows, OIDs: make([]uint32, len(res.Types)), Notices: notices}
	for i, t := range res.Types {
		a.OIDs[i] = oidOf(t)
	}
	return a, nil
}

// engineError is the SQLSTATE error of a query that did not get a turn
// of the console's engine: 53000 when too many wait already, 57014 when
// its time ran out while it waited; any other error as it is.
func engineError(ctx context.Context, err error) error {
	var e *ddl.Error
	switch {
	case errors.As(err, &e):
		return err
	case errors.Is(err, offpath.ErrBusy):
		return ddl.Errorf(sqlstate.InsufficientResources, 0, "%v; try again later", err)
	case ctx.Err() != nil:
		return ddl.Errorf(sqlstate.QueryCanceled, 0, "canceling statement due to statement timeout (it waited for the console's engine)")
	}
	return ddl.Errorf(sqlstate.InternalError, 0, "console query: %v", err)
}

// placed gives an unknown column or table error the position of its
// name in q, when q names it.
func placed(err error, q *ddl.Query) error {
	var e *ddl.Error
	if errors.As(err, &e) && e.Position == 0 && (e.Code == sqlstate.UndefinedColumn || e.Code == sqlstate.UndefinedTable || e.Code == sqlstate.FeatureNotSupported) {
		if name, ok := quotedName(e.Message); ok {
			e.Position = q.PosOf(name)
		}
	}
	return err
}

// quotedName returns the first "quoted" name of msg.
func quotedName(msg string) (string, bool) {
	i := strings.IndexByte(msg, '"')
	if i < 0 {
		return "", false
	}
	j := strings.IndexByte(msg[i+1:], '"')
	if j < 0 {
		return "", false
	}
	name := msg[i+1 : i+1+j]
	if k := strings.LastIndexByte(name, '.'); k >= 0 {
		name = name[:k] // pg_catalog.pg_class: the schema comes first
	}
	return name, true
}

// sessionCommand cancels a session's statement or ends the session. The
// SELECT form answers t or f as PostgreSQL's functions do; CANCEL
// STATEMENT and TERMINATE SESSION fail with 42704 when there was nothing
// to act on.
func (c *conn) sessionCommand(ctx context.Context, s *ddl.SessionCommand) (answer, error) {
	if s.Instance != "" && (c.s.fleet == nil || s.Instance != c.s.fleet.Name()) {
		return c.forward(ctx, s)
	}
	var done bool
	var notices []string
	if s.Terminate {
		done = c.s.sessions.TerminateSession(ctx, s.Session)
	} else {
		var err error
		done, err = c.s.sessions.CancelSession(ctx, s.Session)
		if errors.Is(err, session.ErrNoCanceler) {
			notices = append(notices, "session "+strconv.FormatUint(s.Session, 10)+"'s route cannot cancel statements (a mysql route needs kill_user and kill_password)")
		} else if err != nil {
			return answer{}, ddl.Errorf(sqlstate.InternalError, 0, "%v", err)
		}
	}
	return c.sessionAnswer(s, done, !done && c.s.sessions.Registry().Session(s.Session) == nil, notices)
}

// sessionQuery runs the session function of s on each session id its
// query over the views gives (the first column; NULL or a value that is
// not an id answers f), in the query's order, and answers a boolean a
// row, as PostgreSQL's pg_terminate_backend(pid) FROM pg_stat_activity
// does. Each call is audited as the literal form's is.
func (c *conn) sessionQuery(ctx context.Context, s *ddl.SessionQuery) (answer, error) {
	ids, err := c.exec(ctx, s.Ids)
	if err != nil {
		return answer{}, err
	}
	if len(ids.Columns) == 0 {
		return answer{}, ddl.Errorf(sqlstate.SyntaxError, 0, "%s needs a session id", s.Column)
	}
	a := answer{Columns: []string{s.Column}, OIDs: []uint32{boolOID}}
	for _, row := range ids.Rows {
		v := "f"
		if id, err := strconv.ParseUint(row[0].String, 10, 64); row[0].Valid && err == nil {
			one, err := c.sessionCommand(ctx, &ddl.SessionCommand{Terminate: s.Terminate, Session: id, Column: s.Column})
			if err != nil {
				return answer{}, err
			}
			v = one.Rows[0][0].String
			a.Notices = append(a.Notices, one.Notices...)
			a.Warnings = append(a.Warnings, one.Warnings...)
		}
		a.Rows = append(a.Rows, []sql.NullString{{String: v, Valid: true}})
	}
	a.Tag = "SELECT " + strconv.Itoa(len(a.Rows))
	return a, nil
}

// sessionAnswer is the answer of session command s that did (or found
// nothing to do) with notices: t or f for the SELECT form, with a
// WARNING when missing (no session of the instance that ran it has the
// id), 42704 for the commands when there was nothing to act on.
func (c *conn) sessionAnswer(s *ddl.SessionCommand, done, missing bool, notices []string) (answer, error) {
	if s.Column != "" {
		v := "f"
		if done {
			v = "t"
		}
		var warnings []string
		if missing {
			// PostgreSQL's own: "PID n is not a PostgreSQL backend process".
			w := "session " + strconv.FormatUint(s.Session, 10) + " is not a sluice session"
			if s.Instance != "" {
				w += " on instance " + s.Instance
			}
			warnings = []string{w}
		}
		return answer{Tag: "SELECT 1", Columns: []string{s.Column}, OIDs: []uint32{boolOID}, Rows: [][]sql.NullString{{{String: v, Valid: true}}}, Notices: notices, Warnings: warnings}, nil
	}
	if !done {
		what := "runs no statement"
		if s.Terminate {
			what = "cannot be ended"
		}
		where := ""
		if s.Instance != "" {
			where = " on instance " + s.Instance
		}
		e := ddl.Errorf(sqlstate.UndefinedObject, s.SessionPos, "session %d does not exist%s or %s", s.Session, where, what)
		if len(notices) > 0 {
			e.Detail = notices[0]
		}
		return answer{}, e
	}
	if s.Terminate {
		return answer{Tag: "TERMINATE SESSION"}, nil
	}
	return answer{Tag: "CANCEL STATEMENT", Notices: notices}, nil
}
