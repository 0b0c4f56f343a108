package config

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestParseGood(t *testing.T) {
	c, err := Parse("s.yaml", []byte(`
admin:
  listen: 127.0.0.1:6433
  password: secret
  forward_users: [dba, "Ops Admin"]
catalog: /tmp/cat.json
shutdown_grace: 3s
routes:
  - name: pg
    listen: 127.0.0.1:6432
    upstream: 127.0.0.1:5432
    protocol: postgres
    link: wan
    notsent_lowat: 64KiB
    startup_timeout: 5s
    emulation: {delay: 5ms}
  - listen: 127.0.0.1:3307
    upstream: 127.0.0.1:3306
    protocol: mysql
    kill_user: root
    startup_timeout: 2s
    connect_timeout: 500ms
links:
  - name: wan
    capacity: 100MB
    delay: 10ms
settings:
  low_priority_bandwidth: 64MB
`))
	if err != nil {
		t.Fatal(err)
	}
	if c.Grace != 3*time.Second || len(c.Routes) != 2 || c.Routes[0].NotSentLowat != 64<<10 || c.Routes[1].Name != "route2" {
		t.Fatalf("config = %+v", c)
	}
	if c.Links[0].Name != "wan" || c.Links[0].Options["capacity"] != "100MB" || c.Settings["low_priority_bandwidth"] != "64MB" {
		t.Fatalf("links = %+v settings = %v", c.Links, c.Settings)
	}
	if len(c.Admin.ForwardUsers) != 2 || c.Admin.ForwardUsers[0] != "dba" || c.Admin.ForwardUsers[1] != "Ops Admin" {
		t.Fatalf("forward_users = %q", c.Admin.ForwardUsers)
	}
	if r := c.Routes; r[0].StartupTimeout != 5*time.Second || r[0].ConnectTimeout != 0 ||
		r[1].StartupTimeout != 2*time.Second || r[1].ConnectTimeout != 500*time.Millisecond {
		t.Fatalf("timeouts %v %v, %v %v", r[0].StartupTimeout, r[0].ConnectTimeout, r[1].StartupTimeout, r[1].ConnectTimeout)
	}
	if c.Routes[0].Emulation["delay"] != "5ms" {
		t.Fatalf("emulation = %v", c.Routes[0].Emulation)
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		yaml string
		want []string // substrings of the error
	}{
		{"routes:\n  - listen: 127.0.0.1:1\n    upstream: 127.0.0.1:2\n    protocol: pgsql\n", []string{"s.yaml", "routes[0].protocol", `"pgsql"`}},
		{"routes:\n  - listen: nowhere\n    upstream: 127.0.0.1:2\n", []string{"routes[0].listen", `"nowhere"`}},
		{"routes:\n  - listen: 127.0.0.1:1\n    upstream: 127.0.0.1:2\n    dial_timeout: 5\n", []string{"routes[0].dial_timeout", `"5"`}},
		{"routes:\n  - listen: 127.0.0.1:1\n    upstream: 127.0.0.1:2\n    notsent_lowat: lots\n", []string{"routes[0].notsent_lowat", `"lots"`}},
		{"routes:\n  - listen: 127.0.0.1:1\n    upstream: 127.0.0.1:2\n    protocol: mysql\n    startup_timeout: -1s\n", []string{"routes[0].startup_timeout", `"-1s"`, "negative"}},
		{"routes:\n  - listen: 127.0.0.1:1\n    upstream: 127.0.0.1:2\n    protocol: mysql\n    connect_timeout: 10\n", []string{"routes[0].connect_timeout", `"10"`}},
		{"routes:\n  - listen: 127.0.0.1:1\n    upstream: 127.0.0.1:2\n    startup_timeout: 5s\n", []string{"routes[0].startup_timeout", `"5s"`, "tcp"}},
		{"routes:\n  - listen: 127.0.0.1:1\n    upstream: 127.0.0.1:2\n    protocol: postgres\n    connect_timeout: 5s\n", []string{"routes[0].connect_timeout", `"5s"`, "mysql routes only"}},
		{"routez: []\n", []string{"s.yaml", "routez"}},
		{"shutdown_grace: soon\n", []string{"shutdown_grace", `"soon"`}},
		{"routes:\n  - name: a\n    listen: 127.0.0.1:1\n    upstream: 127.0.0.1:2\n  - name: a\n    listen: 127.0.0.1:3\n    upstream: 127.0.0.1:2\n", []string{"routes[1].name", `"a"`, "duplicate"}},
		{"routes: [\n", []string{"s.yaml"}},
		{"routes:\n  - listen: 127.0.0.1:1\n    upstream: 127.0.0.1:2\n    protocol: tcp\n    kill_user: root\n", []string{"routes[0].kill_user"}},
		{"admin:\n  forward_users: [a, \"\"]\n", []string{"s.yaml", "admin.forward_users[1]", `""`}},
		{"admin:\n  forward_users: [a, a]\n", []string{"s.yaml", "admin.forward_users[1]", `"a"`, "duplicate"}},
		{"admin:\n  forward_users: [\"a\\tb\"]\n", []string{"admin.forward_users[0]", `"a\tb"`, "control"}},
		{"admin:\n  forward_users: dba\n", []string{"s.yaml", "line 2", "dba"}},
	}
	for _, tt := range tests {
		_, err := Parse("s.yaml", []byte(tt.yaml))
		if err == nil {
			t.Errorf("Parse(%q) succeeded", tt.yaml)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("Parse(%q) = %v; want it to mention %s", tt.yaml, err, w)
			}
		}
	}
}

func TestEmptyFile(t *testing.T) {
	c, err := Parse("e.yaml", nil)
	if err != nil || len(c.Routes) != 0 || c.Admin.ForwardUsers != nil {
		t.Fatalf("c=%+v err=%v", c, err)
	}
}

func TestUpstreamUnixSocket(t *testing.T) {
	for _, tc := range []struct {
		upstream string
		ok       bool
	}{
		{"/var/run/postgresql/.s.PGSQL.5432", true},
		{"127.0.0.1:5432", true},
		{"run/postgresql/.s.PGSQL.5432", false},
		{"localhost", false},
	} {
		r := Route{Name: "r", Listen: "127.0.0.1:6432", Upstream: tc.upstream, Protocol: "postgres"}
		err := ValidateRoute(&r)
		if (err == nil) != tc.ok {
			t.Errorf("upstream %q: err %v, want ok=%v", tc.upstream, err, tc.ok)
		}
		if err != nil && !strings.Contains(err.Error(), tc.upstream) {
			t.Errorf("upstream %q: error %q does not name the value", tc.upstream, err)
		}
	}
}

// TestClashes: what would fail only when bound, or be silently
// overridden, is refused up front with the file, the key and the value.
func TestClashes(t *testing.T) {
	const two = "routes:\n  - name: a\n    listen: %s\n    upstream: 127.0.0.1:5432\n  - name: b\n    listen: %s\n    upstream: 127.0.0.1:5432\n"
	route := func(listen string) string {
		return "routes:\n  - name: a\n    listen: " + listen + "\n    upstream: 127.0.0.1:5432\n"
	}
	tests := []struct {
		name  string
		yaml  string
		flags Flags
		want  string
	}{
		{"same listen twice", fmt.Sprintf(two, "127.0.0.1:6432", "127.0.0.1:6432"), Flags{},
			`config s.yaml: routes[1].listen: bad value "127.0.0.1:6432": address overlaps "127.0.0.1:6432" given at routes[0].listen in s.yaml`},
		{"0.0.0.0 covers loopback", fmt.Sprintf(two, "0.0.0.0:6432", "127.0.0.1:6432"), Flags{},
			`config s.yaml: routes[1].listen: bad value "127.0.0.1:6432": address overlaps "0.0.0.0:6432" given at routes[0].listen in s.yaml`},
		{"empty host covers loopback", fmt.Sprintf(two, "127.0.0.1:6432", ":6432"), Flags{},
			`config s.yaml: routes[1].listen: bad value ":6432": address overlaps "127.0.0.1:6432" given at routes[0].listen in s.yaml`},
		{":: covers IPv4", fmt.Sprintf(two, "'[::]:6432'", "10.0.0.1:6432"), Flags{},
			`config s.yaml: routes[1].listen: bad value "10.0.0.1:6432": address overlaps "[::]:6432" given at routes[0].listen in s.yaml`},
		{"localhost is loopback", fmt.Sprintf(two, "localhost:6432", "127.0.0.1:6432"), Flags{},
			`config s.yaml: routes[1].listen: bad value "127.0.0.1:6432": address overlaps "localhost:6432" given at routes[0].listen in s.yaml`},
		{"route on the admin address", route("127.0.0.1:6433") + "admin:\n  listen: 127.0.0.1:6433\n", Flags{},
			`config s.yaml: admin.listen: bad value "127.0.0.1:6433": address overlaps "127.0.0.1:6433" given at routes[0].listen in s.yaml`},
		{"route on the HTTP address", route("0.0.0.0:8080") + "http:\n  listen: 127.0.0.1:8080\n", Flags{},
			`config s.yaml: http.listen: bad value "127.0.0.1:8080": address overlaps "0.0.0.0:8080" given at routes[0].listen in s.yaml`},
		{"listen port 70000", route("127.0.0.1:70000"), Flags{},
			`config s.yaml: routes[0].listen: bad value "127.0.0.1:70000": port 70000 out of range (want a number from 0 to 65535)`},
		{"listen port -1", route("127.0.0.1:-1"), Flags{},
			`config s.yaml: routes[0].listen: bad value "127.0.0.1:-1": port -1 out of range (want a number from 0 to 65535)`},
		{"upstream port 0", "routes:\n  - listen: 127.0.0.1:1\n    upstream: 127.0.0.1:0\n", Flags{},
			`config s.yaml: routes[0].upstream: bad value "127.0.0.1:0": port 0 out of range (want a number from 1 to 65535)`},
		{"admin port", "admin:\n  listen: 127.0.0.1:65536\n", Flags{},
			`config s.yaml: admin.listen: bad value "127.0.0.1:65536": port 65536 out of range (want a number from 0 to 65535)`},
		{"duplicate route names", "routes:\n  - name: a\n    listen: 127.0.0.1:1\n    upstream: 127.0.0.1:2\n  - name: a\n    listen: 127.0.0.1:3\n    upstream: 127.0.0.1:2\n", Flags{},
			`config s.yaml: routes[1].name: bad value "a": duplicate route name, also given at routes[0].name in s.yaml`},
		{"duplicate link names", "links:\n  - name: wan\n    delay: 5ms\n  - name: lan\n  - name: wan\n    delay: 7ms\n", Flags{},
			`config s.yaml: links[2].name: bad value "wan": duplicate link name, also given at links[0].name`},
		{"unknown top-level key", "routez: []\n", Flags{},
			`config s.yaml: unknown key "routez" (line 1)`},
		{"unknown route key", route("127.0.0.1:1") + "  - listen: 127.0.0.1:2\n    upstream: 127.0.0.1:3\n    foo: 1\n", Flags{},
			`config s.yaml: routes[1]: unknown key "foo" (line 7)`},
		{"unknown nested key", route("127.0.0.1:1") + "    upstream_tls:\n      ca: x.pem\n      verify: full\n", Flags{},
			`config s.yaml: routes[0].upstream_tls: unknown key "verify" (line 7)`},
		{"unknown admin key", "admin:\n  listen: 127.0.0.1:1\n  passwd: x\n", Flags{},
			`config s.yaml: admin: unknown key "passwd" (line 3)`},
		{"--listen on a file route", route("127.0.0.1:6432"), Flags{Listen: "0.0.0.0:6432", Upstream: "127.0.0.1:1"},
			`command line: --listen: bad value "0.0.0.0:6432": address overlaps "127.0.0.1:6432" given at routes[0].listen in s.yaml`},
		{"--admin on a file route", route("127.0.0.1:6432"), Flags{Admin: "localhost:6432"},
			`command line: --admin: bad value "localhost:6432": address overlaps "127.0.0.1:6432" given at routes[0].listen in s.yaml`},
		{"--http on --listen", "", Flags{Listen: "127.0.0.1:6432", Upstream: "127.0.0.1:1", HTTP: "127.0.0.1:6432"},
			`command line: --http: bad value "127.0.0.1:6432": address overlaps "127.0.0.1:6432" given at --listen`},
		{"--admin on --http", "", Flags{Admin: ":7000", HTTP: "127.0.0.1:7000"},
			`command line: --http: bad value "127.0.0.1:7000": address overlaps ":7000" given at --admin`},
		{"--admin on file http", "http:\n  listen: 127.0.0.1:7000\n", Flags{Admin: "127.0.0.1:7000"},
			`config s.yaml: http.listen: bad value "127.0.0.1:7000": address overlaps "127.0.0.1:7000" given at --admin`},
		{"--listen port", "", Flags{Listen: "127.0.0.1:70000", Upstream: "127.0.0.1:1"},
			`command line: --listen: bad value "127.0.0.1:70000": port 70000 out of range (want a number from 0 to 65535)`},
		{"--admin port", "", Flags{Admin: "127.0.0.1:-1"},
			`command line: --admin: bad value "127.0.0.1:-1": port -1 out of range (want a number from 0 to 65535)`},
		{"flag route named like a file route", "routes:\n  - name: cli\n    listen: 127.0.0.1:1\n    upstream: 127.0.0.1:2\n", Flags{Listen: "127.0.0.1:3", Upstream: "127.0.0.1:2"},
			`config s.yaml: routes[0].name: bad value "cli": the route of --listen and --upstream has this name`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse("s.yaml", []byte(tt.yaml))
			if err == nil {
				err = c.ApplyFlags(tt.flags)
			}
			if err == nil || err.Error() != tt.want {
				t.Errorf("got  %v\nwant %s", err, tt.want)
			}
			if strings.Contains(fmt.Sprint(err), "config.") {
				t.Errorf("error %q names a Go type", err)
			}
		})
	}
}

// TestNoClash: addresses that can be bound together are accepted.
func TestNoClash(t *testing.T) {
	for _, pair := range [][2]string{
		{"127.0.0.1:6432", "127.0.0.1:6433"},
		{"127.0.0.1:6432", "127.0.0.2:6432"},
		{"127.0.0.1:0", "127.0.0.1:0"}, // each gets a free port
		{"0.0.0.0:6432", "'[::1]:6432'"},
		{"localhost:6432", "10.0.0.1:6432"},
	} {
		y := fmt.Sprintf("routes:\n  - listen: %s\n    upstream: 127.0.0.1:1\n  - listen: %s\n    upstream: 127.0.0.1:1\n", pair[0], pair[1])
		c, err := Parse("s.yaml", []byte(y))
		if err == nil {
			err = c.ApplyFlags(Flags{})
		}
		if err != nil {
			t.Errorf("%s and %s: %v", pair[0], pair[1], err)
		}
	}
}
