package stack_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sluicelab/sluice/internal/stack"
	"github.com/sluicelab/sluice/internal/testenv"
)

// viewRow returns the row of view (a SHOW) whose column key is val, as
// a map from column to value, or nil.
func viewRow(t *testing.T, st *stack.Stack, show, key, val string) map[string]string {
	t.Helper()
	res, err := st.Manager().Service().Exec(context.Background(), show)
	if err != nil {
		t.Fatal(err)
	}
	i := -1
	for j, c := range res.Columns {
		if c == key {
			i = j
		}
	}
	if i < 0 {
		t.Fatalf("%s has no column %s", show, key)
	}
	for _, r := range res.Rows {
		if r[i] == val {
			m := map[string]string{}
			for j, c := range res.Columns {
				m[c] = r[j]
			}
			return m
		}
	}
	return nil
}

// idleHolder returns the id of the one open session of route lim that
// holds a slot, or "".
func idleHolder(st *stack.Stack) string {
	for _, s := range st.Registry().Sessions() {
		if s.Info.Route == "lim" && s.Slot().Pool != "" {
			return strconv.FormatUint(s.ID, 10)
		}
	}
	return ""
}

// checkIdleVisible checks that the session holding the slot of
// admw_lim shows as idle in transaction in SHOW SESSIONS, for a time
// that grows, and is counted in SHOW POOLS.
func checkIdleVisible(t *testing.T, st *stack.Stack) {
	t.Helper()
	var id string
	testenv.Eventually(t, 10*time.Second, "a slot holder", func() bool { id = idleHolder(st); return id != "" })
	var first float64
	testenv.Eventually(t, 10*time.Second, "the holder idle in transaction in SHOW SESSIONS", func() bool {
		r := viewRow(t, st, "SHOW SESSIONS", "id", id)
		if r == nil || r["state"] != "idle in transaction" || r["slot"] != "admw_lim" || r["idle_in_transaction"] == "" {
			return false
		}
		first, _ = strconv.ParseFloat(r["idle_in_transaction"], 64)
		return true
	})
	testenv.Eventually(t, 10*time.Second, "its idle time growing", func() bool {
		r := viewRow(t, st, "SHOW SESSIONS", "id", id)
		d, err := strconv.ParseFloat(r["idle_in_transaction"], 64)
		return err == nil && d >= first+0.1
	})
	if p := viewRow(t, st, "SHOW POOLS", "name", "admw_lim"); p == nil || p["idle_holders"] != "1" || p["running"] != "1" {
		t.Fatalf("SHOW POOLS admw_lim = %v, want one idle holder of the one running slot", p)
	}
}

// TestAdmitPGIdleInTransactionVisible: a session idle in a transaction
// keeps the only slot of its pool; SHOW SESSIONS shows it as such, with
// how long it has sat idle, and SHOW POOLS counts it.
func TestAdmitPGIdleInTransactionVisible(t *testing.T) {
	st, lim, _ := admitStack(t, "postgres", testenv.PostgresAddr(t), 1, "")
	commit := holdSlot(t, lim)
	checkIdleVisible(t, st)
	commit()
	testenv.Eventually(t, 10*time.Second, "the slot back", func() bool { return idleHolder(st) == "" })
	if p := viewRow(t, st, "SHOW POOLS", "name", "admw_lim"); p["idle_holders"] != "0" {
		t.Fatalf("SHOW POOLS admw_lim = %v after the commit", p)
	}
}

// TestAdmitMySQLIdleInTransactionVisible is
// TestAdmitPGIdleInTransactionVisible against MariaDB.
func TestAdmitMySQLIdleInTransactionVisible(t *testing.T) {
	st, lim, _ := admitStack(t, "mysql", testenv.MySQLConfig(t).Addr, 1, "")
	mysqlBegin(t, mysqlConn(t, mysqlVia(t, lim, 1)), "SELECT 1")
	checkIdleVisible(t, st)
}

// auditHas reports whether the audit log has an entry of surface wlm
// whose statement begins with prefix.
func auditHas(st *stack.Stack, prefix string) bool {
	for _, e := range st.Manager().Service().Audit() {
		if e.Surface == "wlm" && strings.HasPrefix(e.Statement, prefix) {
			return true
		}
	}
	return false
}

// TestAdmitPGIdleInTransactionEnds: with idle_in_transaction='300ms', a
// session that sits idle in its transaction holding the only slot is
// ended: it reads FATAL 25P03, its backend ends, the statement held
// behind it runs, and the end is audited and counted.
func TestAdmitPGIdleInTransactionEnds(t *testing.T) {
	st, lim, _ := admitStack(t, "postgres", testenv.PostgresAddr(t), 1, "")
	execManager(t, st, "ALTER RESOURCE POOL admw_lim WITH (idle_in_transaction='300ms')")
	if p := viewRow(t, st, "SHOW POOLS", "name", "admw_lim"); p["idle_in_transaction"] != "300ms" {
		t.Fatalf("SHOW POOLS admw_lim = %v, want idle_in_transaction 300ms", p)
	}
	direct := testenv.ConnectPG(t, testenv.PostgresURL(t))
	app := fmt.Sprintf("admw_idle_%d", time.Now().UnixNano())
	backends := pgBackends(t, direct, app)
	bg := context.Background()
	holder := testenv.ConnectPGConfig(t, pgVia(t, lim, app))
	tx, err := holder.Begin(bg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(bg, "SELECT 1"); err != nil {
		t.Fatal(err)
	}
	id := idleHolder(st)
	held := testenv.ConnectPGConfig(t, pgVia(t, lim, app+"_held"))
	done := make(chan error, 1)
	var n int
	go func() { done <- held.QueryRow(bg, "SELECT 42").Scan(&n) }()
	if err := <-done; err != nil || n != 42 {
		t.Fatalf("held statement: %d, %v", n, err)
	}
	testenv.Eventually(t, 10*time.Second, "the idle session ended", func() bool {
		return backends() == 0 && routeSessions(st, "lim") == 1
	})
	_, err = tx.Exec(bg, "SELECT 2")
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "25P03" || pe.Severity != "FATAL" {
		t.Fatalf("the ended session's next statement: %v, want FATAL 25P03", err)
	}
	if !auditHas(st, "TERMINATE SESSION "+id+": idle in transaction") {
		t.Errorf("no audit entry for session %s: %v", id, st.Manager().Service().Audit())
	}
	if got := st.Manager().Rules().Stats().IdleInTransactionEnded["admw_lim"]; got != 1 {
		t.Errorf("IdleInTransactionEnded = %d, want 1", got)
	}
}

// TestAdmitMySQLIdleInTransactionEnds is TestAdmitPGIdleInTransactionEnds
// against MariaDB: the idle session's socket holds an ERR packet (1927,
// 70100) the client reads before the end of the stream.
func TestAdmitMySQLIdleInTransactionEnds(t *testing.T) {
	st, lim, _ := admitStack(t, "mysql", testenv.MySQLConfig(t).Addr, 1, "")
	execManager(t, st, "ALTER RESOURCE POOL admw_lim WITH (idle_in_transaction='300ms')")
	bg := context.Background()
	var raw net.Conn
	db := mysqlKeepingSocket(t, lim, func(c net.Conn) { raw = c })
	holder := mysqlConn(t, db)
	tx, err := holder.BeginTx(bg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	var connID int64
	if err := tx.QueryRowContext(bg, "SELECT CONNECTION_ID()").Scan(&connID); err != nil {
		t.Fatal(err)
	}
	id := idleHolder(st)
	held := mysqlConn(t, mysqlVia(t, lim, 1))
	var n int
	if err := held.QueryRowContext(bg, "SELECT 42").Scan(&n); err != nil || n != 42 {
		t.Fatalf("held statement: %d, %v", n, err)
	}
	direct := testenv.OpenMySQL(t, testenv.MySQLConfig(t))
	testenv.Eventually(t, 10*time.Second, "the idle session ended", func() bool {
		var k int
		if err := direct.QueryRow("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = ?", connID).Scan(&k); err != nil {
			t.Fatal(err)
		}
		return k == 0 && routeSessions(st, "lim") == 1
	})
	// What the driver would read next: one ERR packet, then the end.
	raw.SetReadDeadline(time.Now().Add(10 * time.Second))
	b, err := io.ReadAll(raw)
	if err != nil && !errors.Is(err, net.ErrClosed) {
		t.Logf("read: %v", err)
	}
	if len(b) < 13 || int(b[0])|int(b[1])<<8|int(b[2])<<16 != len(b)-4 || b[4] != 0xff ||
		binary.LittleEndian.Uint16(b[5:]) != 1927 || string(b[7:13]) != "#70100" {
		t.Fatalf("the idle session read %q, want one ERR 1927 (70100)", b)
	}
	t.Logf("the idle session read ERR 1927: %s", b[13:])
	if !auditHas(st, "TERMINATE SESSION "+id+": idle in transaction") {
		t.Errorf("no audit entry for session %s: %v", id, st.Manager().Service().Audit())
	}
	if got := st.Manager().Rules().Stats().IdleInTransactionEnded["admw_lim"]; got != 1 {
		t.Errorf("IdleInTransactionEnded = %d, want 1", got)
	}
}
