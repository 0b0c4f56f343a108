package stack_test

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/sluicelab/sluice/internal/session"
	"github.com/sluicelab/sluice/internal/stack"
	"github.com/sluicelab/sluice/internal/testenv"
)

// TestReplicationMySQL: a MariaDB replica replicates from a private
// primary through a sluice mysql route whose pool allows one active
// statement, then through a route with a 2 ms delay. Rows written on the
// primary appear on the replica, each commit acknowledged by the
// semi-synchronous replica through the route; SHOW SLAVE STATUS shows both threads
// running with GTID and no error; the registry shows a session of kind
// replication whose binlog dump statement counts the bytes of the
// stream as it grows; and the dump never holds the pool's one slot: a
// client of the same pool runs statements meanwhile. A penalty rule on
// the pool then demotes the dump, and rows still replicate.
func TestReplicationMySQL(t *testing.T) {
	testenv.SkipShort(t, "takes 10s here")
	primary := testenv.StartMariaDB(t, "--log-bin=mysql-bin", "--server-id=1", "--binlog-format=ROW")
	replica := testenv.StartMariaDB(t, "--server-id=2")
	if primary == nil || replica == nil {
		return
	}
	pdb, rdb := primary.DB(t), replica.DB(t)
	ctx := context.Background()
	// The account setup is in the primary's binlog; the replica has its own.
	execAll(t, pdb, "RESET MASTER")

	plain, delayed := testenv.DeadAddr(t), testenv.DeadAddr(t)
	route := func(name, addr, extra string) string {
		return "  - name: " + name + "\n    listen: " + addr + "\n    upstream: " + primary.Addr + "\n    protocol: mysql\n" + extra
	}
	st, _ := configStack(t, "catalog: \"\"\nroutes:\n"+
		route("replplain", plain, "")+route("repldelay", delayed, "    emulation:\n      delay: 2ms\n"))
	execManager(t, st,
		"CREATE RESOURCE POOL repl_one WITH (active_statements=1)",
		"ALTER ROUTE replplain WITH (pool='repl_one')",
		"ALTER ROUTE repldelay WITH (pool='repl_one')",
	)
	execAll(t, pdb, "CREATE TABLE sluice.repl_t (id INT PRIMARY KEY, v VARCHAR(200))")
	// Semi-synchronous: the replica acknowledges events on the dump's
	// connection while the stream flows.
	execAll(t, pdb, "SET GLOBAL rpl_semi_sync_master_enabled=1", "SET GLOBAL rpl_semi_sync_master_timeout=20000")
	execAll(t, rdb, "SET GLOBAL rpl_semi_sync_slave_enabled=1")

	next := 0
	write := func(n int) {
		t.Helper()
		for range n {
			next++
			if _, err := pdb.ExecContext(ctx, "INSERT INTO sluice.repl_t VALUES (?, REPEAT('x', 150))", next); err != nil {
				t.Fatal(err)
			}
		}
	}
	replicated := func(what string) {
		t.Helper()
		testenv.Eventually(t, 60*time.Second, what, func() bool {
			var n int
			err := rdb.QueryRowContext(ctx, "SELECT COUNT(*) FROM sluice.repl_t").Scan(&n)
			return err == nil && n == next
		})
	}

	for _, tc := range []struct{ name, addr string }{{"plain", plain}, {"delayed", delayed}} {
		t.Run(tc.name, func(t *testing.T) {
			_, port, _ := net.SplitHostPort(tc.addr)
			execAll(t, rdb, "STOP SLAVE",
				fmt.Sprintf("CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT=%s, MASTER_USER='%s', "+
					"MASTER_PASSWORD='%s', MASTER_USE_GTID=slave_pos, MASTER_CONNECT_RETRY=1",
					port, primary.User, primary.Password),
				"START SLAVE")
			write(50)
			replicated(tc.name + ": rows on the replica")
			status := slaveStatus(t, rdb)
			for k, want := range map[string]string{
				"Slave_IO_Running": "Yes", "Slave_SQL_Running": "Yes", "Using_Gtid": "Slave_Pos",
				"Last_IO_Error": "", "Last_SQL_Error": "", "Master_Port": port,
			} {
				if status[k] != want {
					t.Errorf("SHOW SLAVE STATUS %s = %q, want %q\n%s", k, status[k], want, replica.Log())
				}
			}

			dump := replicationStatement(t, st, tc.name)
			before, acked, ackBytes := dump.BytesDown(), semiSyncAcked(t, pdb), dump.BytesUp()
			write(50)
			replicated(tc.name + ": more rows on the replica")
			testenv.Eventually(t, 30*time.Second, "the dump's bytes grow", func() bool {
				return dump.BytesDown() > before+50*150
			})
			// Each commit waited for the replica's acknowledgement, which
			// passed as part of the dump: no statement of its own.
			if n := semiSyncAcked(t, pdb) - acked; n < 50 {
				t.Errorf("%d of 50 commits acknowledged by the replica", n)
			}
			if dump.BytesUp() <= ackBytes {
				t.Errorf("the dump has %d bytes up after the acknowledgements, %d before", dump.BytesUp(), ackBytes)
			}
			for _, s := range st.Registry().Sessions() {
				if s.Kind() == session.KindReplication && len(s.Active()) != 1 {
					t.Errorf("the replication session runs %d statements", len(s.Active()))
				}
			}
			t.Logf("%s: %s has %d bytes down, %d up", tc.name, dump.SQL, dump.BytesDown(), dump.BytesUp())

			// The pool's one slot is free: a client of the route runs.
			cfg := primary.Config(tc.addr)
			cdb := testenv.OpenMySQL(t, cfg)
			qctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			defer cancel()
			for range 3 {
				var one int
				if err := cdb.QueryRowContext(qctx, "SELECT 1").Scan(&one); err != nil {
					t.Fatalf("a client of the replica's pool: %v", err)
				}
			}
		})
	}

	// A penalty rule of the pool demotes the dump, one long statement,
	// and the stream goes on.
	execManager(t, st,
		"CREATE EXCEPT RULE repl_long WITH (elapsedtime=1, action='penalty')",
		"ALTER RESOURCE POOL repl_one WITH (except_rule='repl_long')",
	)
	dump := replicationStatement(t, st, "penalty")
	testenv.Eventually(t, 30*time.Second, "the dump penalised", dump.Penalized)
	before := dump.BytesDown()
	write(20)
	replicated("penalty: rows on the replica")
	if dump.BytesDown() <= before || !dump.Penalized() || dump.Outcome() != session.Running {
		t.Fatalf("after the penalty: %d bytes down (%d before), penalised %v, outcome %v",
			dump.BytesDown(), before, dump.Penalized(), dump.Outcome())
	}
	execAll(t, rdb, "STOP SLAVE")
}

// replicationStatement waits for the one session of kind replication on
// route and returns its running binlog dump.
func replicationStatement(t *testing.T, st *stack.Stack, what string) *session.Statement {
	t.Helper()
	var dump *session.Statement
	testenv.Eventually(t, 30*time.Second, what+": a replication session dumping the binlog", func() bool {
		dump = nil
		n := 0
		for _, s := range st.Registry().Sessions() {
			if s.Kind() != session.KindReplication {
				continue
			}
			n++
			for _, a := range s.Active() {
				if strings.HasPrefix(a.SQL, "COM_BINLOG_DUMP") {
					dump = a
				}
			}
		}
		return n == 1 && dump != nil
	})
	var sqls []string
	for _, r := range st.Registry().Recent() {
		if s := r.Snapshot(); s.SessionID == dump.Snapshot().SessionID {
			sqls = append(sqls, s.SQL)
		}
	}
	t.Logf("%s: the replica's statements before its dump: %q", what, sqls)
	return dump
}

// semiSyncAcked is the primary's count of commits a replica acknowledged.
func semiSyncAcked(t *testing.T, db *sql.DB) int {
	t.Helper()
	var name string
	var n int
	if err := db.QueryRow("SHOW GLOBAL STATUS LIKE 'Rpl_semi_sync_master_yes_tx'").Scan(&name, &n); err != nil {
		t.Fatal(err)
	}
	return n
}

// slaveStatus returns the columns of SHOW SLAVE STATUS by name.
func slaveStatus(t *testing.T, db *sql.DB) map[string]string {
	t.Helper()
	rows, err := db.Query("SHOW SLAVE STATUS")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		t.Fatal(err)
	}
	if !rows.Next() {
		t.Fatalf("SHOW SLAVE STATUS: no row (%v)", rows.Err())
	}
	vals := make([]sql.NullString, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if err := rows.Scan(ptrs...); err != nil {
		t.Fatal(err)
	}
	out := make(map[string]string, len(cols))
	for i, c := range cols {
		out[c] = vals[i].String
	}
	return out
}

func execAll(t *testing.T, db *sql.DB, qs ...string) {
	t.Helper()
	for _, q := range qs {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}
