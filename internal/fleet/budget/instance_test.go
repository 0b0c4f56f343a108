package budget

import (
	"maps"
	"testing"
	"time"
)

func TestEffective(t *testing.T) {
	t0 := time.Unix(1000, 0)
	g := Grant{Rate: 12, Version: 3, Expires: t0.Add(5 * time.Second)}
	for _, tt := range []struct {
		step   string
		at     time.Duration
		g      Grant
		budget int64
		live   int
		rate   int64
		mode   string
	}{
		{"no grant yet", 0, Grant{}, 30, 3, 0, ModeWaiting},
		{"valid grant", 0, g, 30, 3, 12, ModeGrant},
		{"last moment", 5*time.Second - 1, g, 30, 3, 12, ModeGrant},
		{"budget lowered under the grant", 0, g, 10, 3, 10, ModeGrant},
		{"expired: equal share", 5 * time.Second, g, 30, 3, 10, ModeFallback},
		{"expired, alone", 6 * time.Second, g, 30, 0, 30, ModeFallback},
		{"off", 0, g, 0, 3, 0, ModeOff},
	} {
		rate, mode := Effective(t0.Add(tt.at), tt.g, tt.budget, tt.live)
		if rate != tt.rate || mode != tt.mode {
			t.Errorf("%s: Effective = %d %s, want %d %s", tt.step, rate, mode, tt.rate, tt.mode)
		}
	}
}

func TestCaps(t *testing.T) {
	for _, tt := range []struct {
		step  string
		mode  string
		rate  int64
		wants []int64
		want  map[string]int64
	}{
		{"off", ModeOff, 0, []int64{5, 5}, nil},
		{"by want", ModeGrant, 30, []int64{30, 5}, map[string]int64{"a": 25, "b": 5}},
		{"idle links share", ModeGrant, 30, []int64{0, 0}, map[string]int64{"a": 15, "b": 15}},
		{"nothing granted", ModeWaiting, 0, []int64{10, 0}, map[string]int64{"a": MinRate, "b": MinRate}},
	} {
		got := Caps(tt.mode, tt.rate, []string{"a", "b"}, tt.wants)
		if !maps.Equal(got, tt.want) || (tt.want == nil) != (got == nil) {
			t.Errorf("%s: Caps = %v, want %v", tt.step, got, tt.want)
		}
	}
}
