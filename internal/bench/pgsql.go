package bench

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sluicelab/sluice/internal/sqlstate"
)

// pgDialer opens pgx connections and runs statements on the pgconn layer:
// prepared statements are executed with text parameters as Bind, Execute,
// Sync in one write (one round trip; the row description cached at
// prepare time spares the server a Describe per execution), plain
// statements with the simple query protocol (one Query message). pgx's
// unnamed-statement path and its statement cache are not used.
type pgDialer struct {
	cfg *pgx.ConnConfig
	ps  bool
}

func newPgDialer(o *Options, dial dialFunc) (*pgDialer, error) {
	cfg, err := pgConfig(o)
	if err != nil {
		return nil, usageErrorf("bad PostgreSQL address: %v", err)
	}
	cfg.DialFunc = pgconn.DialFunc(dial)
	return &pgDialer{cfg: cfg, ps: o.PSMode == PSAuto}, nil
}

func (d *pgDialer) connect(ctx context.Context) (*pgx.Conn, func() bool, error) {
	c, err := pgx.ConnectConfig(ctx, d.cfg.Copy())
	if err != nil {
		return nil, nil, fmt.Errorf("cannot connect to pgsql at %s: %w", pgAddr(d.cfg), err)
	}
	pc := c.PgConn()
	stop := context.AfterFunc(ctx, func() { pc.Conn().Close() })
	return c, stop, nil
}

func pgAddr(cfg *pgx.ConnConfig) string {
	return fmt.Sprintf("%s:%d", cfg.Host, cfg.Port)
}

// Dial opens worker n's connection.
func (d *pgDialer) Dial(ctx context.Context, n int) (Conn, error) {
	c, stop, err := d.connect(ctx)
	if err != nil {
		return nil, err
	}
	return &pgConn{d: d, ctx: ctx, c: c, pg: c.PgConn(), stop: stop}, nil
}

// pgConn is one worker's connection.
type pgConn struct {
	d      *pgDialer
	ctx    context.Context // the run's; the connection closes when it is done
	c      *pgx.Conn
	pg     *pgconn.PgConn
	stop   func() bool
	stmts  []*pgconn.StatementDescription // by Statement.ID; nil when not prepared
	params [][]byte
	bufs   [][]byte // backing arrays of integer parameters
	buf    []byte
}

func (c *pgConn) Prepare(ctx context.Context, stmts []*Statement) error {
	c.stmts = make([]*pgconn.StatementDescription, len(stmts))
	if !c.d.ps {
		return nil
	}
	for _, st := range stmts {
		if !st.Prepare {
			continue
		}
		sd, err := c.pg.Prepare(context.Background(), st.Name, dollarParams(st.SQL), nil)
		if err != nil {
			if cerr := c.ctx.Err(); cerr != nil {
				return cerr
			}
			return pgError(err, st)
		}
		c.stmts[st.ID] = sd
	}
	return nil
}

func (c *pgConn) Exec(ctx context.Context, st *Statement, args []Arg) (Outcome, error) {
	out := Outcome{RoundTrips: 1}
	bg := context.Background()
	var tag pgconn.CommandTag
	var err error
	if st.prepared(len(c.stmts)) && c.stmts[st.ID] != nil {
		for len(c.bufs) < len(args) {
			c.bufs = append(c.bufs, make([]byte, 0, 24))
		}
		c.params = c.params[:0]
		for i, a := range args {
			if a.Str != nil {
				c.params = append(c.params, a.Str)
				continue
			}
			c.bufs[i] = strconv.AppendInt(c.bufs[i][:0], a.Int, 10)
			c.params = append(c.params, c.bufs[i])
		}
		tag, err = c.pg.ExecStatement(bg, c.stmts[st.ID], c.params, nil, nil).Close()
	} else {
		c.buf = render(c.buf[:0], st.SQL, args)
		tag, err = simpleExec(bg, c.pg, string(c.buf))
	}
	if err != nil {
		if cerr := c.ctx.Err(); cerr != nil {
			return out, cerr
		}
		se := pgError(err, st)
		if se.Ignorable {
			// The transaction is aborted; roll it back before the event
			// restarts, as sysbench's driver does.
			out.RoundTrips++
			if _, rerr := simpleExec(bg, c.pg, "ROLLBACK"); rerr != nil {
				return out, pgError(rerr, textStatement("sb_rollback", "ROLLBACK", false))
			}
		}
		return out, se
	}
	switch {
	case st.Reads:
		out.Counter = CountRead
	case tag.RowsAffected() > 0:
		out.Counter = CountWrite
	default:
		out.Counter = CountOther
	}
	return out, nil
}

// simpleExec runs sql with the simple query protocol, discarding rows, and
// returns the last command tag.
func simpleExec(ctx context.Context, pg *pgconn.PgConn, sql string) (pgconn.CommandTag, error) {
	mrr := pg.Exec(ctx, sql)
	var tag pgconn.CommandTag
	var err error
	for mrr.NextResult() {
		tag, err = mrr.ResultReader().Close()
	}
	if cerr := mrr.Close(); cerr != nil {
		return tag, cerr
	}
	return tag, err
}

// pgError classifies a PostgreSQL error the way sysbench's pgsql driver
// does: deadlocks, serialization failures and unique violations are
// ignorable, everything else is fatal (lost connections included).
func pgError(err error, st *Statement) *SQLError {
	se := &SQLError{Query: st.SQL, Err: err, Code: sqlstate.ConnectionFailure, Message: err.Error()}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		se.Code, se.Message = pe.Code, pe.Message
	}
	switch se.Code {
	case sqlstate.DeadlockDetected, sqlstate.SerializationFailure, sqlstate.UniqueViolation:
		se.Ignorable = true
	case sqlstate.UndefinedTable:
		se.MissingTable = pgQuoted(se.Message)
	}
	return se
}

// pgQuoted extracts the name from `relation "sbtest1" does not exist`.
func pgQuoted(msg string) string {
	_, rest, ok := strings.Cut(msg, `"`)
	if !ok {
		return "?"
	}
	name, _, _ := strings.Cut(rest, `"`)
	return name
}

func (c *pgConn) Close() error {
	c.stop()
	return c.c.Close(context.Background())
}

// pgAdmin runs prepare's and cleanup's statements on one connection.
type pgAdmin struct {
	c    *pgx.Conn
	stop func() bool
}

func (d *pgDialer) admin(ctx context.Context) (*pgAdmin, error) {
	c, stop, err := d.connect(ctx)
	if err != nil {
		return nil, err
	}
	return &pgAdmin{c: c, stop: stop}, nil
}

func (a *pgAdmin) exec(ctx context.Context, query string) error {
	_, err := simpleExec(context.Background(), a.c.PgConn(), query)
	var te tableError
	if pe := (*pgconn.PgError)(nil); errors.As(err, &pe) {
		te = tableError{code: pe.Code, message: pe.Message,
			exists: pe.Code == sqlstate.DuplicateTable, missing: pe.Code == sqlstate.UndefinedTable, table: pgQuoted(pe.Message)}
	}
	return adminError(ctx, query, err, te)
}

func (a *pgAdmin) close() error {
	a.stop()
	return a.c.Close(context.Background())
}

// load copies rows [from, to] of table t with COPY FROM STDIN (binary
// format, pgx CopyFrom), reporting progress every 10 000 rows.
func (a *pgAdmin) load(ctx context.Context, t int, rows *rowGen, from, to int, progress func(int)) error {
	src := &copySource{g: rows, next: from, last: to, progress: progress}
	_, err := a.c.CopyFrom(context.Background(), pgx.Identifier{fmt.Sprintf("sbtest%d", t)}, []string{"id", "k", "c", "pad"}, src)
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
		return fmt.Errorf("copy into sbtest%d: %w", t, err)
	}
	progress(src.pending)
	return nil
}

// copySource generates rows for CopyFrom.
type copySource struct {
	g          *rowGen
	next, last int
	row        [4]any
	pending    int // rows not yet reported
	progress   func(int)
}

func (s *copySource) Next() bool {
	if s.next > s.last {
		return false
	}
	k, c, pad := s.g.next()
	s.row = [4]any{int32(s.next), int32(k), string(c), string(pad)}
	s.next++
	s.pending++
	if s.pending == 10000 {
		s.progress(s.pending)
		s.pending = 0
	}
	return true
}

func (s *copySource) Values() ([]any, error) { return s.row[:], nil }

func (s *copySource) Err() error { return nil }
