package stack_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sluicelab/sluice/internal/testenv"
)

// mysqlVia opens a database/sql pool of at most conns connections to
// the test MariaDB through addr, closed when the test ends.
func mysqlVia(t *testing.T, addr string, conns int) *sql.DB {
	t.Helper()
	cfg := testenv.MySQLConfig(t)
	cfg.Addr = addr
	db := testenv.OpenMySQL(t, cfg)
	db.SetMaxOpenConns(conns)
	db.SetMaxIdleConns(conns)
	return db
}

// mysqlConn takes one connection of db.
func mysqlConn(t *testing.T, db *sql.DB) *sql.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// mysqlBegin begins a transaction on c and runs query in it, so that c
// holds a slot of its pool until the transaction ends. A transaction
// still open when the test ends is rolled back.
func mysqlBegin(t *testing.T, c *sql.Conn, query string) *sql.Tx {
	t.Helper()
	tx, err := c.BeginTx(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tx.Rollback() })
	if _, err := tx.ExecContext(context.Background(), query); err != nil {
		t.Fatal(err)
	}
	return tx
}

// TestAdmitMySQLBound: 40 sessions of a pool with active_statements=4
// run SELECT SLEEP(0.5) in a loop; the server's process list, sampled
// every 50 ms, never shows more than 4 of them running, and about 8 end
// per second. A session of a pool without a limit sees no wait.
func TestAdmitMySQLBound(t *testing.T) {
	testenv.SkipShort(t, "takes 8s here")
	_, lim, free := admitStack(t, "mysql", testenv.MySQLConfig(t).Addr, boundLimit, "")
	tag := fmt.Sprintf("admw_bound_%d", time.Now().UnixNano())
	query := "SELECT SLEEP(0.5) /* " + tag + " */"
	db := mysqlVia(t, lim, boundSessions)
	var check boundCheck
	for range boundSessions {
		c := mysqlConn(t, db)
		check.limited = append(check.limited, func(ctx context.Context) error {
			_, err := c.ExecContext(ctx, query)
			return err
		})
	}
	direct := testenv.OpenMySQL(t, testenv.MySQLConfig(t))
	other := mysqlConn(t, mysqlVia(t, free, 1))
	check.other = func(ctx context.Context) error { _, err := other.ExecContext(ctx, "SELECT 1"); return err }
	check.active = func() (n int, err error) {
		// The pattern is built by the server, so this query's own text
		// does not match it. Only threads still in the sleep count: the
		// server sends a statement's result (and sluice admits the next)
		// before the thread's row leaves COMMAND 'Query', which a loaded
		// server shows for a moment.
		err = direct.QueryRow("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE COMMAND = 'Query' AND STATE = 'User sleep' AND INFO LIKE CONCAT('%', ?, '%')", tag).Scan(&n)
		return n, err
	}
	checkAdmitBound(t, check)
}

// TestAdmitMySQLNoDeadlock: with active_statements=1, a transaction that
// locks a row keeps its slot and goes on while another session's UPDATE
// of the row is held in sluice; both finish.
func TestAdmitMySQLNoDeadlock(t *testing.T) {
	st, lim, _ := admitStack(t, "mysql", testenv.MySQLConfig(t).Addr, 1, "")
	table := fmt.Sprintf("admw_dl_%d", time.Now().UnixNano())
	direct := testenv.OpenMySQL(t, testenv.MySQLConfig(t))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, q := range []string{"CREATE TABLE " + table + " (id INT PRIMARY KEY, v INT) ENGINE=InnoDB", "INSERT INTO " + table + " VALUES (1, 0)"} {
		if _, err := direct.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { direct.Exec("DROP TABLE IF EXISTS " + table) })

	db := mysqlVia(t, lim, 2)
	a, b := mysqlConn(t, db), mysqlConn(t, db)
	tx, err := a.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkNoDeadlock(t, st, deadlockCheck{
		table:  table,
		txExec: func(q string) error { _, err := tx.ExecContext(ctx, q); return err },
		commit: tx.Commit,
		bExec:  func(q string) error { _, err := b.ExecContext(ctx, q); return err },
		value: func() (v int, err error) {
			err = direct.QueryRowContext(ctx, "SELECT v FROM "+table+" WHERE id = 1").Scan(&v)
			return v, err
		},
	})
}

// TestAdmitMySQLCancelHeld: a command held for admission is cancelled by
// KILL QUERY sent through sluice (answered OK by sluice) and by the
// console's cancel: the held session reads ERR 1317 quickly and then runs
// another statement; prepared statements are held and cancelled alike.
func TestAdmitMySQLCancelHeld(t *testing.T) {
	st, lim, _ := admitStack(t, "mysql", testenv.MySQLConfig(t).Addr, 1, "")
	db := mysqlVia(t, lim, 3)
	holder, held, killer := mysqlConn(t, db), mysqlConn(t, db), mysqlConn(t, db)
	bg := context.Background()
	var id int64
	if err := held.QueryRowContext(bg, "SELECT CONNECTION_ID()").Scan(&id); err != nil {
		t.Fatal(err)
	}
	stmt, err := held.PrepareContext(bg, "SELECT ? + 1")
	if err != nil {
		t.Fatal(err)
	}
	defer stmt.Close()
	tx := mysqlBegin(t, holder, "SELECT 2")

	for _, c := range []struct{ how, cmd string }{
		{"KILL QUERY", "query"}, {"console", "query"}, {"KILL QUERY", "execute"}, {"console", "execute"},
	} {
		exec := func() error {
			if c.cmd == "query" {
				_, err := held.ExecContext(bg, "SELECT 1")
				return err
			}
			var n int
			return stmt.QueryRowContext(bg, 1).Scan(&n)
		}
		err := cancelHeld(t, st, c.how+" of a held "+c.cmd, exec, func() {
			if c.how == "KILL QUERY" {
				if _, err := killer.ExecContext(bg, fmt.Sprintf("KILL QUERY %d", id)); err != nil {
					t.Fatal(err)
				}
			} else {
				cancelWaiting(t, st)
			}
		})
		var me *mysql.MySQLError
		if !errors.As(err, &me) || me.Number != 1317 || string(me.SQLState[:]) != "70100" {
			t.Fatalf("%s of a held %s = %v, want error 1317 (70100)", c.how, c.cmd, err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := held.QueryRowContext(bg, "SELECT 41 + 1").Scan(&n); err != nil || n != 42 {
		t.Fatalf("after the cancels: %d, %v", n, err)
	}
	if err := stmt.QueryRowContext(bg, 41).Scan(&n); err != nil || n != 42 {
		t.Fatalf("prepared, after the cancels: %d, %v", n, err)
	}
}

// TestAdmitMySQLPreparedHeld: a prepared statement with a 300 KiB
// parameter (one COM_STMT_EXECUTE of several chunks) and a
// multi-statement query, each held while another session's transaction
// has the only slot, run whole and byte-exact once it commits.
func TestAdmitMySQLPreparedHeld(t *testing.T) {
	st, lim, _ := admitStack(t, "mysql", testenv.MySQLConfig(t).Addr, 1, "")
	cfg := testenv.MySQLConfig(t)
	cfg.Addr = lim
	cfg.MultiStatements = true
	db := testenv.OpenMySQL(t, cfg)
	db.SetMaxOpenConns(2)
	holderDB := mysqlVia(t, lim, 1)
	c := mysqlConn(t, db)
	bg := context.Background()
	stmt, err := c.PrepareContext(bg, "SELECT LENGTH(?), MD5(?)")
	if err != nil {
		t.Fatal(err)
	}
	defer stmt.Close()
	blob := make([]byte, 300<<10)
	for i := range blob {
		blob[i] = byte(i * 7)
	}
	var want string
	if err := c.QueryRowContext(bg, "SELECT MD5(?)", blob).Scan(&want); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		run  func() error
	}{
		{"prepared execute", func() error {
			var n int
			var sum string
			if err := stmt.QueryRowContext(bg, blob, blob).Scan(&n, &sum); err != nil {
				return err
			}
			if n != len(blob) || sum != want {
				return fmt.Errorf("length %d md5 %s, want %d %s", n, sum, len(blob), want)
			}
			return nil
		}},
		{"multi-statement query", func() error {
			rows, err := c.QueryContext(bg, "SELECT 1; SELECT 2")
			if err != nil {
				return err
			}
			defer rows.Close()
			var got []int
			for {
				for rows.Next() {
					var v int
					if err := rows.Scan(&v); err != nil {
						return err
					}
					got = append(got, v)
				}
				if !rows.NextResultSet() {
					break
				}
			}
			if fmt.Sprint(got) != "[1 2]" {
				return fmt.Errorf("results %v", got)
			}
			return rows.Err()
		}},
	}
	for _, tc := range cases {
		h := mysqlConn(t, holderDB)
		tx := mysqlBegin(t, h, "SELECT 1")
		done := make(chan error, 1)
		go func() { done <- tc.run() }()
		testenv.Eventually(t, 10*time.Second, tc.name+" held", func() bool { return heldCount(st) == 1 })
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		h.Close()
	}
}

// TestAdmitMySQLChurn: sessions of a pool with active_statements=2 run
// queries, transactions and prepared executes, KILL QUERY each other's
// waits and drop their connections under statements, for 5 s (half a
// second with -short); then every slot is back, nothing waits, and a new
// session runs at once.
func TestAdmitMySQLChurn(t *testing.T) {
	const workers = 12
	run := 5 * time.Second
	if testing.Short() {
		run = 500 * time.Millisecond
	}
	st, lim, _ := admitStack(t, "mysql", testenv.MySQLConfig(t).Addr, 2, "")
	ctx, cancel := context.WithTimeout(context.Background(), run)
	defer cancel()
	killer := mysqlConn(t, mysqlVia(t, lim, 1))
	dbs := make([]*sql.DB, workers)
	for w := range dbs {
		dbs[w] = mysqlVia(t, lim, 1)
	}
	ops := churn(ctx, workers, func(w, op int) bool {
		bg := context.Background()
		c, err := dbs[w].Conn(bg)
		if err != nil {
			t.Error(err)
			return false
		}
		switch op {
		case 0:
			_, err = c.ExecContext(bg, "SELECT SLEEP(0.01)")
		case 1:
			var tx *sql.Tx
			if tx, err = c.BeginTx(bg, nil); err == nil {
				if _, err = tx.ExecContext(bg, "SELECT SLEEP(0.01)"); err == nil {
					err = tx.Commit()
				}
			}
		case 2:
			var n int
			err = c.QueryRowContext(bg, "SELECT ? + 1", 1).Scan(&n)
		case 3: // KILL QUERY while it waits or runs
			var id int64
			if err = c.QueryRowContext(bg, "SELECT CONNECTION_ID()").Scan(&id); err == nil {
				go func() { time.Sleep(3 * time.Millisecond); killer.ExecContext(bg, fmt.Sprintf("KILL QUERY %d", id)) }()
				c.ExecContext(bg, "SELECT SLEEP(0.05)")
			}
		case 4: // the driver drops the connection when ctx ends mid-query
			qctx, qcancel := context.WithTimeout(bg, 5*time.Millisecond)
			c.ExecContext(qctx, "SELECT SLEEP(0.05)")
			qcancel()
		}
		if err != nil {
			t.Errorf("op %d: %v", op, err)
		}
		c.Close()
		return true
	})
	t.Logf("ops (query, transaction, prepared, kill, drop): %d %d %d %d %d", ops[0], ops[1], ops[2], ops[3], ops[4])
	testenv.Eventually(t, 30*time.Second, "every slot back", func() bool {
		s := st.Manager().Admission().AdmissionStats()["admw_lim"]
		return s.Running == 0 && s.Waiting == 0 && heldCount(st) == 0
	})
	c := mysqlConn(t, mysqlVia(t, lim, 1))
	for range 3 {
		if _, err := c.ExecContext(context.Background(), "SELECT 1"); err != nil {
			t.Fatal(err)
		}
	}
}
