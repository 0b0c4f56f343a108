package config

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
)

// Flags are the options of `sluice serve` that add to or override the
// configuration file. A zero field adds or overrides nothing.
type Flags struct {
	Listen, Upstream, Protocol, Link string // one route, named "cli"
	Admin, HTTP                      string // console and API addresses
	Catalog                          string
	// Name is the instance's name in a fleet (--name); "" keeps the
	// file's.
	Name string
	// FastPath is --fast-path; "" keeps the file's fast_path.
	FastPath string

	// TLSCert and TLSKey terminate client TLS on the flag route (both
	// or neither).
	TLSCert, TLSKey string
	// UpstreamTLS originates TLS to the flag route's upstream, verified
	// against the system roots (or UpstreamTLSCA) and the upstream's
	// host name. UpstreamTLSCA or UpstreamTLSInsecure imply it;
	// UpstreamTLSInsecure skips verification.
	UpstreamTLS         bool
	UpstreamTLSCA       string
	UpstreamTLSInsecure bool
}

// flagTLS puts the TLS flags on the flag route r; its errors name the
// flag.
func (fl Flags) flagTLS(r *Route) error {
	switch {
	case fl.TLSCert != "" && fl.TLSKey == "":
		return &Error{Key: "--tls-key", Msg: "--tls-cert needs --tls-key"}
	case fl.TLSKey != "" && fl.TLSCert == "":
		return &Error{Key: "--tls-cert", Msg: "--tls-key needs --tls-cert"}
	case fl.TLSCert != "":
		r.TLS = &TLS{Cert: fl.TLSCert, Key: fl.TLSKey}
	}
	if fl.UpstreamTLS || fl.UpstreamTLSCA != "" || fl.UpstreamTLSInsecure {
		r.UpstreamTLS = &UpstreamTLS{CA: fl.UpstreamTLSCA, InsecureSkipVerify: fl.UpstreamTLSInsecure}
		if fl.UpstreamTLSCA != "" && fl.UpstreamTLSInsecure {
			return &Error{Key: "--upstream-tls-insecure", Value: "true", Msg: "verifies nothing, so --upstream-tls-ca would be unused; give one of them"}
		}
	}
	if r.Protocol == "tcp" || r.Protocol == "" {
		switch {
		case r.TLS != nil:
			return &Error{Key: "--tls-cert", Value: fl.TLSCert, Msg: "TLS is handled by postgres and mysql routes only (--protocol)"}
		case r.UpstreamTLS != nil:
			return &Error{Key: "--upstream-tls", Value: "true", Msg: "TLS is handled by postgres and mysql routes only (--protocol)"}
		}
	}
	return nil
}

// hasTLS reports whether any TLS flag is given.
func (fl Flags) hasTLS() bool {
	return fl.TLSCert != "" || fl.TLSKey != "" || fl.UpstreamTLS || fl.UpstreamTLSCA != "" || fl.UpstreamTLSInsecure
}

// FlagRoute is the name of the route given by Flags.Listen.
const FlagRoute = "cli"

// ApplyFlags merges fl into c and checks the result as a whole: the flag
// route like a file route, then every address against every other and
// every route name against every other (Check). c may be a zero Config
// (no file); its Grace is then DefaultGrace.
func (c *Config) ApplyFlags(fl Flags) error {
	if c.Source == "" && c.Grace == 0 {
		c.Grace = DefaultGrace
	}
	if fl.Listen != "" || fl.Upstream != "" {
		r := Route{Name: FlagRoute, Listen: fl.Listen, Upstream: fl.Upstream, Protocol: fl.Protocol, Link: fl.Link}
		if err := fl.flagTLS(&r); err != nil {
			return err
		}
		if err := ValidateRoute(&r); err != nil {
			return c.routeError(r, err)
		}
		c.Routes = append(c.Routes, r)
	} else if fl.hasTLS() {
		return &Error{Msg: "the TLS flags (--tls-cert, --tls-key, --upstream-tls...) apply to the route of --listen and --upstream; give them, or set tls and upstream_tls on a route of the file"}
	}
	if fl.FastPath != "" {
		if err := CheckFastPath(fl.FastPath); err != nil {
			return &Error{Key: "--fast-path", Value: fl.FastPath, Msg: err.Error()}
		}
		c.FastPath = fl.FastPath
	}
	if fl.Admin != "" {
		if err := checkListen(fl.Admin); err != nil {
			return &Error{Key: "--admin", Value: fl.Admin, Msg: err.Error()}
		}
		c.Admin.Listen, c.adminFlag = fl.Admin, true
	}
	if fl.HTTP != "" {
		if err := checkListen(fl.HTTP); err != nil {
			return &Error{Key: "--http", Value: fl.HTTP, Msg: err.Error()}
		}
		c.HTTP.Listen, c.httpFlag = fl.HTTP, true
	}
	if fl.Catalog != "" {
		c.Catalog = fl.Catalog
	}
	if fl.Name != "" {
		if err := checkInstanceName(fl.Name); err != nil {
			return &Error{Key: "--name", Value: fl.Name, Msg: err.Error()}
		}
		c.Fleet.Name = fl.Name
	}
	if err := c.resolveCatalog(true); err != nil {
		var ce *Error
		if errors.As(err, &ce) && ce.Key == "catalog" && fl.Catalog != "" {
			ce.File, ce.Key = "", "--catalog"
		}
		return err
	}
	if len(c.Routes) == 0 && c.Admin.Listen == "" && c.HTTP.Listen == "" {
		return &Error{Msg: "nothing to serve: give --listen and --upstream, or --config FILE"}
	}
	return c.Check()
}

// routeError places err, an *Error from validating one of c's routes
// (Key a field name such as "link"), where the route was given: the
// file and key path (routes[1].link), or the flag (--link) for the flag
// route. Other errors are returned unchanged.
func (c *Config) routeError(r Route, err error) error {
	var ce *Error
	if !errors.As(err, &ce) {
		return err
	}
	ce.File, ce.Key = c.RouteKey(r, ce.Key)
	return err
}

// RouteKey returns the file and key path naming a field of r, for error
// messages: (Source, "routes[1].link") for a file route, ("", "--link")
// for the flag route. A field with no flag is named by the route's name.
func (c *Config) RouteKey(r Route, field string) (file, key string) {
	if r.Key != "" {
		return c.Source, r.Key + "." + field
	}
	switch field {
	case "listen", "upstream", "protocol", "link":
		return "", "--" + field
	case "tls":
		return "", "--tls-cert"
	case "upstream_tls.ca":
		return "", "--upstream-tls-ca"
	case "upstream_tls.server_name":
		return "", "--upstream-tls"
	}
	return "", "routes." + r.Name + "." + field
}

// Check refuses what would clash once applied: two routes of one name,
// and two listen addresses (routes, admin console, HTTP API) that would
// contend for the same socket. Every error names where both were given.
func (c *Config) Check() error {
	names := map[string]Route{}
	for _, r := range c.Routes {
		if o, dup := names[r.Name]; dup {
			if r.Key == "" {
				file, key := c.RouteKey(o, "name")
				return &Error{File: file, Key: key, Value: o.Name, Msg: "the route of --listen and --upstream has this name"}
			}
			file, key := c.RouteKey(r, "name")
			ofile, okey := c.RouteKey(o, "name")
			return &Error{File: file, Key: key, Value: r.Name, Msg: "duplicate route name, also given at " + place(ofile, okey)}
		}
		names[r.Name] = r
	}
	ls := c.listeners()
	for i, l := range ls {
		for _, o := range ls[:i] {
			if overlap(o.addr, l.addr) {
				return &Error{File: l.file, Key: l.key, Value: l.addr,
					Msg: fmt.Sprintf("address overlaps %q given at %s", o.addr, place(o.file, o.key))}
			}
		}
	}
	return nil
}

// listener is an address sluice binds and where it was given.
type listener struct{ file, key, addr string }

// listeners returns every address c binds, in the order they are bound.
func (c *Config) listeners() []listener {
	var ls []listener
	for _, r := range c.Routes {
		file, key := c.RouteKey(r, "listen")
		ls = append(ls, listener{file, key, r.Listen})
	}
	if c.Admin.Listen != "" {
		l := listener{c.Source, "admin.listen", c.Admin.Listen}
		if c.adminFlag {
			l.file, l.key = "", "--admin"
		}
		ls = append(ls, l)
	}
	if c.HTTP.Listen != "" {
		l := listener{c.Source, "http.listen", c.HTTP.Listen}
		if c.httpFlag {
			l.file, l.key = "", "--http"
		}
		ls = append(ls, l)
	}
	return ls
}

// place names where a value was given: "routes[0].listen in s.yaml" or
// "--listen".
func place(file, key string) string {
	if file == "" {
		return key
	}
	return key + " in " + file
}

// overlap reports whether binding both listen addresses would fail or
// steal connections: the same port (not 0, which picks a free one) on
// the same host, or on a wildcard host that covers the other. "" and
// "::" cover every address (Go listens dual-stack on them), 0.0.0.0
// every IPv4 address and host name, and "localhost" stands for
// 127.0.0.1 and ::1. Host names are otherwise compared by name, without
// resolving them. Both must have passed checkListen.
func overlap(a, b string) bool {
	ha, pa, _ := net.SplitHostPort(a)
	hb, pb, _ := net.SplitHostPort(b)
	if pa != pb || pa == "0" {
		return false
	}
	return hostsOverlap(ha, hb) || hostsOverlap(hb, ha)
}

func hostsOverlap(a, b string) bool {
	ia, ib := net.ParseIP(a), net.ParseIP(b)
	switch {
	case a == "" || ia != nil && ia.Equal(net.IPv6unspecified):
		return true
	case ia != nil && ia.Equal(net.IPv4zero):
		return ib == nil || ib.To4() != nil
	case strings.EqualFold(a, "localhost"):
		return strings.EqualFold(b, "localhost") || ib != nil && (ib.Equal(net.IPv4(127, 0, 0, 1)) || ib.Equal(net.IPv6loopback))
	case ia != nil && ib != nil:
		return ia.Equal(ib)
	}
	return strings.EqualFold(a, b)
}

// checkListen accepts host:port with a port from 0 (any free port) to
// 65535.
func checkListen(a string) error { return checkHostPort(a, 0) }

// checkHostPort accepts host:port with a decimal port from min to 65535.
func checkHostPort(a string, min int) error {
	_, port, err := net.SplitHostPort(a)
	if err != nil {
		return fmt.Errorf("want host:port")
	}
	if port == "" {
		return fmt.Errorf("want host:port with a port")
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < min || n > 65535 || port[0] == '+' {
		return fmt.Errorf("port %s out of range (want a number from %d to 65535)", port, min)
	}
	return nil
}
