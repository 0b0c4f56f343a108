package lab

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"strings"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sluicelab/sluice/internal/bench"
	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/config"
	"github.com/sluicelab/sluice/internal/lab/pgtemp"
	"github.com/sluicelab/sluice/internal/litepg"
)

// Route protocols.
const (
	protoPostgres = "postgres"
	protoMySQL    = "mysql"
)

// Backends, as Options.Backend spells them.
const (
	BackendEmbedded = "embedded"
	BackendPostgres = "postgres"
)

// database is the server the experiments run against, reached directly
// (for setup) or through a sluice route (for every measured byte).
type database struct {
	kind     string // BackendEmbedded, BackendPostgres or "dsn"
	protocol string // protoPostgres or protoMySQL
	describe string // for the report: what and where
	upstream string // host:port
	user     string
	password string
	dbname   string
	// query is the DSN's query string, kept for direct connections.
	query url.Values
	// upstreamTLS is set when the DSN demands TLS (sslmode=require or
	// verify-*): sluice then speaks TLS to the server.
	upstreamTLS *config.UpstreamTLS
	close       func()
}

// directURL is the URL of a direct connection as user (the DSN's own user
// when user is "").
func (d *database) directURL() string {
	return d.urlAt(d.upstream, "", "", true)
}

// urlAt is the URL of a connection to addr as user with password ("" for
// the DSN's own credentials). direct keeps the DSN's parameters; through
// sluice the client side is plain TCP on loopback.
func (d *database) urlAt(addr, user, password string, direct bool) string {
	if user == "" {
		user, password = d.user, d.password
	}
	u := url.URL{Scheme: d.protocol, Host: addr, Path: "/" + d.dbname}
	if password != "" {
		u.User = url.UserPassword(user, password)
	} else {
		u.User = url.User(user)
	}
	q := url.Values{}
	if direct {
		for k, v := range d.query {
			q[k] = v
		}
	}
	if d.protocol == protoPostgres && !direct {
		q.Set("sslmode", "disable")
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// mysqlConfig is the go-sql-driver configuration of a connection to addr
// as user ("" for the DSN's own).
func (d *database) mysqlConfig(addr, user, password string) *mysql.Config {
	c := mysql.NewConfig()
	c.Net, c.Addr, c.DBName = "tcp", addr, d.dbname
	c.User, c.Passwd = d.user, d.password
	if user != "" {
		c.User, c.Passwd = user, password
	}
	c.Logger = &mysql.NopLogger{}
	return c
}

// openDatabase starts or addresses the database o asks for.
func openDatabase(ctx context.Context, o *Options, clk clock.Clock, log *slog.Logger, say func(string, ...any)) (*database, error) {
	if o.DSN != "" {
		return parseDSN(o.DSN)
	}
	switch o.Backend {
	case "", BackendEmbedded:
		return startEmbedded(ctx, clk, log)
	case BackendPostgres:
		say("starting a throwaway PostgreSQL (initdb into a temporary directory)")
		srv, err := pgtemp.Start(ctx, pgtemp.Options{BinDir: o.PostgresBin, Clock: clk, Logger: log})
		if err != nil {
			return nil, err
		}
		d, err := parseDSN(srv.URL())
		if err != nil {
			srv.Close()
			return nil, err
		}
		d.kind = BackendPostgres
		d.describe = fmt.Sprintf("throwaway %s on %s (initdb in %s, removed at the end)", srv.Version(), d.upstream, srv.Dir())
		d.close = func() { srv.Close() }
		return d, nil
	}
	return nil, fmt.Errorf("unknown backend %q (want %s or %s)", o.Backend, BackendEmbedded, BackendPostgres)
}

// startEmbedded serves a temporary litepg database on a loopback port.
func startEmbedded(ctx context.Context, clk clock.Clock, log *slog.Logger) (*database, error) {
	// The data is thrown away at the end: no fsync, so a neighbour's disk
	// traffic does not show up in the latencies.
	srv, err := litepg.New(litepg.Options{Clock: clk, Logger: log.With("component", "litepg"), Synchronous: "OFF"})
	if err != nil {
		return nil, fmt.Errorf("embedded backend: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		srv.Close()
		return nil, fmt.Errorf("embedded backend: %w", err)
	}
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(sctx, ln); err != nil && !errors.Is(err, litepg.ErrServerClosed) {
			log.Error("embedded backend stopped", "err", err)
		}
	}()
	return &database{
		kind:     BackendEmbedded,
		protocol: protoPostgres,
		describe: fmt.Sprintf("embedded database (litepg: SQLite over the PostgreSQL protocol) on %s", ln.Addr()),
		upstream: ln.Addr().String(),
		user:     "lab",
		dbname:   "lab",
		close: func() {
			cancel()
			<-done
			srv.Close()
		},
	}, nil
}

// parseDSN reads a postgres:// or mysql:// URL (or a go-sql-driver DSN,
// user:pass@tcp(host:port)/db).
func parseDSN(dsn string) (*database, error) {
	bad := func(format string, args ...any) error {
		return &UsageError{Msg: "bad --dsn: " + fmt.Sprintf(format, args...)}
	}
	switch {
	case strings.HasPrefix(dsn, "postgres://"), strings.HasPrefix(dsn, "postgresql://"):
		u, err := url.Parse(dsn)
		if err != nil {
			return nil, bad("not a valid URL")
		}
		cfg, err := pgconn.ParseConfig(dsn)
		if err != nil {
			return nil, bad("%v", err)
		}
		if strings.HasPrefix(cfg.Host, "/") {
			return nil, bad("Unix sockets are not supported; give host:port")
		}
		q := u.Query()
		d := &database{kind: "dsn", protocol: protoPostgres, upstream: net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port))),
			user: cfg.User, password: cfg.Password, dbname: cfg.Database, query: q, close: func() {}}
		switch q.Get("sslmode") {
		case "require":
			d.upstreamTLS = &config.UpstreamTLS{InsecureSkipVerify: true}
		case "verify-ca", "verify-full":
			d.upstreamTLS = &config.UpstreamTLS{ServerName: cfg.Host}
		}
		return described(d, "PostgreSQL", bad)
	case strings.HasPrefix(dsn, "mysql://"):
		cfg, err := bench.MySQLURLConfig(dsn)
		if err != nil {
			return nil, bad("%v", err)
		}
		u, _ := url.Parse(dsn) // MySQLURLConfig has parsed it
		d := &database{kind: "dsn", protocol: protoMySQL, upstream: cfg.Addr, user: cfg.User, password: cfg.Passwd,
			dbname: cfg.DBName, query: u.Query(), close: func() {}}
		if d.dbname == "" {
			return nil, bad("name a database: mysql://user:pass@host:port/db")
		}
		return described(d, "MySQL/MariaDB", bad)
	case strings.Contains(dsn, "@tcp("):
		cfg, err := mysql.ParseDSN(dsn)
		if err != nil {
			return nil, bad("%v", err)
		}
		u := url.URL{Scheme: "mysql", User: url.UserPassword(cfg.User, cfg.Passwd), Host: cfg.Addr, Path: "/" + cfg.DBName}
		return parseDSN(u.String())
	}
	return nil, bad("want postgres://user:pass@host:port/db or mysql://user:pass@host:port/db")
}

// described checks d's upstream address and describes d as a server of
// the given kind; bad makes the error.
func described(d *database, kind string, bad func(string, ...any) error) (*database, error) {
	if err := checkAddr(d.upstream); err != nil {
		return nil, bad("%v", err)
	}
	d.describe = fmt.Sprintf("%s at %s (database %s)", kind, d.upstream, d.dbname)
	return d, nil
}

// checkAddr checks that addr is a dialable host:port.
func checkAddr(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("address %q: %w", addr, err)
	}
	if host == "" || strings.ContainsAny(host, "/[]") {
		return fmt.Errorf("address %q: bad host", addr)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Errorf("address %q: bad port", addr)
	}
	return nil
}
