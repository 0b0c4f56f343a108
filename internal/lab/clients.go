package lab

import (
	"context"
	"database/sql"
	"net"
	"net/url"
	"sync/atomic"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sluicelab/sluice/internal/lab/flowsql"
)

// conn is one session of the lab's own clients (the benchmark has its
// own).
type conn interface {
	// bulk runs the bulk statement once, adding the payload bytes it
	// receives to n as they come.
	bulk(ctx context.Context, n *atomic.Int64) error
	// normal runs the normal query and returns its payload bytes.
	normal(ctx context.Context) (int64, error)
	// run runs q and returns the payload bytes of its result, adding
	// them to n (if not nil) as they come.
	run(ctx context.Context, q string, n *atomic.Int64) (int64, error)
	// ping makes one minimal round trip.
	ping(ctx context.Context) error
	close()
}

// connect opens a session to addr as user ("" for the DSN's own
// credentials).
func (d *database) connect(ctx context.Context, addr, user, password string) (conn, error) {
	return d.connectAs(ctx, addr, user, password, "")
}

// connectAs is connect with the session's application name app
// (PostgreSQL's application_name, MySQL's program_name attribute); ""
// leaves the driver's default.
func (d *database) connectAs(ctx context.Context, addr, user, password, app string) (conn, error) {
	return d.connectVia(ctx, nil, addr, user, password, app)
}

// dialFunc opens a client's connection (from inside a network
// namespace, say).
type dialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// connectVia is connectAs with the connection opened by dial; nil dials
// from this process's namespace.
func (d *database) connectVia(ctx context.Context, dial dialFunc, addr, user, password, app string) (conn, error) {
	switch d.protocol {
	case protoMySQL:
		cfg := d.mysqlConfig(addr, user, password)
		if dial != nil {
			cfg.DialFunc = dial
		}
		if app != "" {
			cfg.ConnectionAttributes = "program_name:" + app
		}
		cn, err := mysql.NewConnector(cfg)
		if err != nil {
			return nil, err
		}
		db := sql.OpenDB(cn)
		db.SetMaxOpenConns(1)
		c, err := db.Conn(ctx)
		if err != nil {
			db.Close()
			return nil, err
		}
		return &mysqlFlowConn{db: db, c: c}, nil
	default:
		cfg, err := pgconn.ParseConfig(d.urlAt(addr, user, password, false))
		if err != nil {
			return nil, err
		}
		if app != "" {
			cfg.RuntimeParams["application_name"] = app
		}
		if dial != nil {
			cfg.DialFunc = pgconn.DialFunc(dial)
		}
		c, err := pgconn.ConnectConfig(ctx, cfg)
		if err != nil {
			return nil, err
		}
		return pgFlowConn{c}, nil
	}
}

type pgFlowConn struct{ c *pgconn.PgConn }

func (c pgFlowConn) bulk(ctx context.Context, n *atomic.Int64) error {
	_, err := c.c.CopyTo(ctx, counter{n}, flowsql.PGBulk)
	return err
}

func (c pgFlowConn) normal(ctx context.Context) (int64, error) {
	return c.run(ctx, flowsql.PGNormal, nil)
}

func (c pgFlowConn) run(ctx context.Context, q string, n *atomic.Int64) (int64, error) {
	mrr := c.c.Exec(ctx, q)
	var total int64
	for mrr.NextResult() {
		rr := mrr.ResultReader()
		for rr.NextRow() {
			var row int64
			for _, v := range rr.Values() {
				row += int64(len(v))
			}
			total += row
			if n != nil {
				n.Add(row)
			}
		}
		if _, err := rr.Close(); err != nil {
			mrr.Close()
			return total, err
		}
	}
	return total, mrr.Close()
}

func (c pgFlowConn) ping(ctx context.Context) error {
	_, err := c.c.Exec(ctx, "SELECT 1").ReadAll()
	return err
}

func (c pgFlowConn) close() { c.c.Close(context.Background()) }

type mysqlFlowConn struct {
	db *sql.DB
	c  *sql.Conn
}

func (c *mysqlFlowConn) query(ctx context.Context, q string, each func(int)) (int64, error) {
	rows, err := c.c.QueryContext(ctx, q)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	var total int64
	var b sql.RawBytes
	for rows.Next() {
		if err := rows.Scan(&b); err != nil {
			return total, err
		}
		total += int64(len(b))
		if each != nil {
			each(len(b))
		}
	}
	return total, rows.Err()
}

func (c *mysqlFlowConn) bulk(ctx context.Context, n *atomic.Int64) error {
	_, err := c.query(ctx, flowsql.MySQLBulk, func(k int) { n.Add(int64(k)) })
	return err
}

func (c *mysqlFlowConn) normal(ctx context.Context) (int64, error) {
	return c.query(ctx, flowsql.MySQLNormal, nil)
}

func (c *mysqlFlowConn) run(ctx context.Context, q string, n *atomic.Int64) (int64, error) {
	if n == nil {
		return c.query(ctx, q, nil)
	}
	return c.query(ctx, q, func(k int) { n.Add(int64(k)) })
}

func (c *mysqlFlowConn) ping(ctx context.Context) error { return c.c.PingContext(ctx) }

func (c *mysqlFlowConn) close() {
	c.c.Close()
	c.db.Close()
}

// counter is an io.Writer that counts.
type counter struct{ n *atomic.Int64 }

func (c counter) Write(p []byte) (int, error) { c.n.Add(int64(len(p))); return len(p), nil }

// withApp returns the URL u with its sessions named app: PostgreSQL's
// application_name, MySQL's program_name connection attribute.
func withApp(u, protocol, app string) string {
	pu, err := url.Parse(u)
	if err != nil {
		return u
	}
	q := pu.Query()
	if protocol == protoMySQL {
		q.Set("connectionAttributes", "program_name:"+app)
	} else {
		q.Set("application_name", app)
	}
	pu.RawQuery = q.Encode()
	return pu.String()
}
