package config

import (
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
