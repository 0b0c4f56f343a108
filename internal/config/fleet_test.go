package config

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestFleetKeys: the fleet's keys parse into Config.Fleet, --name wins
// over instance_name, bad values name their key, and the token is shown
// only as set.
func TestFleetKeys(t *testing.T) {
	c := mustParse(t, "instance_name: db1\ninstance_ttl: 5s\nfleet_token: fleetsecret\nfleet_timeout: 500ms\n"+baseRoutes)
	want := Fleet{Name: "db1", TTL: 5 * time.Second, Token: "fleetsecret", Timeout: 500 * time.Millisecond}
	if c.Fleet != want {
		t.Fatalf("Fleet = %+v, want %+v", c.Fleet, want)
	}
	if err := c.ApplyFlags(Flags{Name: "db2"}); err != nil || c.Fleet.Name != "db2" {
		t.Fatalf("--name db2: %v, name %q", err, c.Fleet.Name)
	}
	if err := c.ApplyFlags(Flags{Name: "a/b"}); err == nil || !strings.Contains(err.Error(), "--name") {
		t.Fatalf("--name a/b = %v, want an error naming --name", err)
	}
	v := NewView(c, time.Time{}, 0)
	b, _ := json.Marshal(v)
	rows := map[string]string{}
	for _, kv := range v.Rows() {
		rows[kv[0]] = kv[1]
	}
	if strings.Contains(string(b), "fleetsecret") || strings.Contains(strings.Join(flat(v.Rows()), " "), "fleetsecret") {
		t.Fatal("the view shows the fleet token")
	}
	for k, w := range map[string]string{"instance_name": "db2", "instance_ttl": "5s", "fleet_token": "(set)", "fleet_timeout": "500ms"} {
		if rows[k] != w {
			t.Errorf("row %s = %q, want %q", k, rows[k], w)
		}
	}

	for _, tt := range []struct{ yaml, key string }{
		{"instance_name: \"a/b\"\n", "instance_name"},
		{"instance_ttl: 1s\n", "instance_ttl"},
		{"instance_ttl: soon\n", "instance_ttl"},
		{"fleet_timeout: 0s\n", "fleet_timeout"},
	} {
		_, err := Parse("s.yaml", []byte(tt.yaml+baseRoutes))
		var e *Error
		if !errors.As(err, &e) || e.Key != tt.key {
			t.Errorf("Parse(%q) = %v, want an error at %s", tt.yaml, err, tt.key)
		}
	}

	next := mustParse(t, "instance_name: db1\ninstance_ttl: 5s\nfleet_token: othersecret\nfleet_timeout: 500ms\n"+baseRoutes)
	cur := mustParse(t, "instance_name: db1\ninstance_ttl: 5s\nfleet_token: fleetsecret\nfleet_timeout: 500ms\n"+baseRoutes)
	err := CheckReload(cur, next)
	if err == nil || !strings.Contains(err.Error(), "fleet_token cannot change on reload") || strings.Contains(err.Error(), "othersecret") {
		t.Fatalf("reload changing fleet_token = %v", err)
	}
}

func flat(rows [][2]string) []string {
	var out []string
	for _, kv := range rows {
		out = append(out, kv[0], kv[1])
	}
	return out
}
