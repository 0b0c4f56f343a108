package config

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

func mustParse(t *testing.T, body string) *Config {
	t.Helper()
	c, err := Parse("s.yaml", []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

const (
	routeA = `  - name: a
    listen: 127.0.0.1:7001
    upstream: 127.0.0.1:5432
    protocol: postgres
`
	routeB = `  - name: b
    listen: 127.0.0.1:7002
    upstream: 127.0.0.1:3306
    protocol: mysql
    emulation: {delay: 1ms}
`
	baseRoutes = "routes:\n" + routeA + routeB
)

func TestCompare(t *testing.T) {
	cur := mustParse(t, baseRoutes)
	tests := []struct {
		name string
		next string
		want Changes
	}{
		{"same", baseRoutes, Changes{Unchanged: []string{"a", "b"}}},
		{"reordered", "routes:\n" + routeB + routeA, Changes{Unchanged: []string{"b", "a"}}},
		{"added and removed", "routes:\n" + routeA + `  - name: c
    listen: 127.0.0.1:7003
    upstream: 127.0.0.1:5432
    protocol: postgres
`, Changes{Added: []string{"c"}, Removed: []string{"b"}, Unchanged: []string{"a"}}},
		{"emulation, pool and listen", `routes:
  - name: a
    listen: 127.0.0.1:7009
    upstream: 127.0.0.1:5432
    protocol: postgres
  - name: b
    listen: 127.0.0.1:7002
    upstream: 127.0.0.1:3306
    protocol: mysql
    pool: p
    emulation: {delay: 2ms}
`, Changes{Changed: []string{"a", "b"}, Relisten: []string{"a"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Compare(cur, mustParse(t, tt.next))
			eq := func(a, b []string) bool { return slices.Equal(a, b) || len(a)+len(b) == 0 }
			if !eq(got.Added, tt.want.Added) || !eq(got.Removed, tt.want.Removed) || !eq(got.Changed, tt.want.Changed) ||
				!eq(got.Relisten, tt.want.Relisten) || !eq(got.Unchanged, tt.want.Unchanged) {
				t.Fatalf("Compare = %+v, want %+v", got, tt.want)
			}
			if got.Empty() != (len(tt.want.Added)+len(tt.want.Removed)+len(tt.want.Changed) == 0) {
				t.Fatalf("Empty() = %v for %+v", got.Empty(), got)
			}
		})
	}
}

func TestCheckReload(t *testing.T) {
	cur := mustParse(t, "admin:\n  listen: 127.0.0.1:6433\n  password: old\nhttp:\n  listen: 127.0.0.1:8474\n  token: t1\ncatalog: /tmp/c.json\n"+baseRoutes)
	tests := []struct {
		name, head, key string
	}{
		{"unchanged", "admin:\n  listen: 127.0.0.1:6433\n  password: old\nhttp:\n  listen: 127.0.0.1:8474\n  token: t1\ncatalog: /tmp/c.json\n", ""},
		{"admin listen", "admin:\n  listen: 127.0.0.1:6434\n  password: old\nhttp:\n  listen: 127.0.0.1:8474\n  token: t1\ncatalog: /tmp/c.json\n", "admin.listen"},
		{"admin password", "admin:\n  listen: 127.0.0.1:6433\n  password: new\nhttp:\n  listen: 127.0.0.1:8474\n  token: t1\ncatalog: /tmp/c.json\n", "admin.password"},
		{"http listen", "admin:\n  listen: 127.0.0.1:6433\n  password: old\nhttp:\n  listen: 127.0.0.1:8475\n  token: t1\ncatalog: /tmp/c.json\n", "http.listen"},
		{"http token", "admin:\n  listen: 127.0.0.1:6433\n  password: old\nhttp:\n  listen: 127.0.0.1:8474\n  token: t2\ncatalog: /tmp/c.json\n", "http.token"},
		{"catalog", "admin:\n  listen: 127.0.0.1:6433\n  password: old\nhttp:\n  listen: 127.0.0.1:8474\n  token: t1\ncatalog: /tmp/d.json\n", "catalog"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckReload(cur, mustParse(t, tt.head+baseRoutes))
			if tt.key == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var e *Error
			if !errors.As(err, &e) || e.Key != tt.key || e.File != "s.yaml" || !strings.Contains(err.Error(), tt.key+" cannot change on reload; restart") {
				t.Fatalf("CheckReload = %v, want an error naming %s", err, tt.key)
			}
			if strings.Contains(err.Error(), "new") || strings.Contains(err.Error(), "t2") {
				t.Fatalf("error shows a secret: %v", err)
			}
		})
	}
}

// TestViewOmitsSecrets: what SHOW CONFIG and GET /api/config show
// names every route setting and no password, token or kill password.
func TestViewOmitsSecrets(t *testing.T) {
	c := mustParse(t, `admin:
  listen: 127.0.0.1:6433
  password: adminsecret
  users: {ops: opssecret}
http:
  listen: 127.0.0.1:8474
  token: tokensecret
shutdown_grace: 3s
routes:
  - name: my
    listen: 127.0.0.1:7002
    upstream: 127.0.0.1:3306
    protocol: mysql
    pool: rp1
    kill_user: root
    kill_password: killsecret
    emulation: {delay: 1ms}
    connect_timeout: 2s
`)
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	v := NewView(c, at, 4)
	rows := map[string]string{}
	for _, kv := range v.Rows() {
		rows[kv[0]] = kv[1]
		for _, secret := range []string{"adminsecret", "opssecret", "tokensecret", "killsecret"} {
			if strings.Contains(kv[0]+kv[1], secret) {
				t.Errorf("row %q = %q shows a secret", kv[0], kv[1])
			}
		}
	}
	want := map[string]string{
		"file": "s.yaml", "revision": "4", "loaded_at": "2026-01-02T03:04:05Z", "shutdown_grace": "3s",
		"admin.password": "(set)", "admin.users.ops": "(set)", "http.token": "(set)",
		"routes.my.pool": "rp1", "routes.my.emulation.delay": "1ms", "routes.my.connect_timeout": "2s",
		"routes.my.kill_user": "root", "routes.my.kill_password": "(set)", "routes.my.protocol": "mysql",
	}
	for k, w := range want {
		if rows[k] != w {
			t.Errorf("row %s = %q, want %q", k, rows[k], w)
		}
	}
}

func TestPoolKey(t *testing.T) {
	c := mustParse(t, "routes:\n  - listen: 127.0.0.1:7001\n    upstream: 127.0.0.1:5432\n    protocol: postgres\n    pool: reporting\n")
	if c.Routes[0].Pool != "reporting" {
		t.Fatalf("pool = %q", c.Routes[0].Pool)
	}
}

func TestTLSFlags(t *testing.T) {
	tests := []struct {
		name    string
		fl      Flags
		wantKey string // "" for no error
		check   func(*Route) bool
	}{
		{"cert and key", Flags{Listen: "127.0.0.1:7001", Upstream: "127.0.0.1:5432", Protocol: "postgres", TLSCert: "c.pem", TLSKey: "k.pem"}, "",
			func(r *Route) bool {
				return r.TLS != nil && r.TLS.Cert == "c.pem" && r.TLS.Key == "k.pem" && r.UpstreamTLS == nil
			}},
		{"upstream verify-full", Flags{Listen: "127.0.0.1:7001", Upstream: "db:5432", Protocol: "postgres", UpstreamTLS: true}, "",
			func(r *Route) bool {
				return r.UpstreamTLS != nil && r.UpstreamTLS.CA == "" && !r.UpstreamTLS.InsecureSkipVerify
			}},
		{"upstream CA implies TLS", Flags{Listen: "127.0.0.1:7001", Upstream: "db:5432", Protocol: "mysql", UpstreamTLSCA: "ca.pem"}, "",
			func(r *Route) bool { return r.UpstreamTLS != nil && r.UpstreamTLS.CA == "ca.pem" }},
		{"insecure implies TLS", Flags{Listen: "127.0.0.1:7001", Upstream: "db:5432", Protocol: "postgres", UpstreamTLSInsecure: true}, "",
			func(r *Route) bool { return r.UpstreamTLS != nil && r.UpstreamTLS.InsecureSkipVerify }},
		{"cert without key", Flags{Listen: "127.0.0.1:7001", Upstream: "127.0.0.1:5432", Protocol: "postgres", TLSCert: "c.pem"}, "--tls-key", nil},
		{"key without cert", Flags{Listen: "127.0.0.1:7001", Upstream: "127.0.0.1:5432", Protocol: "postgres", TLSKey: "k.pem"}, "--tls-cert", nil},
		{"CA and insecure", Flags{Listen: "127.0.0.1:7001", Upstream: "db:5432", Protocol: "postgres", UpstreamTLSCA: "ca.pem", UpstreamTLSInsecure: true}, "--upstream-tls-insecure", nil},
		{"tcp route", Flags{Listen: "127.0.0.1:7001", Upstream: "db:5432", Protocol: "tcp", UpstreamTLS: true}, "--upstream-tls", nil},
		{"tcp route cert", Flags{Listen: "127.0.0.1:7001", Upstream: "db:5432", Protocol: "tcp", TLSCert: "c", TLSKey: "k"}, "--tls-cert", nil},
		{"no route", Flags{Admin: "127.0.0.1:6433", UpstreamTLS: true}, "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &Config{}
			err := c.ApplyFlags(tt.fl)
			if tt.check == nil {
				var e *Error
				if !errors.As(err, &e) || e.File != "" || e.Key != tt.wantKey {
					t.Fatalf("ApplyFlags = %v (key %q), want an error at %q", err, keyOf(err), tt.wantKey)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !tt.check(&c.Routes[0]) {
				t.Fatalf("route = %+v", c.Routes[0])
			}
		})
	}
}

func keyOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Key
	}
	return ""
}
