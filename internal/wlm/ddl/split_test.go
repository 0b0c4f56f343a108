package ddl

import (
	"strings"
	"testing"
)

func TestSplitUserPool(t *testing.T) {
	tests := []struct {
		d     Dialect
		sql   string
		alter bool
		user  string
		pool  Value
		rest  string
	}{
		// The reference statement, and the shapes around it.
		{PostgreSQL, "CREATE USER user1 RESOURCE POOL 'rp1' PASSWORD 'xxxxxxxx';", false, "user1",
			Value{String, "rp1", 33}, "CREATE USER user1 PASSWORD 'xxxxxxxx';"},
		{PostgreSQL, "create user User1 resource pool 'rp1' password 'x'", false, "user1",
			Value{String, "rp1", 33}, "create user User1 password 'x'"},
		{PostgreSQL, "CREATE USER u PASSWORD 'x' RESOURCE POOL 'p';", false, "u",
			Value{String, "p", 42}, "CREATE USER u PASSWORD 'x';"},
		{PostgreSQL, "CREATE USER u PASSWORD 'x' RESOURCE POOL 'p'", false, "u",
			Value{String, "p", 42}, "CREATE USER u PASSWORD 'x'"},
		{PostgreSQL, "CREATE USER u RESOURCE POOL 'p'", false, "u",
			Value{String, "p", 29}, "CREATE USER u"},
		{PostgreSQL, "ALTER USER u RESOURCE POOL 'p'", true, "u",
			Value{String, "p", 28}, "ALTER USER u"},
		{PostgreSQL, "ALTER USER u WITH RESOURCE POOL p2 LOGIN", true, "u",
			Value{Word, "p2", 33}, "ALTER USER u WITH LOGIN"},
		{PostgreSQL, "ALTER USER u RESOURCE POOL DEFAULT", true, "u",
			Value{Default, "default", 28}, "ALTER USER u"},
		{PostgreSQL, `ALTER USER "Mixed Case" RESOURCE POOL "P1" CONNECTION LIMIT 3`, true, "Mixed Case",
			Value{String, "P1", 39}, `ALTER USER "Mixed Case" CONNECTION LIMIT 3`},
		// Options sluice does not know are kept byte for byte, comments too.
		{PostgreSQL, "CREATE USER u WITH LOGIN /* keep */ RESOURCE POOL 'p' VALID UNTIL 'infinity' IN ROLE a, b -- end", false, "u",
			Value{String, "p", 51}, "CREATE USER u WITH LOGIN /* keep */ VALID UNTIL 'infinity' IN ROLE a, b -- end"},
		{PostgreSQL, "CREATE USER u PASSWORD $$it's; RESOURCE$$ RESOURCE POOL 'p'", false, "u",
			Value{String, "p", 57}, "CREATE USER u PASSWORD $$it's; RESOURCE$$"},
		{PostgreSQL, "CREATE USER u PASSWORD E'a\\'b' RESOURCE POOL 'p'", false, "u",
			Value{String, "p", 46}, "CREATE USER u PASSWORD E'a\\'b'"},
		{PostgreSQL, "CREATE USER u RESOURCE POOL 'p'PASSWORD 'x'", false, "u",
			Value{String, "p", 29}, "CREATE USER u PASSWORD 'x'"},
		{PostgreSQL, "CREATE USER u/**/RESOURCE POOL 'p'/**/PASSWORD 'x'", false, "u",
			Value{String, "p", 32}, "CREATE USER u/**/ /**/PASSWORD 'x'"},
		{PostgreSQL, "CREATE USER u RESOURCE POOL $x$p$x$", false, "u",
			Value{String, "p", 29}, "CREATE USER u"},
		{PostgreSQL, "CREATE USER ü RESOURCE POOL 'é'", false, "ü",
			Value{String, "é", 29}, "CREATE USER ü"},
		{PostgreSQL, "CREATE USER u RESOURCE POOL 'it''s'", false, "u",
			Value{String, "it's", 29}, "CREATE USER u"},

		// MySQL: PASSWORD becomes IDENTIFIED BY, user@host binds the user.
		{MySQL, "CREATE USER user1 RESOURCE POOL 'rp1' PASSWORD 'xxxxxxxx';", false, "user1",
			Value{String, "rp1", 33}, "CREATE USER user1 IDENTIFIED BY 'xxxxxxxx';"},
		{MySQL, "CREATE USER 'U1'@'%' PASSWORD 'x' RESOURCE POOL \"p\"", false, "U1",
			Value{String, "p", 49}, "CREATE USER 'U1'@'%' IDENTIFIED BY 'x'"},
		{MySQL, "CREATE USER IF NOT EXISTS `u`@localhost RESOURCE POOL p IDENTIFIED BY 'x'", false, "u",
			Value{Word, "p", 55}, "CREATE USER IF NOT EXISTS `u`@localhost IDENTIFIED BY 'x'"},
		{MySQL, "CREATE OR REPLACE USER u@10.0.0.1 RESOURCE POOL 'p' ENCRYPTED PASSWORD 'x'", false, "u",
			Value{String, "p", 49}, "CREATE OR REPLACE USER u@10.0.0.1 IDENTIFIED BY 'x'"},
		{MySQL, "ALTER USER IF EXISTS u RESOURCE POOL 'p'", true, "u",
			Value{String, "p", 38}, "ALTER USER IF EXISTS u"},
		{MySQL, "ALTER USER u IDENTIFIED BY PASSWORD '*ABC' RESOURCE POOL 'p' PASSWORD EXPIRE", true, "u",
			Value{String, "p", 58}, "ALTER USER u IDENTIFIED BY PASSWORD '*ABC' PASSWORD EXPIRE"},
		{MySQL, "CREATE USER u WITH RESOURCE POOL 'p' PASSWORD 'x'", false, "u",
			Value{String, "p", 34}, "CREATE USER u IDENTIFIED BY 'x'"},
		{MySQL, "CREATE USER u PASSWORD 'x' WITH RESOURCE POOL 'p' MAX_USER_CONNECTIONS 2", false, "u",
			Value{String, "p", 47}, "CREATE USER u IDENTIFIED BY 'x' WITH MAX_USER_CONNECTIONS 2"},
		{MySQL, "CREATE USER u IDENTIFIED VIA ed25519 USING PASSWORD('x') RESOURCE POOL 'p' # c", false, "u",
			Value{String, "p", 72}, "CREATE USER u IDENTIFIED VIA ed25519 USING PASSWORD('x') # c"},
		{MySQL, "CREATE USER u PASSWORD 'a\\'b' RESOURCE POOL 'p'", false, "u",
			Value{String, "p", 45}, "CREATE USER u IDENTIFIED BY 'a\\'b'"},
		// A pool named ENCRYPTED or BY is no part of a PASSWORD after it.
		{MySQL, "CREATE USER u RESOURCE POOL encrypted PASSWORD 'x'", false, "u",
			Value{Word, "encrypted", 29}, "CREATE USER u IDENTIFIED BY 'x'"},
		{MySQL, "CREATE USER u RESOURCE POOL by PASSWORD 'x'", false, "u",
			Value{Word, "by", 29}, "CREATE USER u IDENTIFIED BY 'x'"},
		// Each dialect's own comments and names: MySQL comments do not
		// nest, $ starts a name, `quotes` a pool.
		{MySQL, "CREATE USER $u /* a /* b */ RESOURCE POOL `p` -- c", false, "$u",
			Value{String, "p", 43}, "CREATE USER $u /* a /* b */ -- c"},
		{PostgreSQL, "CREATE USER u /* a /* b */ c */ RESOURCE POOL 'p' --c", false, "u",
			Value{String, "p", 47}, "CREATE USER u /* a /* b */ c */ --c"},
	}
	for _, tt := range tests {
		got, ok := SplitUserPool(tt.sql, tt.d)
		if !ok {
			t.Errorf("SplitUserPool(%q, %s) = not a user statement", tt.sql, tt.d)
			continue
		}
		want := UserPool{Alter: tt.alter, User: tt.user, Pool: tt.pool, Rest: tt.rest}
		if got != want {
			t.Errorf("SplitUserPool(%q, %s)\n got %+v\nwant %+v", tt.sql, tt.d, got, want)
		}
		if _, again := SplitUserPool(got.Rest, tt.d); again {
			t.Errorf("SplitUserPool(%q, %s): the rest %q splits again", tt.sql, tt.d, got.Rest)
		}
	}
}

func TestSplitUserPoolNotMine(t *testing.T) {
	tests := []struct {
		d   Dialect
		sql string
	}{
		{PostgreSQL, ""},
		{PostgreSQL, "SELECT 1"},
		{PostgreSQL, "CREATE USER u PASSWORD 'x'"},
		{PostgreSQL, "CREATE ROLE u RESOURCE POOL 'p'"},
		{PostgreSQL, "CREATE TABLE resource (pool text)"},
		{PostgreSQL, "CREATE USER u RESOURCE POOL 'p'; SELECT 1"},
		{PostgreSQL, "SELECT 1; CREATE USER u RESOURCE POOL 'p'"},
		{PostgreSQL, "CREATE USER u RESOURCE POOL 'p' RESOURCE POOL 'q'"},
		{PostgreSQL, "CREATE USER u IN ROLE pool RESOURCE POOL 'p'"},
		{PostgreSQL, "CREATE USER u RESOURCE POOL"},
		{PostgreSQL, "CREATE USER u RESOURCE 'p'"},
		{PostgreSQL, "CREATE USER u RESOURCE POOL E'p'"},
		{PostgreSQL, "CREATE USER u RESOURCE POOL U&'p'"},
		{PostgreSQL, "CREATE USER u RESOURCE POOL N'p'"},
		{PostgreSQL, "CREATE USER u RESOURCE POOL 'p' 'q'"},
		{PostgreSQL, "CREATE USER u RESOURCE POOL 'p' (1)"},
		{PostgreSQL, "CREATE USER u RESOURCE POOL 1"},
		{PostgreSQL, "CREATE USER u PASSWORD 'x RESOURCE POOL 'p'"},
		{PostgreSQL, "CREATE USER u PASSWORD $$ RESOURCE POOL 'p' $$"},
		{PostgreSQL, "CREATE USER u PASSWORD $a$ RESOURCE POOL 'p' $b$"},
		{PostgreSQL, "CREATE USER u /* RESOURCE POOL 'p' */"},
		{PostgreSQL, "CREATE USER u /* /* */ RESOURCE POOL 'p'"},
		{PostgreSQL, "CREATE USER u -- RESOURCE POOL 'p'"},
		{PostgreSQL, `CREATE USER u PASSWORD "RESOURCE POOL 'p'"`},
		{PostgreSQL, "CREATE USER CURRENT_USER RESOURCE POOL 'p'"},
		{PostgreSQL, "CREATE USER resource POOL 'p'"},
		{PostgreSQL, "CREATE USER 'u' RESOURCE POOL 'p'"},
		{PostgreSQL, `CREATE USER "" RESOURCE POOL 'p'`},
		{PostgreSQL, "ALTER USER u SET search_path TO resource POOL 'p'"},
		{PostgreSQL, "ALTER USER u RENAME TO v RESOURCE POOL 'p'"},
		{PostgreSQL, "ALTER USER u IN DATABASE d RESOURCE POOL 'p'"},
		{PostgreSQL, "ALTER USER"},
		{PostgreSQL, "CREATE USER $u RESOURCE POOL 'p'"},
		{PostgreSQL, `CREATE USER u RESOURCE POOL U&"p"`},
		{MySQL, "CREATE USER a, b RESOURCE POOL 'p'"},
		{MySQL, "CREATE USER u RESOURCE POOL 'p' /*! , v */"},
		{MySQL, "CREATE USER u /*M! RESOURCE POOL 'p' */"},
		{MySQL, "CREATE USER u RESOURCE POOL 'p\\''"},
		{MySQL, "CREATE USER u RESOURCE POOL _utf8mb4'p'"},
		{MySQL, "CREATE USER u@ RESOURCE POOL 'p'"},
		{MySQL, "CREATE USER CURRENT_USER RESOURCE POOL 'p'"},
		{MySQL, "CREATE USER u PASSWORD 'x\\' RESOURCE POOL 'p'"},
		{MySQL, "CREATE USER u # RESOURCE POOL 'p'"},
		{MySQL, "CREATE USER IF EXISTS u RESOURCE POOL 'p'"},
		{MySQL, "CREATE OR USER u RESOURCE POOL 'p'"},
		{MySQL, "CREATE USER ''@'%' RESOURCE POOL 'p'"},
		{MySQL, "CREATE USER u RESOURCE POOL 'p' --c"},
		{MySQL, "CREATE USER `` RESOURCE POOL 'p'"},
		{MySQL, `CREATE USER u RESOURCE POOL "p\""`},
		{Dialect(0), "CREATE USER u RESOURCE POOL 'p'"},
	}
	for _, tt := range tests {
		if got, ok := SplitUserPool(tt.sql, tt.d); ok {
			t.Errorf("SplitUserPool(%q, %s) = %+v, want not a user statement", tt.sql, tt.d, got)
		}
	}
}

func TestPostgresNameLength(t *testing.T) {
	long := "CREATE USER " + strings.Repeat("a", 62) + "éé RESOURCE POOL 'p'"
	got, ok := SplitUserPool(long, PostgreSQL)
	if !ok {
		t.Fatal("not split")
	}
	if len(got.User) != 62 { // 62 a's: the é that would straddle byte 63 is dropped whole
		t.Fatalf("user %q has %d bytes, want 62", got.User, len(got.User))
	}
}

func BenchmarkSplitUserPool(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := SplitUserPool("CREATE USER user1 RESOURCE POOL 'rp1' PASSWORD 'xxxxxxxx'", PostgreSQL); !ok {
			b.Fatal("not split")
		}
	}
}

func BenchmarkSplitUserPoolNotMine(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := SplitUserPool("SELECT c FROM sbtest1 WHERE id = 4711", PostgreSQL); ok {
			b.Fatal("split")
		}
	}
}
