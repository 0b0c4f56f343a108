package redact_test

import (
	"strings"
	"testing"

	"github.com/sluicelab/sluice/internal/redact"
)

const (
	pg = redact.PostgreSQL
	my = redact.MySQL
)

func TestSQL(t *testing.T) {
	cases := []struct {
		d       redact.Dialect
		in, out string
	}{
		// PostgreSQL.
		{pg, `ALTER ROLE bob PASSWORD 'pw-1'`, `ALTER ROLE bob PASSWORD '***'`},
		{pg, `create user bob password 'pw-1' valid until '2030-01-01'`, `create user bob password '***' valid until '2030-01-01'`},
		{pg, `CREATE ROLE bob WITH LOGIN ENCRYPTED PASSWORD 'md5abc' IN ROLE r`, `CREATE ROLE bob WITH LOGIN ENCRYPTED PASSWORD '***' IN ROLE r`},
		{pg, `ALTER USER "bob" PASSWORD 'SCRAM-SHA-256$4096:c2FsdA==$c3RvcmVk:c2VydmVy'`, `ALTER USER "bob" PASSWORD '***'`},
		{pg, `ALTER ROLE bob PASSWORD 'it''s'`, `ALTER ROLE bob PASSWORD '***'`},
		{pg, `ALTER ROLE bob PASSWORD E'a\'b\\'`, `ALTER ROLE bob PASSWORD '***'`},
		{pg, `ALTER ROLE bob PASSWORD e'x'`, `ALTER ROLE bob PASSWORD '***'`},
		{pg, `ALTER ROLE bob PASSWORD $$pw$$`, `ALTER ROLE bob PASSWORD '***'`},
		{pg, `ALTER ROLE bob PASSWORD $q$p$$w$q$ LOGIN`, `ALTER ROLE bob PASSWORD '***' LOGIN`},
		{pg, `ALTER ROLE bob PASSWORD U&'p\0077'`, `ALTER ROLE bob PASSWORD '***'`},
		{pg, "ALTER ROLE bob PASSWORD /* the new one */ 'pw' -- done\n", "ALTER ROLE bob PASSWORD /* the new one */ '***' -- done\n"},
		{pg, "ALTER ROLE bob PASSWORD /* nested /* */ 'no' */ 'pw'", "ALTER ROLE bob PASSWORD /* nested /* */ 'no' */ '***'"},
		{pg, `ALTER ROLE bob PASSWORD NULL`, `ALTER ROLE bob PASSWORD NULL`},
		{pg, `ALTER ROLE bob PASSWORD "typo"`, `ALTER ROLE bob PASSWORD '***'`},
		{pg, `CREATE USER MAPPING FOR bob SERVER s OPTIONS (user 'bob', password 'pw')`, `CREATE USER MAPPING FOR bob SERVER s OPTIONS (user 'bob', password '***')`},
		{pg, `SELECT 'password', "password" FROM t`, `SELECT 'password', "password" FROM t`},
		{pg, `SELECT 1; ALTER ROLE a PASSWORD 'x'; ALTER ROLE b PASSWORD 'y'`, `SELECT 1; ALTER ROLE a PASSWORD '***'; ALTER ROLE b PASSWORD '***'`},
		// SQL inside strings: EXECUTE's argument, a DO block's body,
		// PREPARE ... FROM, format() with the password as an argument.
		{pg, `SELECT 'ALTER ROLE a PASSWORD ''x'''`, `SELECT 'ALTER ROLE a PASSWORD ''***'''`},
		{pg, `SELECT $$ PASSWORD 'x' $$`, `SELECT $$ PASSWORD '***' $$`},
		{pg, `DO $$BEGIN EXECUTE 'CREATE USER u PASSWORD ''secret'''; END$$`, `DO $$BEGIN EXECUTE 'CREATE USER u PASSWORD ''***'''; END$$`},
		{pg, `DO $body$ BEGIN EXECUTE format('ALTER ROLE %I PASSWORD %L', 'bob', 'secret'); END $body$`, `DO $body$ BEGIN EXECUTE format('ALTER ROLE %I PASSWORD %L', '***', '***'); END $body$`},
		{pg, `SELECT format('ALTER ROLE bob PASSWORD %L', 'secret')`, `SELECT format('ALTER ROLE bob PASSWORD %L', '***')`},
		// A password joined to the string with ||, straight or through
		// quote_literal().
		{pg, `DO $$ BEGIN EXECUTE 'ALTER ROLE r PASSWORD ' || quote_literal('s3cret'); END $$`, `DO $$ BEGIN EXECUTE 'ALTER ROLE r PASSWORD ' || quote_literal('***'); END $$`},
		{pg, `DO $$ BEGIN EXECUTE 'ALTER ROLE r PASSWORD ' || '''s3cret'''; END $$`, `DO $$ BEGIN EXECUTE 'ALTER ROLE r PASSWORD ' || '***'; END $$`},
		{pg, `SELECT 'ALTER ROLE r PASSWORD ' || quote_nullable('s3cret')`, `SELECT 'ALTER ROLE r PASSWORD ' || quote_nullable('***')`},
		{pg, `SELECT 'no password here' || 'kept'`, `SELECT 'no password here' || 'kept'`},
		// The password in a PL/pgSQL variable: in a body that builds a
		// password into dynamic SQL, every assigned literal is hidden.
		{pg, `DO $$ DECLARE p text := 's3cret'; BEGIN EXECUTE format('ALTER ROLE r PASSWORD %L', p); END $$`, `DO $$ DECLARE p text := '***'; BEGIN EXECUTE format('ALTER ROLE r PASSWORD %L', p); END $$`},
		{pg, `DO $$ DECLARE p text DEFAULT 's3cret'; n int := 3; BEGIN EXECUTE 'ALTER ROLE r PASSWORD ' || quote_literal(p); END $$`, `DO $$ DECLARE p text DEFAULT '***'; n int := '***'; BEGIN EXECUTE 'ALTER ROLE r PASSWORD ' || quote_literal(p); END $$`},
		{pg, `DO $$ DECLARE p text := 'kept'; BEGIN RAISE NOTICE '%', p; END $$`, `DO $$ DECLARE p text := 'kept'; BEGIN RAISE NOTICE '%', p; END $$`},
		// SQL in an escape string, quotes escaped with backslashes.
		{pg, `DO E'BEGIN EXECUTE ''ALTER ROLE r PASSWORD \'\'s3cret\'\'''; END'`, `DO E'BEGIN EXECUTE \'ALTER ROLE r PASSWORD \'\'***\'\'\'; END'`},
		{pg, `DO E'BEGIN EXECUTE E\'ALTER ROLE r PASSWORD \\\'s3cret\\\'\'; END'`, `DO E'BEGIN EXECUTE E\'ALTER ROLE r PASSWORD \\\'***\\\'\'; END'`},
		{pg, `SELECT E'ALTER ROLE r PASSWORD \'s3cret\'\n'`, `SELECT E'ALTER ROLE r PASSWORD \'***\'\x0a'`},
		{pg, `SELECT 'password is short', 'kept'`, `SELECT 'password is short', 'kept'`},
		// In a body that builds a password, every literal but SQL is
		// hidden, however it reaches a variable (=, SELECT ... INTO, ||).
		{pg, `DO $$ DECLARE p text = 's3cret'; BEGIN EXECUTE format('ALTER ROLE r PASSWORD %L', p); END $$`, `DO $$ DECLARE p text = '***'; BEGIN EXECUTE format('ALTER ROLE r PASSWORD %L', p); END $$`},
		{pg, `DO $$ DECLARE p text; BEGIN SELECT 's3cret' INTO p; EXECUTE 'ALTER ROLE r PASSWORD ' || quote_literal(p); END $$`, `DO $$ DECLARE p text; BEGIN SELECT '***' INTO p; EXECUTE 'ALTER ROLE r PASSWORD ' || quote_literal(p); END $$`},
		{pg, `DO $$ DECLARE p text := 's3' || 'cret'; BEGIN EXECUTE format('ALTER ROLE r PASSWORD %L', p); END $$`, `DO $$ DECLARE p text := '***' || '***'; BEGIN EXECUTE format('ALTER ROLE r PASSWORD %L', p); END $$`},
		{pg, `CREATE FUNCTION f() RETURNS void LANGUAGE plpgsql AS $f$ DECLARE p text := 's3cret'; BEGIN EXECUTE format('ALTER ROLE r PASSWORD %L', p); END $f$`, `CREATE FUNCTION f() RETURNS void LANGUAGE plpgsql AS $f$ DECLARE p text := '***'; BEGIN EXECUTE format('ALTER ROLE r PASSWORD %L', p); END $f$`},
		{pg, `DO $$ BEGIN EXECUTE 'ALTER ROLE r PASSWORD ''' || 's3cret' || ''''; END $$`, `DO $$ BEGIN EXECUTE 'ALTER ROLE r PASSWORD ''***''' || '***' || '***'; END $$`},
		// A comment between PASSWORD and the placeholder or the end; a
		// placeholder that is not the string's last, or names its
		// argument.
		{pg, `SELECT 'ALTER ROLE r PASSWORD /* new */ ' || quote_literal('s3cret')`, `SELECT 'ALTER ROLE r PASSWORD /* new */ ' || quote_literal('***')`},
		{pg, `SELECT format('ALTER ROLE r PASSWORD -- new` + "\n" + `%L', 's3cret')`, `SELECT format('ALTER ROLE r PASSWORD -- new` + "\n" + `%L', '***')`},
		{pg, `SELECT format('ALTER ROLE r LOGIN PASSWORD %L VALID UNTIL %L', 's3cret', 'infinity')`, `SELECT format('ALTER ROLE r LOGIN PASSWORD %L VALID UNTIL %L', '***', 'infinity')`},
		{pg, `SELECT format('ALTER ROLE %1$I PASSWORD %2$L', 'bob', 's3cret')`, `SELECT format('ALTER ROLE %1$I PASSWORD %2$L', 'bob', '***')`},
		{pg, `SELECT format('ALTER ROLE r PASSWORD ''%s''', 's3cret')`, `SELECT format('ALTER ROLE r PASSWORD ''***''', '***')`},
		{pg, `SELECT format('%s is 100%% PASSWORD-free', 'kept')`, `SELECT format('%s is 100%% PASSWORD-free', 'kept')`},
		// Cut short inside a string that holds SQL: read as far as it
		// goes, written back still open.
		{pg, `DO $$ BEGIN EXECUTE 'CREATE USER u PASSWORD ''secr`, `DO $$ BEGIN EXECUTE 'CREATE USER u PASSWORD ''***''`},
		{pg, `DO $$ BEGIN EXECUTE 'ALTER ROLE r PASSWORD ' || quote_literal('s3cr`, `DO $$ BEGIN EXECUTE 'ALTER ROLE r PASSWORD ' || quote_literal('***'`},
		{pg, `DO $$ DECLARE p text := 's3cret'; BEGIN EXECUTE format('ALTER ROLE r PASSWORD %L', p); E`, `DO $$ DECLARE p text := '***'; BEGIN EXECUTE format('ALTER ROLE r PASSWORD %L', p); E`},
		{pg, `SELECT $x$ PASSWORD 'secr`, `SELECT $x$ PASSWORD '***'`},
		{pg, `SELECT E'ALTER ROLE r PASSWORD \'s3c`, `SELECT E'ALTER ROLE r PASSWORD \'***\'`},
		{pg, `SELECT E'ALTER ROLE r PASSWORD \'s3c\x4`, `SELECT E'ALTER ROLE r PASSWORD \'***\'`},
		{pg, `SELECT 'it''s cut, no password`, `SELECT 'it''s cut, no password`},
		{my, `PREPARE s FROM 'CREATE USER u IDENTIFIED BY ''secret'''`, `PREPARE s FROM 'CREATE USER u IDENTIFIED BY ''***'''`},
		{pg, `-- PASSWORD 'x'` + "\nSELECT 1", `-- PASSWORD 'x'` + "\nSELECT 1"},
		{pg, `SELECT $1 PASSWORD`, `SELECT $1 PASSWORD`},
		{pg, `SET password_encryption = 'scram-sha-256'`, `SET password_encryption = 'scram-sha-256'`},
		// Standard strings keep backslashes, but a server that reads them
		// as escapes sees the literal run on: hide it to the longer end.
		{pg, `ALTER ROLE bob PASSWORD 'a\' VALID UNTIL 'z' LOGIN`, `ALTER ROLE bob PASSWORD '***'z' LOGIN`},
		// Cut short by a length limit: hidden through the end.
		{pg, `ALTER ROLE bob PASSWORD 'pw-sec`, `ALTER ROLE bob PASSWORD '***'`},
		{pg, `ALTER ROLE bob PASSWORD $x$pw-sec`, `ALTER ROLE bob PASSWORD '***'`},
		{pg, `ALTER ROLE bob PASSWORD E'pw\`, `ALTER ROLE bob PASSWORD '***'`},
		{pg, `ALTER ROLE bob PASSWORD /* unterminated 'x'`, `ALTER ROLE bob PASSWORD /* unterminated 'x'`},
		{pg, `ALTER ROLE bob PASSWORD`, `ALTER ROLE bob PASSWORD`},

		// MySQL and MariaDB.
		{my, `CREATE USER 'bob'@'%' IDENTIFIED BY 'pw-1'`, `CREATE USER 'bob'@'%' IDENTIFIED BY '***'`},
		{my, `create user bob@localhost identified by "pw-1"`, `create user bob@localhost identified by '***'`},
		{my, `ALTER USER bob IDENTIFIED WITH mysql_native_password BY 'pw' PASSWORD EXPIRE INTERVAL 90 DAY`, `ALTER USER bob IDENTIFIED WITH mysql_native_password BY '***' PASSWORD EXPIRE INTERVAL 90 DAY`},
		{my, `ALTER USER bob IDENTIFIED WITH 'caching_sha2_password' AS '$A$005$hash'`, `ALTER USER bob IDENTIFIED WITH 'caching_sha2_password' AS '***'`},
		{my, `CREATE USER bob IDENTIFIED WITH caching_sha2_password AS 0x24412430303524`, `CREATE USER bob IDENTIFIED WITH caching_sha2_password AS '***'`},
		{my, `CREATE USER bob IDENTIFIED BY PASSWORD '*94BDCEBE19083CE2A1F959FD02F964C7AF4CFC29'`, `CREATE USER bob IDENTIFIED BY PASSWORD '***'`},
		{my, `CREATE USER bob IDENTIFIED VIA ed25519 USING PASSWORD('pw') OR unix_socket`, `CREATE USER bob IDENTIFIED VIA ed25519 USING PASSWORD('***') OR unix_socket`},
		{my, `CREATE USER bob IDENTIFIED VIA mysql_native_password USING '*hash' OR ed25519 USING 'h2'`, `CREATE USER bob IDENTIFIED VIA mysql_native_password USING '***' OR ed25519 USING '***'`},
		{my, `SET PASSWORD = PASSWORD('pw')`, `SET PASSWORD = PASSWORD('***')`},
		{my, `SET PASSWORD FOR 'bob'@'%' = 'pw'`, `SET PASSWORD FOR 'bob'@'%' = '***'`},
		{my, "SET PASSWORD FOR `bob`@`%` = OLD_PASSWORD('pw')", "SET PASSWORD FOR `bob`@`%` = OLD_PASSWORD('***')"},
		{my, `ALTER USER bob IDENTIFIED BY 'new' REPLACE 'old' RETAIN CURRENT PASSWORD`, `ALTER USER bob IDENTIFIED BY '***' REPLACE '***' RETAIN CURRENT PASSWORD`},
		{my, `GRANT ALL ON db.* TO 'bob'@'%' IDENTIFIED BY 'pw' WITH GRANT OPTION`, `GRANT ALL ON db.* TO 'bob'@'%' IDENTIFIED BY '***' WITH GRANT OPTION`},
		{my, `CREATE USER a IDENTIFIED BY 'x', 'b'@'h' IDENTIFIED BY 'y' COMMENT 'c'`, `CREATE USER a IDENTIFIED BY '***', 'b'@'h' IDENTIFIED BY '***' COMMENT 'c'`},
		{my, `CREATE USER bob IDENTIFIED BY 'it\'s' 'more'`, `CREATE USER bob IDENTIFIED BY '***' '***'`},
		{my, `CREATE USER bob IDENTIFIED BY _utf8mb4'pw' COLLATE utf8mb4_bin`, `CREATE USER bob IDENTIFIED BY _utf8mb4'***' COLLATE utf8mb4_bin`},
		{my, `CREATE USER bob IDENTIFIED BY N'pw'`, `CREATE USER bob IDENTIFIED BY '***'`},
		{my, `CREATE USER bob IDENTIFIED BY RANDOM PASSWORD`, `CREATE USER bob IDENTIFIED BY RANDOM PASSWORD`},
		{my, `CREATE USER bob /*!80000 IDENTIFIED BY 'pw' */`, `CREATE USER bob /*!80000 IDENTIFIED BY '***' */`},
		{my, `CREATE USER bob /*M!100100 IDENTIFIED BY 'pw'*/`, `CREATE USER bob /*M!100100 IDENTIFIED BY '***'*/`},
		{my, `CREATE USER bob # IDENTIFIED BY 'not code'` + "\n IDENTIFIED BY 'pw'", `CREATE USER bob # IDENTIFIED BY 'not code'` + "\n IDENTIFIED BY '***'"},
		{my, `SELECT 1 --IDENTIFIED BY 'x'`, `SELECT 1 --IDENTIFIED BY '***'`},
		{my, `CHANGE MASTER TO MASTER_HOST = 'h', MASTER_PASSWORD = 'pw'`, `CHANGE MASTER TO MASTER_HOST = 'h', MASTER_PASSWORD = '***'`},
		{my, `SELECT "IDENTIFIED BY 'x'"`, `SELECT "IDENTIFIED BY 'x'"`},
		{my, `SELECT 'a' AS password_hint`, `SELECT 'a' AS password_hint`},
		{my, `SELECT 1; SELECT 'a' AS b`, `SELECT 1; SELECT 'a' AS b`},
		{my, `CREATE USER bob IDENTIFIED BY 'pw'; SELECT 'a' AS b`, `CREATE USER bob IDENTIFIED BY '***'; SELECT 'a' AS b`},
		{my, `CREATE USER bob IDENTIFIED BY 'pw-s`, `CREATE USER bob IDENTIFIED BY '***'`},
		{my, `CREATE USER bob IDENTIFIED BY 'pw\`, `CREATE USER bob IDENTIFIED BY '***'`},
		// NO_BACKSLASH_ESCAPES reads 'a\' as the whole literal: hide to
		// the longer end either way.
		{my, `CREATE USER bob IDENTIFIED BY 'a\' REQUIRE SSL`, `CREATE USER bob IDENTIFIED BY '***'`},
		{my, "CREATE USER `pass``word` IDENTIFIED BY 'x'", "CREATE USER `pass``word` IDENTIFIED BY '***'"},

		// Nothing to hide.
		{pg, ``, ``},
		{pg, `SELECT 1`, `SELECT 1`},
		{my, `PASSWORD`, `PASSWORD`},
		{my, `IDENTIFIED`, `IDENTIFIED`},
		{pg, `SELECT 'x' passwordx 'y'`, `SELECT 'x' passwordx 'y'`},
		// The Kelvin sign is no K: no server reads this as a keyword.
		{pg, "SELECT 1 FROM t WHERE x = 'pa\u017fsword'", "SELECT 1 FROM t WHERE x = 'pa\u017fsword'"},
	}
	for _, c := range cases {
		if got := redact.SQL(c.in, c.d); got != c.out {
			t.Errorf("SQL(%q, %d)\n got %q\nwant %q", c.in, c.d, got, c.out)
		}
	}
}

// TestSQLNoAlloc checks that text with nothing to hide costs no
// allocation, with or without a keyword in it.
func TestSQLNoAlloc(t *testing.T) {
	for _, sql := range []string{
		"SELECT * FROM t WHERE id = 1",
		"SELECT password FROM users WHERE name = 'bob'",
		"ALTER USER bob IDENTIFIED BY RANDOM PASSWORD",
	} {
		if n := testing.AllocsPerRun(100, func() { redact.SQL(sql, redact.MySQL) }); n != 0 {
			t.Errorf("SQL(%q): %v allocations, want 0", sql, n)
		}
	}
}

func BenchmarkSQL(b *testing.B) {
	for _, bc := range []struct{ name, sql string }{
		{"plain", "SELECT c FROM sbtest1 WHERE id BETWEEN 5000 AND 5099 ORDER BY c" + strings.Repeat(" ", 100)},
		{"keyword", "SELECT password FROM users WHERE name = 'bob' AND active"},
		{"secret", "ALTER USER bob@localhost IDENTIFIED WITH caching_sha2_password BY 'correct horse battery staple'"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(bc.sql)))
			for b.Loop() {
				redact.SQL(bc.sql, redact.MySQL)
			}
		})
	}
}
