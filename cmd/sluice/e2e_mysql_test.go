package main

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sluicelab/sluice/internal/config"
	"github.com/sluicelab/sluice/internal/testenv"
)

const bigSelectMySQL = `SELECT seq, REPEAT(MD5(seq), 30) FROM seq_1_to_100000` // ~97 MB

// mysqlHash reads every row of bigSelectMySQL and hashes it.
func mysqlHash(ctx context.Context, db *sql.DB, onFirst func()) ([]byte, error) {
	rows, err := db.QueryContext(ctx, bigSelectMySQL)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	h := sha256.New()
	first := true
	for rows.Next() {
		var n int
		var s string
		if err := rows.Scan(&n, &s); err != nil {
			return nil, err
		}
		if first && onFirst != nil {
			onFirst()
			first = false
		}
		h.Write([]byte(s))
	}
	return h.Sum(nil), rows.Err()
}

// TestExceptRuleEndToEndMySQL is the exception-rule pair on a mysql route:
// penalty moves the statement to the low class and the result arrives
// intact; abort stops it with KILL QUERY, the client gets the server's
// error and the session goes on.
func TestExceptRuleEndToEndMySQL(t *testing.T) {
	testenv.SkipShort(t, "takes 8s here")
	mcfg := testenv.MySQLConfig(t)
	root := testenv.OpenMySQL(t, mcfg)
	for _, q := range []string{
		"CREATE USER IF NOT EXISTS 'user1'@'%' IDENTIFIED BY 'xxxxxxxx'",
		"ALTER USER 'user1'@'%' IDENTIFIED BY 'xxxxxxxx'",
		"GRANT SELECT ON *.* TO 'user1'@'%'",
	} {
		if _, err := root.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	myRoute := freeAddr(t)
	ta := startApp(t, config.Route{Name: "my", Listen: myRoute, Upstream: mcfg.Addr, Protocol: "mysql",
		KillUser: mcfg.User, KillPassword: mcfg.Passwd})
	ta.psqlAdmin(t, `CREATE EXCEPT RULE bandwidth_rule1 WITH(bandwidth=1, ELAPSEDTIME=2, action='penalty');
CREATE RESOURCE POOL rp1 WITH(EXCEPT_RULE='bandwidth_rule1');
CREATE USER user1 RESOURCE POOL 'rp1' PASSWORD 'xxxxxxxx';
ALTER LINK default WITH (capacity='20MB');`)

	ctx := context.Background()
	direct, err := mysqlHash(ctx, root, nil)
	if err != nil {
		t.Fatal(err)
	}
	ucfg := mysql.NewConfig()
	ucfg.User, ucfg.Passwd, ucfg.Net, ucfg.Addr, ucfg.DBName = "user1", "xxxxxxxx", "tcp", myRoute, mcfg.DBName
	db := testenv.OpenMySQL(t, ucfg)
	db.SetMaxOpenConns(1)

	t.Run("penalty", func(t *testing.T) {
		firstRow := make(chan struct{})
		type result struct {
			sum []byte
			err error
		}
		done := make(chan result, 1)
		start := time.Now()
		go func() {
			s, err := mysqlHash(ctx, db, func() { close(firstRow) })
			done <- result{s, err}
		}()
		select {
		case <-firstRow:
		case r := <-done:
			t.Fatalf("query ended before its first row: %v", r.err)
		}
		var penalisedAt time.Duration
		for penalisedAt == 0 {
			select {
			case r := <-done:
				t.Fatalf("query ended (%v) before it was penalised", r.err)
			case <-time.After(50 * time.Millisecond):
			}
			m := findStatement(t, ta, func(m map[string]string) bool {
				return m["user"] == "user1" && m["state"] == "running" && strings.HasPrefix(m["sql"], "SELECT seq") && m["penalised"] == "yes"
			})
			if m != nil {
				penalisedAt = time.Since(start)
				if m["class"] != "low" {
					t.Fatalf("penalised row: %v", m)
				}
			}
		}
		if penalisedAt > 7500*time.Millisecond {
			t.Fatalf("penalised after %v, want within 7 s", penalisedAt)
		}
		lowBefore := lowBytes(ta)
		r := <-done
		if r.err != nil {
			t.Fatal(r.err)
		}
		if string(r.sum) != string(direct) {
			t.Fatal("penalised result differs from the direct one")
		}
		if lowBytes(ta) <= lowBefore {
			t.Fatal("no bytes in the low class after the penalty")
		}
	})

	t.Run("abort", func(t *testing.T) {
		ta.psqlAdmin(t, `ALTER EXCEPT RULE bandwidth_rule1 WITH(action='abort')`)
		conn, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		var id int
		conn.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&id)
		start := time.Now()
		rows, err := conn.QueryContext(ctx, bigSelectMySQL)
		if err == nil {
			for rows.Next() {
			}
			err = rows.Err()
			rows.Close()
		}
		var me *mysql.MySQLError
		if !errors.As(err, &me) || me.Number != 1317 {
			t.Fatalf("query error = %v, want MySQL error 1317 (interrupted)", err)
		}
		if el := time.Since(start); el > 8*time.Second {
			t.Fatalf("aborted after %v", el)
		}
		var got, id2 int
		if err := conn.QueryRowContext(ctx, "SELECT 40 + 2, CONNECTION_ID()").Scan(&got, &id2); err != nil || got != 42 || id2 != id {
			t.Fatalf("next query: %d on connection %d (was %d), %v", got, id2, id, err)
		}
	})
}
