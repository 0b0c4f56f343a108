package config

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"time"
)

// Changes is what a reload from one configuration to another does to
// its routes, by route name, each list in the new configuration's order
// (Removed in the old one's).
type Changes struct {
	Added   []string `json:"added"`
	Removed []string `json:"removed"`
	// Changed lists the routes present in both whose settings differ;
	// Relisten is the subset of them whose listen address changed.
	Changed   []string `json:"changed"`
	Relisten  []string `json:"relisten"`
	Unchanged []string `json:"unchanged"`
}

// Empty reports whether no route is added, removed or changed.
func (ch Changes) Empty() bool {
	return len(ch.Added) == 0 && len(ch.Removed) == 0 && len(ch.Changed) == 0
}

// Compare lists how the routes of next differ from those of cur. Where a
// route was given (its Key) is not a difference.
func Compare(cur, next *Config) Changes {
	var ch Changes
	old := make(map[string]Route, len(cur.Routes))
	for _, r := range cur.Routes {
		old[r.Name] = r
	}
	kept := map[string]bool{}
	for _, r := range next.Routes {
		o, ok := old[r.Name]
		switch {
		case !ok:
			ch.Added = append(ch.Added, r.Name)
			continue
		case sameRoute(o, r):
			ch.Unchanged = append(ch.Unchanged, r.Name)
		default:
			ch.Changed = append(ch.Changed, r.Name)
			if o.Listen != r.Listen {
				ch.Relisten = append(ch.Relisten, r.Name)
			}
		}
		kept[r.Name] = true
	}
	for _, r := range cur.Routes {
		if !kept[r.Name] {
			ch.Removed = append(ch.Removed, r.Name)
		}
	}
	return ch
}

// sameRoute reports whether a and b differ in nothing but where they
// were given.
func sameRoute(a, b Route) bool {
	a.Key, b.Key = "", ""
	if len(a.Emulation) == 0 && len(b.Emulation) == 0 {
		a.Emulation, b.Emulation = nil, nil
	}
	return reflect.DeepEqual(a, b)
}

// CheckReload refuses a reload from cur to next that changes what only
// a restart can: the admin console's and the HTTP API's addresses and
// credentials, data-port forwarding and the catalog file. The error
// names the key of next (a secret's value is not shown).
func CheckReload(cur, next *Config) error {
	restart := func(key, value string) error {
		return &Error{File: next.Source, Key: key, Value: value, Msg: key + " cannot change on reload; restart"}
	}
	switch {
	case cur.Admin.Listen != next.Admin.Listen:
		return restart("admin.listen", next.Admin.Listen)
	case cur.Admin.Password != next.Admin.Password:
		return restart("admin.password", "***")
	case !maps.Equal(cur.Admin.Users, next.Admin.Users):
		return restart("admin.users", "***")
	case !slices.Equal(cur.Admin.ForwardUsers, next.Admin.ForwardUsers):
		return restart("admin.forward_users", fmt.Sprint(next.Admin.ForwardUsers))
	case cur.HTTP.Listen != next.HTTP.Listen:
		return restart("http.listen", next.HTTP.Listen)
	case cur.HTTP.Token != next.HTTP.Token:
		return restart("http.token", "***")
	case cur.Catalog != next.Catalog:
		return restart("catalog", next.Catalog)
	case fastPathMode(cur.FastPath) != fastPathMode(next.FastPath):
		return restart("fast_path", next.FastPath)
	case cur.Fleet.Name != next.Fleet.Name:
		return restart("instance_name", next.Fleet.Name)
	case cur.Fleet.TTL != next.Fleet.TTL:
		return restart("instance_ttl", next.Fleet.TTL.String())
	case cur.Fleet.Token != next.Fleet.Token:
		return restart("fleet_token", "***")
	case cur.Fleet.Timeout != next.Fleet.Timeout:
		return restart("fleet_timeout", next.Fleet.Timeout.String())
	case !reflect.DeepEqual(cur.Etcd, next.Etcd):
		return restart("etcd_*", "***")
	}
	return nil
}

// View is a configuration in force as SHOW CONFIG and GET /api/config
// show it: every setting but the secrets (passwords, tokens, kill
// passwords), which are omitted; whether one is set is shown instead.
type View struct {
	File string `json:"file"` // "" when there is no file (flags only)
	// LoadedAt is when this configuration took effect (start or
	// reload).
	LoadedAt time.Time `json:"loaded_at"`
	// Revision counts the reloads applied since start: 0 is the
	// configuration the process started with.
	Revision      int               `json:"revision"`
	AdminListen   string            `json:"admin_listen,omitempty"`
	AdminPassword bool              `json:"admin_password_set"`
	AdminUsers    []string          `json:"admin_users,omitempty"` // names only
	ForwardUsers  []string          `json:"forward_users,omitempty"`
	HTTPListen    string            `json:"http_listen,omitempty"`
	HTTPToken     bool              `json:"http_token_set"`
	Catalog       string            `json:"catalog,omitempty"`
	EtcdCAFile    string            `json:"etcd_ca_file,omitempty"`
	EtcdCertFile  string            `json:"etcd_cert_file,omitempty"`
	EtcdKeyFile   string            `json:"etcd_key_file,omitempty"`
	EtcdUser      string            `json:"etcd_user,omitempty"`
	EtcdPassword  bool              `json:"etcd_password_set,omitempty"`
	ShutdownGrace string            `json:"shutdown_grace"`
	FastPath      string            `json:"fast_path"`
	InstanceName  string            `json:"instance_name,omitempty"`
	InstanceTTL   string            `json:"instance_ttl,omitempty"`
	FleetToken    bool              `json:"fleet_token_set"`
	FleetTimeout  string            `json:"fleet_timeout,omitempty"`
	Routes        []RouteView       `json:"routes"`
	Links         []LinkView        `json:"links,omitempty"`
	Settings      map[string]string `json:"settings,omitempty"`
}

// RouteView is one route of a View.
type RouteView struct {
	Name           string            `json:"name"`
	Listen         string            `json:"listen"`
	Upstream       string            `json:"upstream"`
	Protocol       string            `json:"protocol"`
	Link           string            `json:"link,omitempty"`
	Pool           string            `json:"pool,omitempty"`
	Emulation      map[string]string `json:"emulation,omitempty"`
	DialTimeout    string            `json:"dial_timeout,omitempty"`
	StartupTimeout string            `json:"startup_timeout,omitempty"`
	ConnectTimeout string            `json:"connect_timeout,omitempty"`
	NotSentLowat   int               `json:"notsent_lowat,omitempty"`
	TLSCert        string            `json:"tls_cert,omitempty"` // file names, not their contents
	TLSKey         string            `json:"tls_key,omitempty"`
	UpstreamTLS    *UpstreamTLS      `json:"upstream_tls,omitempty"`
	KillUser       string            `json:"kill_user,omitempty"`
	KillPassword   bool              `json:"kill_password_set,omitempty"`
}

// LinkView is one link of a View.
type LinkView struct {
	Name    string            `json:"name"`
	Options map[string]string `json:"options,omitempty"`
}

// NewView describes c, in force since loadedAt after revision reloads.
func NewView(c *Config, loadedAt time.Time, revision int) View {
	v := View{
		File: c.Source, LoadedAt: loadedAt, Revision: revision,
		AdminListen: c.Admin.Listen, AdminPassword: c.Admin.Password != "",
		AdminUsers: slices.Sorted(maps.Keys(c.Admin.Users)), ForwardUsers: slices.Clone(c.Admin.ForwardUsers),
		HTTPListen: c.HTTP.Listen, HTTPToken: c.HTTP.Token != "",
		Catalog: c.Catalog, ShutdownGrace: c.Grace.String(), FastPath: fastPathMode(c.FastPath), Settings: maps.Clone(c.Settings),
		InstanceName: c.Fleet.Name, InstanceTTL: durationText(c.Fleet.TTL), FleetToken: c.Fleet.Token != "",
		FleetTimeout: durationText(c.Fleet.Timeout),
		Routes:       []RouteView{},
	}
	if e := c.Etcd; e != nil {
		v.EtcdCAFile, v.EtcdCertFile, v.EtcdKeyFile, v.EtcdUser, v.EtcdPassword = e.CAFile, e.CertFile, e.KeyFile, e.Username, e.Password != ""
	}
	for _, r := range c.Routes {
		rv := RouteView{
			Name: r.Name, Listen: r.Listen, Upstream: r.Upstream, Protocol: r.Protocol, Link: r.Link, Pool: r.Pool,
			Emulation: maps.Clone(r.Emulation), DialTimeout: durationText(r.DialTimeout),
			StartupTimeout: durationText(r.StartupTimeout), ConnectTimeout: durationText(r.ConnectTimeout),
			NotSentLowat: r.NotSentLowat, KillUser: r.KillUser, KillPassword: r.KillPassword != "",
		}
		if r.TLS != nil {
			rv.TLSCert, rv.TLSKey = r.TLS.Cert, r.TLS.Key
		}
		if r.UpstreamTLS != nil {
			u := *r.UpstreamTLS
			rv.UpstreamTLS = &u
		}
		v.Routes = append(v.Routes, rv)
	}
	for _, l := range c.Links {
		v.Links = append(v.Links, LinkView{Name: l.Name, Options: maps.Clone(l.Options)})
	}
	return v
}

// durationText is d as text, "" for 0 (the default).
func durationText(d time.Duration) string {
	if d == 0 {
		return ""
	}
	return d.String()
}

// Rows flattens v into (key, value) pairs for the admin console's SHOW
// CONFIG: file, loaded_at (RFC 3339, UTC), revision, the consoles, then
// each route's settings as routes.NAME.KEY, each link's options as
// links.NAME.KEY and each setting as settings.NAME; unset values are
// left out, maps are in key order.
func (v View) Rows() [][2]string {
	rows := [][2]string{
		{"file", v.File},
		{"loaded_at", v.LoadedAt.UTC().Format(time.RFC3339Nano)},
		{"revision", strconv.Itoa(v.Revision)},
	}
	add := func(k, val string) {
		if val != "" {
			rows = append(rows, [2]string{k, val})
		}
	}
	add("admin.listen", v.AdminListen)
	add("admin.password", setText(v.AdminPassword))
	for _, u := range v.AdminUsers {
		add("admin.users."+u, "(set)")
	}
	for i, u := range v.ForwardUsers {
		add(fmt.Sprintf("admin.forward_users[%d]", i), u)
	}
	add("http.listen", v.HTTPListen)
	add("http.token", setText(v.HTTPToken))
	add("catalog", v.Catalog)
	add("etcd_ca_file", v.EtcdCAFile)
	add("etcd_cert_file", v.EtcdCertFile)
	add("etcd_key_file", v.EtcdKeyFile)
	add("etcd_user", v.EtcdUser)
	add("etcd_password", setText(v.EtcdPassword))
	add("shutdown_grace", v.ShutdownGrace)
	add("fast_path", v.FastPath)
	add("instance_name", v.InstanceName)
	add("instance_ttl", v.InstanceTTL)
	if v.FleetToken {
		add("fleet_token", setText(true))
	}
	add("fleet_timeout", v.FleetTimeout)
	for _, r := range v.Routes {
		p := "routes." + r.Name + "."
		add(p+"listen", r.Listen)
		add(p+"upstream", r.Upstream)
		add(p+"protocol", r.Protocol)
		add(p+"link", r.Link)
		add(p+"pool", r.Pool)
		for _, k := range slices.Sorted(maps.Keys(r.Emulation)) {
			add(p+"emulation."+k, r.Emulation[k])
		}
		add(p+"dial_timeout", r.DialTimeout)
		add(p+"startup_timeout", r.StartupTimeout)
		add(p+"connect_timeout", r.ConnectTimeout)
		if r.NotSentLowat != 0 {
			add(p+"notsent_lowat", strconv.Itoa(r.NotSentLowat))
		}
		add(p+"tls.cert", r.TLSCert)
		add(p+"tls.key", r.TLSKey)
		if u := r.UpstreamTLS; u != nil {
			add(p+"upstream_tls", "on")
			add(p+"upstream_tls.ca", u.CA)
			add(p+"upstream_tls.server_name", u.ServerName)
			if u.InsecureSkipVerify {
				add(p+"upstream_tls.insecure_skip_verify", "true")
			}
		}
		add(p+"kill_user", r.KillUser)
		add(p+"kill_password", setText(r.KillPassword))
	}
	for _, l := range v.Links {
		for _, k := range slices.Sorted(maps.Keys(l.Options)) {
			add("links."+l.Name+"."+k, l.Options[k])
		}
	}
	for _, k := range slices.Sorted(maps.Keys(v.Settings)) {
		add("settings."+k, v.Settings[k])
	}
	return rows
}

// setText shows whether a secret is set without showing it.
func setText(set bool) string {
	if set {
		return "(set)"
	}
	return ""
}

// fastPathMode is fast_path with its default filled in.
func fastPathMode(v string) string {
	if v == "" {
		return "auto"
	}
	return v
}

// FastPathMode is the fast_path in force: auto (the default), kernel
// or off.
func (c *Config) FastPathMode() string { return fastPathMode(c.FastPath) }
