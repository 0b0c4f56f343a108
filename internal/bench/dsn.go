package bench

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
)

// dsnDriver returns the driver a --dsn value addresses: pgsql for
// postgres:// and postgresql:// URLs, mysql for mysql:// URLs and
// go-sql-driver DSNs (user:pass@tcp(host:port)/db).
func dsnDriver(dsn string) (string, error) {
	switch {
	case strings.HasPrefix(dsn, "postgres://"), strings.HasPrefix(dsn, "postgresql://"):
		if _, err := url.Parse(dsn); err != nil {
			return "", errors.New("not a valid URL")
		}
		return DriverPgSQL, nil
	case strings.HasPrefix(dsn, "mysql://"):
		if _, err := MySQLURLConfig(dsn); err != nil {
			return "", err
		}
		return DriverMySQL, nil
	case strings.Contains(dsn, "@tcp(") || strings.Contains(dsn, "@unix(") || strings.HasPrefix(dsn, "tcp(") || strings.HasPrefix(dsn, "unix("):
		if _, err := mysql.ParseDSN(dsn); err != nil {
			return "", err
		}
		return DriverMySQL, nil
	}
	return "", errors.New("want postgres://user:pass@host:port/db, mysql://user:pass@host:port/db or user:pass@tcp(host:port)/db")
}

// MySQLURLConfig parses mysql://user:pass@host:port/db?param=value; the
// query takes go-sql-driver's DSN parameters. The host defaults to
// 127.0.0.1 and the port to 3306.
func MySQLURLConfig(dsn string) (*mysql.Config, error) {
	u, err := url.Parse(dsn)
	if err != nil {
		return nil, errors.New("not a valid URL")
	}
	cfg, err := mysql.ParseDSN("/?" + u.RawQuery)
	if u.RawQuery == "" {
		cfg, err = mysql.NewConfig(), nil
	}
	if err != nil {
		return nil, err
	}
	if u.User != nil {
		cfg.User = u.User.Username()
		cfg.Passwd, _ = u.User.Password()
	}
	host, port := u.Hostname(), u.Port()
	if host == "" {
		host = "127.0.0.1"
	}
	if port == "" {
		port = "3306"
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return nil, fmt.Errorf("bad port %q", port)
	}
	cfg.Net, cfg.Addr = "tcp", net.JoinHostPort(host, port)
	cfg.DBName = strings.TrimPrefix(u.Path, "/")
	return cfg, nil
}

// mysqlConfigs returns the go-sql-driver configurations of o's MySQL
// connections: one per socket, or per host x port, used round-robin.
func mysqlConfigs(o *Options) ([]*mysql.Config, error) {
	var cfgs []*mysql.Config
	base := func() *mysql.Config {
		c := mysql.NewConfig()
		c.User, c.Passwd, c.DBName = o.MySQL.User, o.MySQL.Password, o.MySQL.DB
		return c
	}
	switch {
	case o.DSN != "" && strings.HasPrefix(o.DSN, "mysql://"):
		c, err := MySQLURLConfig(o.DSN)
		if err != nil {
			return nil, err
		}
		cfgs = append(cfgs, c)
	case o.DSN != "":
		c, err := mysql.ParseDSN(o.DSN)
		if err != nil {
			return nil, err
		}
		cfgs = append(cfgs, c)
	case len(o.MySQL.Sockets) > 0:
		for _, s := range o.MySQL.Sockets {
			c := base()
			c.Net, c.Addr = "unix", s
			cfgs = append(cfgs, c)
		}
	default:
		for _, h := range o.MySQL.Hosts {
			for _, p := range o.MySQL.Ports {
				c := base()
				c.Net, c.Addr = "tcp", net.JoinHostPort(h, strconv.Itoa(p))
				cfgs = append(cfgs, c)
			}
		}
	}
	for _, c := range cfgs {
		c.Logger = &mysql.NopLogger{}
		c.Timeout = 10 * time.Second
		c.InterpolateParams = false
		if o.DSN == "" && o.MySQL.SSL {
			c.TLSConfig = "preferred"
		}
		if o.DSN == "" && o.MySQL.Compression {
			if err := c.Apply(mysql.EnableCompression(true)); err != nil {
				return nil, err
			}
		}
	}
	return cfgs, nil
}

// pgConfig returns the pgx configuration of o's PostgreSQL connections.
func pgConfig(o *Options) (*pgx.ConnConfig, error) {
	conn := o.DSN
	if conn == "" {
		u := url.URL{
			Scheme: "postgres",
			User:   url.UserPassword(o.PgSQL.User, o.PgSQL.Password),
			Host:   net.JoinHostPort(o.PgSQL.Host, strconv.Itoa(o.PgSQL.Port)),
			Path:   "/" + o.PgSQL.DB,
		}
		if o.PgSQL.Password == "" {
			u.User = url.User(o.PgSQL.User)
		}
		if strings.HasPrefix(o.PgSQL.Host, "/") {
			u.Host = ""
			u.RawQuery = url.Values{"host": {o.PgSQL.Host}, "port": {strconv.Itoa(o.PgSQL.Port)}}.Encode()
		}
		conn = u.String()
	}
	cfg, err := pgx.ParseConfig(conn)
	if err != nil {
		return nil, fmt.Errorf("postgresql address: %w", err)
	}
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = 10 * time.Second
	}
	if _, ok := cfg.RuntimeParams["application_name"]; !ok {
		cfg.RuntimeParams["application_name"] = "sluice bench"
	}
	return cfg, nil
}
