package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"reflect"
	"slices"
	"strings"
	"time"
	"unicode"

	"go.yaml.in/yaml/v3"

	"github.com/sluicelab/sluice/internal/etcd"
	"github.com/sluicelab/sluice/internal/units"
)

// DefaultGrace is how long a shutdown waits for sessions to finish.
const DefaultGrace = 10 * time.Second

// Config is the whole configuration of `sluice serve`.
type Config struct {
	Source string // file the config came from; "" for flags only
	Admin  Admin
	HTTP   HTTP
	// Catalog is the catalog file, or an etcd:// URL for a catalog kept
	// in etcd (then Etcd is set); "" keeps the catalog in memory.
	Catalog string
	// Etcd is how to reach the etcd cluster of an etcd:// catalog: the
	// URL's endpoints and prefix, with the etcd_* keys' TLS files and
	// credentials; nil for a file or in-memory catalog. Etcd.Password is
	// a secret: it is never shown (View) or logged.
	Etcd  *etcd.Config
	Grace time.Duration // shutdown grace period; default 10 s
	// FastPath is fast_path: "auto" (the default, also for ""), "kernel"
	// or "off"; see FastPathModes.
	FastPath string
	Routes   []Route
	// Links and Settings are applied to the catalog at start, as
	// CREATE/ALTER LINK and SET statements would be.
	Links    []Link
	Settings map[string]string
	// Fleet is this instance's part in a fleet; it matters only with a
	// catalog in etcd.
	Fleet Fleet

	// etcdKeys are the file's etcd_* keys, kept apart until the catalog
	// (file or flag) says whether they apply.
	etcdKeys etcd.Config

	// adminFlag and httpFlag are set when Admin.Listen and HTTP.Listen
	// came from --admin and --http, so errors name the flag.
	adminFlag, httpFlag bool
}

// Admin is the admin console.
type Admin struct {
	Listen   string            // "" disables the console
	Password string            // password of user admin
	Users    map[string]string // more console users and their passwords
	// ForwardUsers are the data-route users whose CREATE USER and ALTER
	// USER ... RESOURCE POOL statements sluice splits: the binding goes
	// to the catalog, the rest to the database. Empty (the default)
	// forwards nothing and leaves every session's bytes untouched.
	ForwardUsers []string
}

// HTTP is the HTTP API.
type HTTP struct {
	Listen string // "" disables it
	Token  string // bearer token
}

// Fleet is this instance's part in a fleet of instances sharing a
// catalog in etcd.
type Fleet struct {
	// Name is the instance's name in the fleet (instance_name, --name);
	// "" means the host name and the admin console's port ("db1:6433").
	Name string
	// TTL is the lease of the instance's membership record
	// (instance_ttl); 0 means 10 s.
	TTL time.Duration
	// Token is the bearer token the instances send each other's HTTP
	// APIs, which accept it as well as http.token (fleet_token, or
	// SLUICE_FLEET_TOKEN, which wins); "" sends http.token. A secret.
	Token string
	// Timeout bounds one instance's answer to a cluster-wide view or a
	// forwarded command (fleet_timeout); 0 means 2 s.
	Timeout time.Duration
}

// Route is one listening address.
type Route struct {
	Name string
	// Key is where the route was given, for error messages: "routes[1]"
	// in the file; "" for the route of the command-line flags.
	Key      string
	Listen   string
	Upstream string
	Protocol string // postgres, mysql, tcp
	Link     string
	// Pool is the resource pool of the sessions whose user has no
	// binding; "" for none. It must exist in the catalog.
	Pool         string
	DialTimeout  time.Duration
	NotSentLowat int // bytes; 0 default, -1 kernel default
	TLS          *TLS
	UpstreamTLS  *UpstreamTLS
	KillUser     string // mysql: credentials for KILL QUERY
	KillPassword string
	// Emulation holds route-level path emulation options as the admin
	// console spells them (delay, jitter, rate, ...), validated by the
	// workload manager when applied.
	Emulation map[string]string

	// StartupTimeout bounds a postgres or mysql client's opening
	// exchange; 0 is the front end's default (30 s).
	StartupTimeout time.Duration
	// ConnectTimeout bounds reaching a mysql route's upstream: the dial
	// and its greeting (and TLS with it); 0 is the default (10 s).
	ConnectTimeout time.Duration
}

// TLS terminates client TLS with a certificate.
type TLS struct {
	Cert string
	Key  string
}

// UpstreamTLS originates TLS to the upstream.
type UpstreamTLS struct {
	CA                 string `json:"ca,omitempty"` // PEM file; "" uses the system roots
	ServerName         string `json:"server_name,omitempty"`
	InsecureSkipVerify bool   `json:"insecure_skip_verify,omitempty"`
}

// Link is a link definition.
type Link struct {
	Name    string
	Key     string // where it was given: "links[1]"
	Options map[string]string
}

// Error is a configuration error.
type Error struct {
	File  string // "" for command-line flags
	Key   string
	Value string
	Msg   string
}

func (e *Error) Error() string {
	where := "command line"
	if e.File != "" {
		where = "config " + e.File
	}
	if e.Key == "" {
		return fmt.Sprintf("%s: %s", where, e.Msg)
	}
	return fmt.Sprintf("%s: %s: bad value %q: %s", where, e.Key, e.Value, e.Msg)
}

// file mirrors the YAML layout.
type file struct {
	Admin *struct {
		Listen       string            `yaml:"listen"`
		Password     string            `yaml:"password"`
		Users        map[string]string `yaml:"users"`
		ForwardUsers []string          `yaml:"forward_users"`
	} `yaml:"admin"`
	HTTP *struct {
		Listen string `yaml:"listen"`
		Token  string `yaml:"token"`
	} `yaml:"http"`
	Catalog       string `yaml:"catalog"`
	EtcdCAFile    string `yaml:"etcd_ca_file"`
	EtcdCertFile  string `yaml:"etcd_cert_file"`
	EtcdKeyFile   string `yaml:"etcd_key_file"`
	EtcdUser      string `yaml:"etcd_user"`
	EtcdPassword  string `yaml:"etcd_password"`
	ShutdownGrace string `yaml:"shutdown_grace"`
	FastPath      string `yaml:"fast_path"`
	InstanceName  string `yaml:"instance_name"`
	InstanceTTL   string `yaml:"instance_ttl"`
	FleetToken    string `yaml:"fleet_token"`
	FleetTimeout  string `yaml:"fleet_timeout"`
	Routes        []struct {
		Name         string `yaml:"name"`
		Listen       string `yaml:"listen"`
		Upstream     string `yaml:"upstream"`
		Protocol     string `yaml:"protocol"`
		Link         string `yaml:"link"`
		Pool         string `yaml:"pool"`
		DialTimeout  string `yaml:"dial_timeout"`
		NotSentLowat string `yaml:"notsent_lowat"`
		TLS          *struct {
			Cert string `yaml:"cert"`
			Key  string `yaml:"key"`
		} `yaml:"tls"`
		UpstreamTLS *struct {
			CA                 string `yaml:"ca"`
			ServerName         string `yaml:"server_name"`
			InsecureSkipVerify bool   `yaml:"insecure_skip_verify"`
		} `yaml:"upstream_tls"`
		KillUser     string            `yaml:"kill_user"`
		KillPassword string            `yaml:"kill_password"`
		Emulation    map[string]string `yaml:"emulation"`

		StartupTimeout string `yaml:"startup_timeout"`
		ConnectTimeout string `yaml:"connect_timeout"`
	} `yaml:"routes"`
	Links []struct {
		Name    string            `yaml:"name"`
		Options map[string]string `yaml:",inline"`
	} `yaml:"links"`
	Settings map[string]string `yaml:"settings"`
}

// Load reads and validates the YAML file at path.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, &Error{File: path, Msg: err.Error()}
	}
	return Parse(path, data)
}

// Parse validates YAML data; name is used in errors.
func Parse(name string, data []byte) (*Config, error) {
	var (
		f    file
		root yaml.Node
	)
	err := yaml.NewDecoder(bytes.NewReader(data)).Decode(&root)
	if err == nil {
		err = root.Decode(&f)
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, &Error{File: name, Msg: strings.TrimPrefix(err.Error(), "yaml: ")}
	}
	if err := unknownKey(name, &root, reflect.TypeFor[file](), ""); err != nil {
		return nil, err
	}
	c := &Config{Source: name, Catalog: f.Catalog, Grace: DefaultGrace, Settings: f.Settings,
		etcdKeys: etcd.Config{CAFile: f.EtcdCAFile, CertFile: f.EtcdCertFile, KeyFile: f.EtcdKeyFile, Username: f.EtcdUser, Password: f.EtcdPassword}}
	bad := func(key, val, msg string) error { return &Error{File: name, Key: key, Value: val, Msg: msg} }
	if f.ShutdownGrace != "" {
		d, err := units.ParseDuration(f.ShutdownGrace)
		if err != nil {
			return nil, bad("shutdown_grace", f.ShutdownGrace, err.Error())
		}
		c.Grace = d
	}
	if err := CheckFastPath(f.FastPath); err != nil {
		return nil, bad("fast_path", f.FastPath, err.Error())
	}
	c.FastPath = f.FastPath
	c.Fleet = Fleet{Name: f.InstanceName, Token: f.FleetToken}
	if err := checkInstanceName(c.Fleet.Name); err != nil {
		return nil, bad("instance_name", c.Fleet.Name, err.Error())
	}
	for _, d := range []struct {
		key, val string
		min      time.Duration
		dst      *time.Duration
	}{
		{"instance_ttl", f.InstanceTTL, 2 * time.Second, &c.Fleet.TTL},
		{"fleet_timeout", f.FleetTimeout, time.Millisecond, &c.Fleet.Timeout},
	} {
		if d.val == "" {
			continue
		}
		v, err := units.ParseDuration(d.val)
		if err != nil {
			return nil, bad(d.key, d.val, err.Error())
		}
		if v < d.min {
			return nil, bad(d.key, d.val, "want at least "+d.min.String())
		}
		*d.dst = v
	}
	if f.Admin != nil {
		c.Admin = Admin{Listen: f.Admin.Listen, Password: f.Admin.Password, Users: f.Admin.Users}
		if c.Admin.Listen != "" {
			if err := checkListen(c.Admin.Listen); err != nil {
				return nil, bad("admin.listen", c.Admin.Listen, err.Error())
			}
		}
		seen := map[string]bool{}
		for i, u := range f.Admin.ForwardUsers {
			key := fmt.Sprintf("admin.forward_users[%d]", i)
			switch {
			case u == "":
				return nil, bad(key, u, "want a user name")
			case strings.ContainsFunc(u, unicode.IsControl):
				return nil, bad(key, u, "a user name has no control characters")
			case seen[u]:
				return nil, bad(key, u, "duplicate user")
			}
			seen[u] = true
			c.Admin.ForwardUsers = append(c.Admin.ForwardUsers, u)
		}
	}
	if f.HTTP != nil {
		c.HTTP = HTTP{Listen: f.HTTP.Listen, Token: f.HTTP.Token}
		if c.HTTP.Listen != "" {
			if err := checkListen(c.HTTP.Listen); err != nil {
				return nil, bad("http.listen", c.HTTP.Listen, err.Error())
			}
		}
	}
	for i, fr := range f.Routes {
		key := func(k string) string { return fmt.Sprintf("routes[%d].%s", i, k) }
		r := Route{
			Name: fr.Name, Key: fmt.Sprintf("routes[%d]", i), Listen: fr.Listen, Upstream: fr.Upstream, Protocol: fr.Protocol,
			Link: fr.Link, Pool: fr.Pool, KillUser: fr.KillUser, KillPassword: fr.KillPassword, Emulation: fr.Emulation,
		}
		if r.Name == "" {
			r.Name = fmt.Sprintf("route%d", i+1)
		}
		for _, d := range []struct {
			key, val string
			dst      *time.Duration
		}{
			{"dial_timeout", fr.DialTimeout, &r.DialTimeout},
			{"startup_timeout", fr.StartupTimeout, &r.StartupTimeout},
			{"connect_timeout", fr.ConnectTimeout, &r.ConnectTimeout},
		} {
			if d.val == "" {
				continue
			}
			v, err := units.ParseDuration(d.val)
			if err != nil {
				return nil, bad(key(d.key), d.val, err.Error())
			}
			*d.dst = v
		}
		if fr.NotSentLowat != "" {
			if fr.NotSentLowat == "-1" || fr.NotSentLowat == "off" {
				r.NotSentLowat = -1
			} else {
				n, err := units.ParseBytes(fr.NotSentLowat)
				if err != nil || n > 1<<30 {
					msg := "want a size such as 128KiB, or off"
					if err != nil {
						msg = err.Error()
					}
					return nil, bad(key("notsent_lowat"), fr.NotSentLowat, msg)
				}
				r.NotSentLowat = int(n)
			}
		}
		if fr.TLS != nil {
			r.TLS = &TLS{Cert: fr.TLS.Cert, Key: fr.TLS.Key}
			if r.TLS.Cert == "" || r.TLS.Key == "" {
				return nil, bad(key("tls"), r.TLS.Cert+","+r.TLS.Key, "both cert and key are required")
			}
		}
		if fr.UpstreamTLS != nil {
			r.UpstreamTLS = &UpstreamTLS{CA: fr.UpstreamTLS.CA, ServerName: fr.UpstreamTLS.ServerName, InsecureSkipVerify: fr.UpstreamTLS.InsecureSkipVerify}
		}
		if err := ValidateRoute(&r); err != nil {
			return nil, c.routeError(r, err)
		}
		c.Routes = append(c.Routes, r)
	}
	links := map[string]int{}
	for i, fl := range f.Links {
		key := fmt.Sprintf("links[%d].name", i)
		if fl.Name == "" {
			return nil, bad(key, "", "a link needs a name")
		}
		if j, dup := links[fl.Name]; dup {
			return nil, bad(key, fl.Name, fmt.Sprintf("duplicate link name, also given at links[%d].name", j))
		}
		links[fl.Name] = i
		c.Links = append(c.Links, Link{Name: fl.Name, Key: fmt.Sprintf("links[%d]", i), Options: fl.Options})
	}
	// Without a catalog key, --catalog may still name an etcd catalog
	// for the etcd_* keys: ApplyFlags checks them then.
	if err := c.resolveCatalog(c.Catalog != ""); err != nil {
		return nil, err
	}
	if err := c.Check(); err != nil {
		return nil, err
	}
	return c, nil
}

// checkInstanceName refuses a name that cannot be part of an etcd key
// (a slash) or of a log line (a control character); "" is the default.
func checkInstanceName(name string) error {
	if strings.Contains(name, "/") || strings.ContainsFunc(name, unicode.IsControl) {
		return errors.New("an instance name has no slash and no control characters")
	}
	return nil
}

// resolveCatalog sets Etcd from an etcd:// Catalog and the etcd_* keys,
// refusing a bad URL, a password without a user and half a client
// certificate, and, when strict, etcd_* keys without an etcd catalog. A
// URL with user information is not shown in the error (it may hold a
// password).
func (c *Config) resolveCatalog(strict bool) error {
	k := c.etcdKeys
	if !etcd.IsURL(c.Catalog) {
		c.Etcd = nil
		if !strict {
			return nil
		}
		password := ""
		if k.Password != "" {
			password = "***"
		}
		for _, kv := range [][2]string{{"etcd_ca_file", k.CAFile}, {"etcd_cert_file", k.CertFile}, {"etcd_key_file", k.KeyFile}, {"etcd_user", k.Username}, {"etcd_password", password}} {
			if kv[1] != "" {
				return &Error{File: c.Source, Key: kv[0], Value: kv[1], Msg: "applies to a catalog kept in etcd (catalog: etcd://host:2379/prefix)"}
			}
		}
		return nil
	}
	e, err := etcd.ParseURL(c.Catalog)
	if err != nil {
		shown := c.Catalog
		if strings.Contains(shown, "@") {
			shown = "***"
		}
		return &Error{File: c.Source, Key: "catalog", Value: shown, Msg: err.Error()}
	}
	e.CAFile, e.CertFile, e.KeyFile, e.Username, e.Password = k.CAFile, k.CertFile, k.KeyFile, k.Username, k.Password
	switch {
	case (e.CertFile == "") != (e.KeyFile == ""):
		return &Error{File: c.Source, Key: "etcd_cert_file", Value: e.CertFile + "," + e.KeyFile, Msg: "set both etcd_cert_file and etcd_key_file, or neither"}
	case e.Username == "" && e.Password != "":
		return &Error{File: c.Source, Key: "etcd_user", Msg: "etcd_password is set: give the user it belongs to"}
	}
	c.Etcd = &e
	return nil
}

// SetEtcdPassword sets the password to etcd (SLUICE_ETCD_PASSWORD wins
// over the file's etcd_password); it does nothing without an etcd
// catalog.
func (c *Config) SetEtcdPassword(pw string) {
	c.etcdKeys.Password = pw
	if c.Etcd != nil {
		c.Etcd.Password = pw
	}
}

// ValidateRoute checks a route's listen and upstream addresses and
// protocol. Errors are *Error with Key set to the field name.
func ValidateRoute(r *Route) error {
	if r.Listen == "" {
		return &Error{Key: "listen", Msg: "a route needs a listen address"}
	}
	if err := checkListen(r.Listen); err != nil {
		return &Error{Key: "listen", Value: r.Listen, Msg: err.Error()}
	}
	if r.Upstream == "" {
		return &Error{Key: "upstream", Msg: "a route needs an upstream address"}
	}
	if err := checkUpstream(r.Upstream); err != nil {
		return &Error{Key: "upstream", Value: r.Upstream, Msg: err.Error()}
	}
	if strings.HasPrefix(r.Upstream, "/") && r.UpstreamTLS != nil && r.UpstreamTLS.ServerName == "" && !r.UpstreamTLS.InsecureSkipVerify {
		return &Error{Key: "upstream_tls.server_name", Msg: "a Unix socket upstream names no host: set server_name to verify the certificate against"}
	}
	switch r.Protocol {
	case "":
		r.Protocol = "tcp"
	case "postgres", "mysql", "tcp":
	case "postgresql", "pg":
		r.Protocol = "postgres"
	default:
		return &Error{Key: "protocol", Value: r.Protocol, Msg: "want postgres, mysql or tcp"}
	}
	if r.Protocol == "tcp" && (r.TLS != nil || r.UpstreamTLS != nil) {
		return &Error{Key: "tls", Value: r.Protocol, Msg: "TLS is handled by postgres and mysql routes only"}
	}
	if r.Protocol != "mysql" && (r.KillUser != "" || r.KillPassword != "") {
		return &Error{Key: "kill_user", Value: r.KillUser, Msg: "kill credentials apply to mysql routes only"}
	}
	if r.Protocol == "tcp" && r.StartupTimeout != 0 {
		return &Error{Key: "startup_timeout", Value: r.StartupTimeout.String(), Msg: "a tcp route has no opening exchange; startup_timeout applies to postgres and mysql routes"}
	}
	if r.Protocol != "mysql" && r.ConnectTimeout != 0 {
		return &Error{Key: "connect_timeout", Value: r.ConnectTimeout.String(), Msg: "connect_timeout applies to mysql routes only; dial_timeout bounds the dial of every route"}
	}
	return nil
}

// checkUpstream accepts host:port with a port from 1 to 65535, or the
// absolute path of a Unix socket.
func checkUpstream(a string) error {
	if strings.HasPrefix(a, "/") {
		return nil
	}
	if _, _, err := net.SplitHostPort(a); err != nil {
		return fmt.Errorf("want host:port or the absolute path of a Unix socket")
	}
	return checkHostPort(a, 1)
}

// FastPathModes are fast_path's values: auto relays in the kernel the
// sessions whose bytes sluice need not touch, when the kernel lets it (a
// reason at INFO otherwise), and is the default; kernel refuses to start
// without it; off relays every byte in user space.
var FastPathModes = []string{"auto", "kernel", "off"}

// CheckFastPath checks a fast_path value; "" is auto.
func CheckFastPath(v string) error {
	if v == "" || slices.Contains(FastPathModes, v) {
		return nil
	}
	return fmt.Errorf("want auto, kernel or off")
}
