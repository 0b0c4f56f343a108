package etcd

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Scheme is the URL scheme of a catalog kept in etcd.
const Scheme = "etcd://"

// DefaultDialTimeout bounds the first connection to the cluster.
const DefaultDialTimeout = 5 * time.Second

// Config says how to reach the cluster and where sluice's keys live.
// The zero value is not usable: Endpoints must hold at least one address.
type Config struct {
	// Endpoints are the members' client addresses, host:port, tried in
	// order (the client balances over them and fails over).
	Endpoints []string
	// Prefix is the root of sluice's keys, beginning and not ending with
	// "/" ("/sluice"); "" is parsed as "/sluice".
	Prefix string
	// TLS, when CAFile, CertFile or KeyFile is set, dials with TLS:
	// CAFile verifies the members (the system's roots when ""), CertFile
	// and KeyFile are the client certificate (both or neither).
	CAFile, CertFile, KeyFile string
	// Username and Password authenticate to etcd; "" for none. Password
	// is a secret: String never shows it.
	Username, Password string
	// DialTimeout bounds the first connection; 0 means DefaultDialTimeout.
	DialTimeout time.Duration
}

// IsURL reports whether s names a catalog in etcd rather than a file.
func IsURL(s string) bool { return strings.HasPrefix(s, Scheme) }

// ParseURL parses `etcd://host1:2379,host2:2379/prefix`. A host without
// a port takes 2379; a missing prefix is "/sluice". TLS and credentials
// are not part of the URL (they are configuration keys), so a URL with
// user information is refused: a password must not sit in a value that
// is logged and shown.
func ParseURL(s string) (Config, error) {
	if !IsURL(s) {
		return Config{}, fmt.Errorf("catalog %q: not an %s URL", s, Scheme)
	}
	rest := strings.TrimPrefix(s, Scheme)
	hosts, prefix, _ := strings.Cut(rest, "/")
	if strings.Contains(hosts, "@") {
		return Config{}, errors.New("catalog URL: credentials do not belong in the URL; set etcd_user and etcd_password")
	}
	var c Config
	for h := range strings.SplitSeq(hosts, ",") {
		if h == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(h); err != nil {
			h = net.JoinHostPort(strings.Trim(h, "[]"), "2379")
		}
		c.Endpoints = append(c.Endpoints, h)
	}
	if len(c.Endpoints) == 0 {
		return Config{}, fmt.Errorf("catalog %q: no etcd endpoint", s)
	}
	c.Prefix = "/" + strings.Trim(prefix, "/")
	if c.Prefix == "/" {
		c.Prefix = "/sluice"
	}
	return c, nil
}

// String is the URL the Config was parsed from, without secrets.
func (c Config) String() string {
	return Scheme + strings.Join(c.Endpoints, ",") + c.prefix()
}

func (c Config) prefix() string {
	if c.Prefix == "" {
		return "/sluice"
	}
	return c.Prefix
}

// Key returns the key of parts under the prefix: Key("catalog") is
// "/sluice/catalog", Key("instances", "a") "/sluice/instances/a".
// The fleet's packages own these parts:
//
//	catalog              the catalog (wlm/store)
//	instances/<name>     membership, under each instance's lease
//	budget/...           the shared low-priority budget: demand/<name>,
//	                     grant/<name>, election
func (c Config) Key(parts ...string) string {
	return c.prefix() + "/" + strings.Join(parts, "/")
}

// Dial connects to the cluster. It returns once a member answered a
// status request, or fails within DialTimeout; the client then
// reconnects on its own. Close the client when done.
func Dial(ctx context.Context, c Config) (*clientv3.Client, error) {
	timeout := c.DialTimeout
	if timeout <= 0 {
		timeout = DefaultDialTimeout
	}
	tc, err := c.tlsConfig()
	if err != nil {
		return nil, err
	}
	eps := make([]string, len(c.Endpoints))
	for i, e := range c.Endpoints {
		eps[i] = e
		if !strings.Contains(e, "://") {
			if tc != nil {
				eps[i] = "https://" + e
			} else {
				eps[i] = "http://" + e
			}
		}
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   eps,
		DialTimeout: timeout,
		TLS:         tc,
		Username:    c.Username,
		Password:    c.Password,
		Context:     context.WithoutCancel(ctx),
		// The client's own zap logger writes to stderr; sluice logs what
		// matters itself.
		Logger: zap.NewNop(),
	})
	if err != nil {
		return nil, fmt.Errorf("etcd %s: %w", c, err)
	}
	sctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last error
	for _, e := range cli.Endpoints() {
		if _, last = cli.Status(sctx, e); last == nil {
			return cli, nil
		}
	}
	cli.Close()
	return nil, fmt.Errorf("etcd %s: no member answered: %w", c, last)
}

// tlsConfig is nil without TLS files.
func (c Config) tlsConfig() (*tls.Config, error) {
	if c.CAFile == "" && c.CertFile == "" && c.KeyFile == "" {
		return nil, nil
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if c.CAFile != "" {
		pem, err := os.ReadFile(c.CAFile)
		if err != nil {
			return nil, fmt.Errorf("etcd TLS CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("etcd TLS CA %s: no certificate found", c.CAFile)
		}
		tc.RootCAs = pool
	}
	if (c.CertFile == "") != (c.KeyFile == "") {
		return nil, errors.New("etcd TLS: set both the client certificate and its key, or neither")
	}
	if c.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("etcd TLS client certificate: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}
