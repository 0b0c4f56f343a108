package budget

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/sluicelab/sluice/internal/testenv"
)

func TestGrantCheck(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	const ttl = 5 * time.Second
	for _, c := range []struct {
		name string
		g    Grant
		ok   bool
	}{
		{"a fresh grant", Grant{Rate: 1e6, Version: 3, Expires: now.Add(ttl)}, true},
		{"rate 0", Grant{Rate: 0, Version: 1, Expires: now.Add(ttl)}, true},
		{"an expired grant (ignored later, not garbage)", Grant{Rate: 1, Version: 1, Expires: now.Add(-time.Hour)}, true},
		{"skewed by three TTLs", Grant{Rate: 1, Version: 1, Expires: now.Add(MaxAheadTTLs * ttl)}, true},
		{"a negative rate", Grant{Rate: -1, Version: 1, Expires: now.Add(ttl)}, false},
		{"expiring in a year", Grant{Rate: 1e6, Version: 1, Expires: now.AddDate(1, 0, 0)}, false},
		{"just past the bound", Grant{Rate: 1, Version: 1, Expires: now.Add(MaxAheadTTLs*ttl + time.Nanosecond)}, false},
	} {
		if err := c.g.Check(now, ttl); (err == nil) != c.ok {
			t.Errorf("%s: Check = %v, want ok %v", c.name, err, c.ok)
		}
	}
}

// TestBudgetRefusesGarbageGrants: a grant put under the instance's grant
// key by hand, with a negative rate or an expiry far ahead, is counted
// and never applied: the instance keeps the grant it had.
func TestBudgetRefusesGarbageGrants(t *testing.T) {
	cfg := etcdConfig(t)
	m := startMember(t, cfg, "a", testBudget)
	testenv.Eventually(t, 20*time.Second, "a's first grant", func() bool { return m.b.State().Grant.Version > 0 })
	ctx := context.Background()
	for i, g := range []Grant{
		{Rate: -5, Version: 1 << 40, Expires: time.Now().Add(time.Second)},
		{Rate: 1, Version: 1<<40 + 1, Expires: time.Now().Add(1000 * time.Hour)},
	} {
		v, _ := json.Marshal(g)
		if _, err := m.cli.Put(ctx, m.b.grantKey("a"), string(v)); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, 10*time.Second, "the garbage grant refused", func() bool { return m.b.Refused() >= uint64(i+1) })
		if got := m.b.State().Grant; got.Version == g.Version || got.Rate < 0 {
			t.Fatalf("garbage grant %+v applied: %+v", g, got)
		}
	}
}
