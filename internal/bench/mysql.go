package bench

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sluicelab/sluice/internal/clock"
)

// MySQL client error numbers that mean the connection is gone; when one is
// in --mysql-ignore-errors the connection reconnects.
const (
	crServerGone         = 2006
	crTCPConnection      = 2011
	crServerLost         = 2013
	crServerLostExtended = 2055
)

// MySQL server error numbers the benchmark explains.
const (
	erNoSuchTable = 1146
	erTableExists = 1050
)

// mysqlDialer opens go-sql-driver connections below database/sql: each
// worker owns one driver connection, so no pool, no per-statement locking
// and no context watcher sit in the measured path.
type mysqlDialer struct {
	cfgs   []*mysql.Config
	ps     bool // --db-ps-mode=auto
	ignore map[uint16]bool
	all    bool // --mysql-ignore-errors=all
	clk    clock.Clock
	dial   dialFunc
}

func newMySQLDialer(o *Options, dial dialFunc) (*mysqlDialer, error) {
	cfgs, err := mysqlConfigs(o)
	if err != nil {
		return nil, usageErrorf("bad MySQL address: %v", err)
	}
	d := &mysqlDialer{cfgs: cfgs, ps: o.PSMode == PSAuto, ignore: map[uint16]bool{}, clk: o.clock(), dial: dial}
	for _, e := range o.MySQL.IgnoreErrors {
		if e == "all" {
			d.all = true
			continue
		}
		n, _ := strconv.ParseUint(e, 10, 16)
		d.ignore[uint16(n)] = true
	}
	return d, nil
}

// rawConn is a driver connection with the socket under it. Statements run
// with context.Background() (go-sql-driver's own cancellation costs a
// goroutine hand-off per statement); instead a done run context closes the
// socket, which fails the statement in flight.
type rawConn struct {
	c    driver.Conn
	sock net.Conn
	stop func() bool // unregisters the close-on-done hook
}

// connect opens one connection with cfgs[n % len].
func (d *mysqlDialer) connect(ctx context.Context, n int) (*rawConn, error) {
	cfg := d.cfgs[n%len(d.cfgs)].Clone()
	var mu sync.Mutex
	var sock net.Conn
	cfg.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.dial(ctx, network, addr)
		mu.Lock()
		sock = c
		mu.Unlock()
		return c, err
	}
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("mysql config: %w", err)
	}
	c, err := conn.Connect(ctx)
	if err != nil {
		return nil, fmt.Errorf("cannot connect to mysql at %s: %w", cfg.Addr, err)
	}
	mu.Lock()
	s := sock
	mu.Unlock()
	rc := &rawConn{c: c, sock: s}
	rc.stop = context.AfterFunc(ctx, func() { s.Close() })
	return rc, nil
}

func (rc *rawConn) close() error {
	rc.stop()
	return rc.c.Close()
}

// exec runs a text statement without arguments (one COM_QUERY).
func (rc *rawConn) exec(query string) (driver.Result, error) {
	return rc.c.(driver.ExecerContext).ExecContext(context.Background(), query, nil)
}

// Dial opens worker n's connection.
func (d *mysqlDialer) Dial(ctx context.Context, n int) (Conn, error) {
	rc, err := d.connect(ctx, n)
	if err != nil {
		return nil, err
	}
	return &mysqlConn{d: d, n: n, ctx: ctx, rc: rc}, nil
}

// mysqlConn is one worker's connection.
type mysqlConn struct {
	d        *mysqlDialer
	n        int
	ctx      context.Context // the run's; the connection closes when it is done
	rc       *rawConn
	stmts    []driver.Stmt // by Statement.ID; nil when not prepared
	prepared []*Statement  // what to prepare again after a reconnect
	nv       []driver.NamedValue
	buf      []byte
}

func (c *mysqlConn) Prepare(ctx context.Context, stmts []*Statement) error {
	c.prepared = stmts
	return c.prepareAll(ctx)
}

func (c *mysqlConn) prepareAll(ctx context.Context) error {
	for _, s := range c.stmts {
		if s != nil {
			s.Close()
		}
	}
	c.stmts = make([]driver.Stmt, len(c.prepared))
	if !c.d.ps {
		return nil
	}
	for _, st := range c.prepared {
		if !st.Prepare {
			continue
		}
		s, err := c.rc.c.(driver.ConnPrepareContext).PrepareContext(context.Background(), st.SQL)
		if err != nil {
			return c.sqlError(err, st, false)
		}
		c.stmts[st.ID] = s
	}
	return nil
}

func (c *mysqlConn) Exec(ctx context.Context, st *Statement, args []Arg) (Outcome, error) {
	out := Outcome{RoundTrips: 1}
	var s driver.Stmt
	if st.prepared(len(c.stmts)) {
		s = c.stmts[st.ID]
	}
	var err error
	var res driver.Result
	var rows driver.Rows
	bg := context.Background()
	if s != nil {
		c.nv = c.nv[:0]
		for i, a := range args {
			var v driver.Value = a.Int
			if a.Str != nil {
				v = a.Str
			}
			c.nv = append(c.nv, driver.NamedValue{Ordinal: i + 1, Value: v})
		}
		if st.Reads {
			rows, err = s.(driver.StmtQueryContext).QueryContext(bg, c.nv)
		} else {
			res, err = s.(driver.StmtExecContext).ExecContext(bg, c.nv)
		}
	} else {
		c.buf = render(c.buf[:0], st.SQL, args)
		q := string(c.buf)
		if st.Reads {
			rows, err = c.rc.c.(driver.QueryerContext).QueryContext(bg, q, nil)
		} else {
			res, err = c.rc.exec(q)
		}
	}
	if err == nil && rows != nil {
		err = rows.Close()
		out.Counter = CountRead
	}
	if err == nil && res != nil {
		n, _ := res.RowsAffected()
		out.Counter = CountOther
		if n > 0 {
			out.Counter = CountWrite
		}
	}
	if err != nil {
		if cerr := c.ctx.Err(); cerr != nil {
			return out, cerr
		}
		return out, c.sqlError(err, st, true)
	}
	return out, nil
}

// sqlError classifies err by --mysql-ignore-errors. With mayReconnect, a
// lost connection whose code is ignored is re-established (statements
// prepared again) before returning, as sysbench's driver does.
func (c *mysqlConn) sqlError(err error, st *Statement, mayReconnect bool) error {
	se := &SQLError{Query: st.SQL, Err: err}
	var me *mysql.MySQLError
	code := uint16(crServerLost)
	if errors.As(err, &me) {
		code = me.Number
		se.Message = me.Message
	} else {
		se.Message = err.Error()
	}
	se.Code = strconv.Itoa(int(code))
	if code == erNoSuchTable {
		se.MissingTable = quotedTable(se.Message)
	}
	if !c.d.all && !c.d.ignore[code] {
		return se
	}
	se.Ignorable = true
	switch code {
	case crServerGone, crTCPConnection, crServerLost, crServerLostExtended:
		if !mayReconnect {
			return se
		}
		if rerr := c.reconnect(); rerr != nil {
			return rerr
		}
		se.Reconnected = true
	}
	return se
}

// reconnect replaces a lost connection, retrying every millisecond until
// it succeeds or the run ends.
func (c *mysqlConn) reconnect() error {
	c.rc.close()
	for {
		rc, err := c.d.connect(c.ctx, c.n)
		if err == nil {
			c.rc = rc
			c.stmts = nil
			return c.prepareAll(c.ctx)
		}
		if err := clock.Sleep(c.ctx, c.d.clk, time.Millisecond); err != nil {
			return err
		}
	}
}

func (c *mysqlConn) Close() error {
	for _, s := range c.stmts {
		if s != nil {
			s.Close()
		}
	}
	c.stmts = nil
	return c.rc.close()
}

// quotedTable extracts the table name from "Table 'db.sbtest1' doesn't
// exist".
func quotedTable(msg string) string {
	_, rest, ok := strings.Cut(msg, "'")
	if !ok {
		return "?"
	}
	name, _, _ := strings.Cut(rest, "'")
	if i := strings.LastIndexByte(name, '.'); i >= 0 {
		name = name[i+1:]
	}
	return name
}

// mysqlAdmin runs prepare's and cleanup's statements on one connection.
type mysqlAdmin struct {
	rc *rawConn
	ps bool // load with prepared statements
}

func (d *mysqlDialer) admin(ctx context.Context, n int) (*mysqlAdmin, error) {
	rc, err := d.connect(ctx, n)
	if err != nil {
		return nil, err
	}
	return &mysqlAdmin{rc: rc, ps: d.ps}, nil
}

func (a *mysqlAdmin) exec(ctx context.Context, query string) error {
	_, err := a.rc.exec(query)
	var te tableError
	if me := (*mysql.MySQLError)(nil); errors.As(err, &me) {
		te = tableError{code: strconv.Itoa(int(me.Number)), message: me.Message,
			exists: me.Number == erTableExists, missing: me.Number == erNoSuchTable, table: quotedTable(me.Message)}
	}
	return adminError(ctx, query, err, te)
}

func (a *mysqlAdmin) close() error { return a.rc.close() }

// load inserts rows from..to (ids) of table t with multi-row INSERTs,
// adding each batch's row count to progress. With prepared statements the
// INSERT of loadBatch rows is prepared once and executed with binary
// parameters, which spares the server the parsing of every value (about a
// third of its work); otherwise each batch is sent as text of about
// loadText bytes.
func (a *mysqlAdmin) load(ctx context.Context, t int, rows *rowGen, from, to int, progress func(int)) error {
	var err error
	if a.ps {
		err = a.loadPrepared(t, rows, from, to, progress)
	} else {
		err = a.loadText(t, rows, from, to, progress)
	}
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
		return fmt.Errorf("insert into sbtest%d: %w", t, err)
	}
	return nil
}

const (
	loadBatch = 2000    // rows per prepared INSERT
	loadText  = 1 << 20 // bytes per text INSERT
)

func (a *mysqlAdmin) loadPrepared(t int, rows *rowGen, from, to int, progress func(int)) error {
	prepare := func(n int) (driver.Stmt, error) {
		q := fmt.Sprintf("INSERT INTO sbtest%d(id, k, c, pad) VALUES ", t) + strings.Repeat("(?,?,?,?),", n-1) + "(?,?,?,?)"
		return a.rc.c.(driver.ConnPrepareContext).PrepareContext(context.Background(), q)
	}
	full, err := prepare(loadBatch)
	if err != nil {
		return err
	}
	defer full.Close()
	nv := make([]driver.NamedValue, 4*loadBatch)
	for i := range nv {
		nv[i].Ordinal = i + 1
	}
	// One arena per batch holds every c and pad value; its capacity is
	// exact, so the slices taken from it stay valid.
	arena := make([]byte, 0, loadBatch*(len(cTemplate)+len(padTemplate)))
	for id := from; id <= to; {
		n := min(loadBatch, to-id+1)
		arena = arena[:0]
		for i := 0; i < n; i++ {
			k := rows.k()
			c0 := len(arena)
			arena = rows.rnd.AppendString(arena, cTemplate)
			p0 := len(arena)
			arena = rows.rnd.AppendString(arena, padTemplate)
			nv[4*i].Value = int64(id + i)
			nv[4*i+1].Value = int64(k)
			nv[4*i+2].Value = arena[c0:p0]
			nv[4*i+3].Value = arena[p0:]
		}
		st := full
		if n < loadBatch {
			if st, err = prepare(n); err != nil {
				return err
			}
			defer st.Close()
		}
		if _, err := st.(driver.StmtExecContext).ExecContext(context.Background(), nv[:4*n]); err != nil {
			return err
		}
		id += n
		progress(n)
	}
	return nil
}

func (a *mysqlAdmin) loadText(t int, rows *rowGen, from, to int, progress func(int)) error {
	head := fmt.Sprintf("INSERT INTO sbtest%d(id, k, c, pad) VALUES", t)
	buf := make([]byte, 0, loadText+4096)
	for id := from; id <= to; {
		buf = append(buf[:0], head...)
		n := 0
		for ; id <= to && len(buf) < loadText; id++ {
			if n > 0 {
				buf = append(buf, ',')
			}
			buf = append(buf, '(')
			buf = strconv.AppendInt(buf, int64(id), 10)
			buf = append(buf, ',')
			buf = rows.appendValues(buf)
			buf = append(buf, ')')
			n++
		}
		if _, err := a.rc.exec(string(buf)); err != nil {
			return err
		}
		progress(n)
	}
	return nil
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " ..."
	}
	return s
}
