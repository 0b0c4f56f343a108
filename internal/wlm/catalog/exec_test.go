package catalog

import (
	"testing"

	"github.com/sluicelab/sluice/internal/wlm/ddl"
)

func exec(t *testing.T, c *Catalog, sql string) error {
	t.Helper()
	st, err := ddl.ParseOne(sql)
	if err != nil {
		t.Fatal(err)
	}
	switch s := st.(type) {
	case *ddl.Create:
		_, err = Create(c, s)
	case *ddl.Alter:
		err = Alter(c, s)
	default:
		t.Fatalf("%s: %T", sql, st)
	}
	return err
}

// TestAlterUnboundUser: ALTER USER ... RESOURCE POOL binds a user that
// has no binding, as GaussDB moves a user out of the default pool; the
// binding of a bound user keeps what the statement does not change.
func TestAlterUnboundUser(t *testing.T) {
	c := New()
	for _, sql := range []string{"CREATE RESOURCE POOL p1", "CREATE RESOURCE POOL p2"} {
		if err := exec(t, c, sql); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		sql      string
		user     string
		wantPool string
		wantErr  bool
	}{
		{"ALTER USER newbie RESOURCE POOL 'p1'", "newbie", "p1", false},
		{"ALTER USER newbie PASSWORD 'secret'", "newbie", "p1", false},
		{"ALTER USER newbie RESOURCE POOL 'p2'", "newbie", "p2", false},
		{"ALTER USER other RESOURCE POOL 'missing'", "other", "", true},
		{"ALTER USER other PASSWORD 'x'", "other", "", true},
		{"ALTER USER third RESOURCE POOL 'default_pool'", "third", "", false},
	}
	for _, tt := range tests {
		err := exec(t, c, tt.sql)
		if (err != nil) != tt.wantErr {
			t.Errorf("%s: error %v, want error %v", tt.sql, err, tt.wantErr)
		}
		u := c.Users[tt.user]
		switch {
		case tt.wantErr && u != nil:
			t.Errorf("%s: failed but bound %s to %q", tt.sql, tt.user, u.Pool)
		case !tt.wantErr && u == nil:
			t.Errorf("%s: %s is not bound", tt.sql, tt.user)
		case !tt.wantErr && u.Pool != tt.wantPool:
			t.Errorf("%s: %s in pool %q, want %q", tt.sql, tt.user, u.Pool, tt.wantPool)
		}
	}
}
