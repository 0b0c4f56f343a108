package mysql

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"database/sql"
	"database/sql/driver"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/session"
	"github.com/sluicelab/sluice/internal/testenv"
)

// expect is a statement as a test expects it.
type expect struct {
	SQL     string
	Outcome session.Outcome
	Rows    int64
	Code    string
}

// checkRecords compares the statement records of session id in reg
// with want, failing t on a difference, and returns the records.
func checkRecords(t *testing.T, reg *session.Registry, id uint64, want []expect) []session.Snapshot {
	t.Helper()
	got := sessionRecords(reg, id)
	var g []expect
	for _, s := range got {
		g = append(g, expect{s.SQL, s.Outcome, s.Rows, s.Code})
	}
	if fmt.Sprint(g) != fmt.Sprint(want) {
		t.Fatalf("statements:\n got %v\nwant %v", g, want)
	}
	return got
}

// byteTotals sums the bytes of records.
func byteTotals(recs []session.Snapshot) (up, down int64) {
	for _, s := range recs {
		up += s.BytesUp
		down += s.BytesDown
	}
	return up, down
}

// startSession opens one connection of c, pings it, and returns it with
// its session and the client byte counters at the start of the ping.
func startSession(t *testing.T, r *relay, c *client) (*sql.Conn, *session.Session, int64, int64) {
	t.Helper()
	ctx := context.Background()
	c.db.SetMaxOpenConns(1)
	conn, err := c.db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if err := conn.PingContext(ctx); err != nil {
		t.Fatal(err)
	}
	sess := onlySession(t, r.Reg)
	recs := sessionRecords(r.Reg, sess.ID)
	if len(recs) != 1 || recs[0].SQL != "COM_PING" {
		t.Fatalf("after ping: %+v", recs)
	}
	return conn, sess, c.up.Load() - recs[0].BytesUp, c.down.Load() - recs[0].BytesDown
}

// checkBytes checks that the statements of sess hold exactly the bytes
// the client exchanged since (up0, down0).
func checkBytes(t *testing.T, r *relay, c *client, sess *session.Session, up0, down0 int64) {
	t.Helper()
	up, down := byteTotals(sessionRecords(r.Reg, sess.ID))
	cu, cd := c.up.Load()-up0, c.down.Load()-down0
	if up != cu || down != cd {
		t.Fatalf("statements hold %d bytes up, %d down; the client sent %d, received %d", up, down, cu, cd)
	}
	t.Logf("statements hold %d bytes up, %d down, as the client counted", up, down)
}

func mustExec(t *testing.T, conn *sql.Conn, q string, args ...any) sql.Result {
	t.Helper()
	res, err := conn.ExecContext(context.Background(), q, args...)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return res
}

func countRows(t *testing.T, rows *sql.Rows, err error) int {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for {
		for rows.Next() {
			n++
		}
		if !rows.NextResultSet() {
			break
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestGoDriverTextProtocol(t *testing.T) {
	for _, split := range []bool{false, true} {
		t.Run(fmt.Sprintf("split=%v", split), func(t *testing.T) {
			r := startRelay(t, Options{}, session.Options{})
			r.Split = split
			c := r.openClient(t, func(cfg *gomysql.Config) {
				cfg.InterpolateParams = true
				cfg.MultiStatements = true
			})
			ctx := context.Background()
			conn, sess, up0, down0 := startSession(t, r, c)
			mustExec(t, conn, "DROP TABLE IF EXISTS wiremysql_text")
			mustExec(t, conn, "CREATE TABLE wiremysql_text (id INT PRIMARY KEY, v VARCHAR(100))")
			if n, _ := mustExec(t, conn, "INSERT INTO wiremysql_text VALUES (?, ?), (?, ?)", 1, "a", 2, "b").RowsAffected(); n != 2 {
				t.Fatalf("inserted %d rows", n)
			}
			rows, err := conn.QueryContext(ctx, "SELECT id, v FROM wiremysql_text WHERE id >= ?", 1)
			if n := countRows(t, rows, err); n != 2 {
				t.Fatalf("selected %d rows", n)
			}
			tx, err := conn.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tx.Exec("UPDATE wiremysql_text SET v = ? WHERE id = ?", "c", 1); err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			tx, _ = conn.BeginTx(ctx, nil)
			tx.Exec("DELETE FROM wiremysql_text")
			if err := tx.Rollback(); err != nil {
				t.Fatal(err)
			}
			mustExec(t, conn, "INSERT INTO wiremysql_text VALUES (3, 'c'); DELETE FROM wiremysql_text WHERE id = 3")
			rows, err = conn.QueryContext(ctx, "SELECT 1; SELECT 2 UNION SELECT 3")
			if n := countRows(t, rows, err); n != 3 {
				t.Fatalf("multi-statement query returned %d rows", n)
			}
			_, err = conn.ExecContext(ctx, "SELEC 1")
			var me *gomysql.MySQLError
			if !errors.As(err, &me) || me.Number != 1064 {
				t.Fatalf("syntax error: %v", err)
			}
			_, err = conn.ExecContext(ctx, "SELECT * FROM wiremysql_no_such_table")
			if !errors.As(err, &me) || me.Number != 1146 {
				t.Fatalf("missing table: %v", err)
			}
			var one int
			if err := conn.QueryRowContext(ctx, "SELECT 1").Scan(&one); err != nil || one != 1 {
				t.Fatalf("SELECT 1: %v", err)
			}
			checkRecords(t, r.Reg, sess.ID, []expect{
				{"COM_PING", session.OK, 0, ""},
				{"DROP TABLE IF EXISTS wiremysql_text", session.OK, 0, ""},
				{"CREATE TABLE wiremysql_text (id INT PRIMARY KEY, v VARCHAR(100))", session.OK, 0, ""},
				{"INSERT INTO wiremysql_text VALUES (1, 'a'), (2, 'b')", session.OK, 2, ""},
				{"SELECT id, v FROM wiremysql_text WHERE id >= 1", session.OK, 2, ""},
				{"START TRANSACTION", session.OK, 0, ""},
				{"UPDATE wiremysql_text SET v = 'c' WHERE id = 1", session.OK, 1, ""},
				{"COMMIT", session.OK, 0, ""},
				{"START TRANSACTION", session.OK, 0, ""},
				{"DELETE FROM wiremysql_text", session.OK, 2, ""},
				{"ROLLBACK", session.OK, 0, ""},
				{"INSERT INTO wiremysql_text VALUES (3, 'c'); DELETE FROM wiremysql_text WHERE id = 3", session.OK, 2, ""},
				{"SELECT 1; SELECT 2 UNION SELECT 3", session.OK, 3, ""},
				{"SELEC 1", session.Failed, -1, "1064"},
				{"SELECT * FROM wiremysql_no_such_table", session.Failed, -1, "1146"},
				{"SELECT 1", session.OK, 1, ""},
			})
			checkBytes(t, r, c, sess, up0, down0)
			if sess.User() != "sluice" || sess.Database() != "sluice" {
				t.Errorf("identity %q/%q", sess.User(), sess.Database())
			}
			mustExec(t, conn, "DROP TABLE wiremysql_text")
		})
	}
}

func TestGoDriverPrepared(t *testing.T) {
	r := startRelay(t, Options{}, session.Options{})
	c := r.openClient(t, nil)
	ctx := context.Background()
	conn, sess, up0, down0 := startSession(t, r, c)
	var v int
	if err := conn.QueryRowContext(ctx, "SELECT ? + 1", 41).Scan(&v); err != nil || v != 42 {
		t.Fatalf("SELECT ? + 1: %d, %v", v, err)
	}
	stmt, err := conn.PrepareContext(ctx, "SELECT CONCAT(?, 'x'), ?")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		var s string
		var n int
		if err := stmt.QueryRowContext(ctx, "a", i).Scan(&s, &n); err != nil || s != "ax" || n != i {
			t.Fatalf("execute %d: %q %d %v", i, s, n, err)
		}
	}
	stmt.Close()
	if _, err := conn.ExecContext(ctx, "DO ?", 1); err != nil {
		t.Fatal(err)
	}
	_, err = conn.ExecContext(ctx, "SELECT * FROM wiremysql_no_such_table WHERE a = ?", 1)
	var me *gomysql.MySQLError
	if !errors.As(err, &me) || me.Number != 1146 {
		t.Fatalf("missing table: %v", err)
	}
	if err := conn.QueryRowContext(ctx, "SELECT 1").Scan(&v); err != nil {
		t.Fatal(err)
	}
	checkRecords(t, r.Reg, sess.ID, []expect{
		{"COM_PING", session.OK, 0, ""},
		{"COM_STMT_PREPARE SELECT ? + 1", session.OK, -1, ""},
		{"SELECT ? + 1", session.OK, 1, ""},
		{"COM_STMT_PREPARE SELECT CONCAT(?, 'x'), ?", session.OK, -1, ""},
		{"SELECT CONCAT(?, 'x'), ?", session.OK, 1, ""},
		{"SELECT CONCAT(?, 'x'), ?", session.OK, 1, ""},
		{"SELECT CONCAT(?, 'x'), ?", session.OK, 1, ""},
		{"COM_STMT_PREPARE DO ?", session.OK, -1, ""},
		{"DO ?", session.OK, 0, ""},
		{"COM_STMT_PREPARE SELECT * FROM wiremysql_no_such_table WHERE a = ?", session.Failed, -1, "1146"},
		{"SELECT 1", session.OK, 1, ""},
	})
	checkBytes(t, r, c, sess, up0, down0)
}

func TestLargeResults(t *testing.T) {
	testenv.SkipShort(t, "moves a 16 MiB row and a 16 MiB query through MariaDB")
	r := startRelay(t, Options{}, session.Options{})
	r.Split = true
	c := r.openClient(t, nil)
	ctx := context.Background()
	conn, sess, up0, down0 := startSession(t, r, c)

	rows, err := conn.QueryContext(ctx, "SELECT seq, REPEAT('x', 1000) FROM seq_1_to_5000")
	if n := countRows(t, rows, err); n != 5000 {
		t.Fatalf("%d rows", n)
	}
	// A row of exactly 0xffffff payload bytes, followed by an empty packet.
	var s string
	if err := conn.QueryRowContext(ctx, "SELECT REPEAT('a', 16777211)").Scan(&s); err != nil || len(s) != 16777211 {
		t.Fatalf("16 MiB row: %d bytes, %v", len(s), err)
	}
	// A client packet of exactly 0xffffff bytes, continued by an empty one
	// (the server's max_allowed_packet is 16 MiB).
	big := "SELECT LENGTH('" + strings.Repeat("b", 16777197) + "')"
	var n int
	if err := conn.QueryRowContext(ctx, big).Scan(&n); err != nil || n != 16777197 {
		t.Fatalf("16 MiB query: %d, %v", n, err)
	}
	recs := checkRecords(t, r.Reg, sess.ID, []expect{
		{"COM_PING", session.OK, 0, ""},
		{"SELECT seq, REPEAT('x', 1000) FROM seq_1_to_5000", session.OK, 5000, ""},
		{"SELECT REPEAT('a', 16777211)", session.OK, 1, ""},
		{big[:defaultMaxSQL], session.OK, 1, ""},
	})
	if recs[3].BytesUp != int64(len(big)+1+8) {
		t.Errorf("continued query counted %d bytes, want %d", recs[3].BytesUp, len(big)+1+8)
	}
	checkBytes(t, r, c, sess, up0, down0)
}

func TestLocalInfile(t *testing.T) {
	r := startRelay(t, Options{}, session.Options{})
	c := r.openClient(t, func(cfg *gomysql.Config) { cfg.AllowAllFiles = true })
	conn, sess, up0, down0 := startSession(t, r, c)
	mustExec(t, conn, "DROP TABLE IF EXISTS wiremysql_infile")
	mustExec(t, conn, "CREATE TABLE wiremysql_infile (id INT, v VARCHAR(20))")
	defer mustExec(t, conn, "DROP TABLE wiremysql_infile")

	var data bytes.Buffer
	for i := range 20000 {
		fmt.Fprintf(&data, "%d\tvalue %d\n", i, i)
	}
	name := fmt.Sprintf("wiremysql-%s-%d", t.Name(), os.Getpid())
	gomysql.RegisterReaderHandler(name, func() io.Reader { return bytes.NewReader(data.Bytes()) })
	defer gomysql.DeregisterReaderHandler(name)
	q1 := "LOAD DATA LOCAL INFILE 'Reader::" + name + "' INTO TABLE wiremysql_infile"
	if n, _ := mustExec(t, conn, q1).RowsAffected(); n != 20000 {
		t.Fatalf("loaded %d rows", n)
	}
	file := filepath.Join(t.TempDir(), "rows.tsv")
	if err := os.WriteFile(file, []byte("1\tone\n2\ttwo\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	q2 := "LOAD DATA LOCAL INFILE '" + file + "' INTO TABLE wiremysql_infile"
	if n, _ := mustExec(t, conn, q2).RowsAffected(); n != 2 {
		t.Fatalf("loaded %d rows", n)
	}
	var n int
	if err := conn.QueryRowContext(context.Background(), "SELECT COUNT(*) FROM wiremysql_infile").Scan(&n); err != nil || n != 20002 {
		t.Fatalf("count %d, %v", n, err)
	}
	recs := checkRecords(t, r.Reg, sess.ID, []expect{
		{"COM_PING", session.OK, 0, ""},
		{"DROP TABLE IF EXISTS wiremysql_infile", session.OK, 0, ""},
		{"CREATE TABLE wiremysql_infile (id INT, v VARCHAR(20))", session.OK, 0, ""},
		{q1, session.OK, 20000, ""},
		{q2, session.OK, 2, ""},
		{"SELECT COUNT(*) FROM wiremysql_infile", session.OK, 1, ""},
	})
	if recs[3].BytesUp < int64(data.Len()) {
		t.Errorf("LOAD DATA counted %d bytes up, the file has %d", recs[3].BytesUp, data.Len())
	}
	checkBytes(t, r, c, sess, up0, down0)
}

func TestMariaDBClient(t *testing.T) {
	bin := testenv.Program(t, "mariadb")
	cfg := testenv.MySQLConfig(t)
	r := startRelay(t, Options{}, session.Options{})
	host, port, _ := net.SplitHostPort(r.Addr)
	file := filepath.Join(t.TempDir(), "rows.tsv")
	os.WriteFile(file, []byte("1\tone\n2\ttwo\n3\tthree\n"), 0o644)
	script := strings.Join([]string{
		"SELECT 1 AS one",
		"USE " + cfg.DBName,
		"SELECT DATABASE() AS db",
		"DROP TABLE IF EXISTS wiremysql_cli",
		"CREATE TABLE wiremysql_cli (id INT, v VARCHAR(20))",
		"LOAD DATA LOCAL INFILE '" + file + "' INTO TABLE wiremysql_cli",
		"SELECT COUNT(*) AS n FROM wiremysql_cli",
		"SELECT seq FROM seq_1_to_1000 WHERE seq % 100 = 0",
		"DROP TABLE wiremysql_cli",
	}, ";\n") + ";\n"
	cmd := exec.Command(bin, "--no-defaults", "--protocol=TCP", "-h", host, "-P", port,
		"-u", cfg.User, "-p"+cfg.Passwd, "--local-infile=1", "--batch", cfg.DBName)
	cmd.Stdin = strings.NewReader(script)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("mariadb: %v\n%s\n%v", err, out, r.Errors())
	}
	for _, want := range []string{"one\n1\n", "db\n" + cfg.DBName + "\n", "n\n3\n", "seq\n100\n200\n"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	var got []expect
	for _, st := range r.Reg.Recent() {
		s := st.Snapshot()
		got = append(got, expect{s.SQL, s.Outcome, s.Rows, s.Code})
	}
	want := []expect{
		{"SELECT 1 AS one", session.OK, 1, ""},
		{"COM_INIT_DB " + cfg.DBName, session.OK, 0, ""},
		{"SELECT DATABASE() AS db", session.OK, 1, ""},
		{"DROP TABLE IF EXISTS wiremysql_cli", session.OK, 0, ""},
		{"CREATE TABLE wiremysql_cli (id INT, v VARCHAR(20))", session.OK, 0, ""},
		{"LOAD DATA LOCAL INFILE '" + file + "' INTO TABLE wiremysql_cli", session.OK, 3, ""},
		{"SELECT COUNT(*) AS n FROM wiremysql_cli", session.OK, 1, ""},
		{"SELECT seq FROM seq_1_to_1000 WHERE seq % 100 = 0", session.OK, 10, ""},
		{"DROP TABLE wiremysql_cli", session.OK, 0, ""},
	}
	// The client may add statements of its own (version comment); ours
	// must all be there, in order.
	i := 0
	for _, g := range got {
		if i < len(want) && g == want[i] {
			i++
		}
	}
	if i != len(want) {
		t.Fatalf("statements:\n got %v\nwant (in order) %v", got, want)
	}
	t.Logf("mariadb client: %d statements: %v", len(got), got)
}

func TestCancel(t *testing.T) {
	cfg := testenv.MySQLConfig(t)
	r := startRelay(t, Options{KillUser: cfg.User, KillPassword: cfg.Passwd}, session.Options{})
	if !r.fe.CanCancel() {
		t.Fatal("CanCancel = false with KillUser set")
	}
	c := r.openClient(t, nil)
	ctx := context.Background()
	conn, sess, _, _ := startSession(t, r, c)
	type result struct {
		v   int
		err error
	}
	res := make(chan result, 1)
	const sleep = "SELECT SLEEP(30) /* TestCancel */"
	go func() {
		var v int
		err := conn.QueryRowContext(ctx, sleep).Scan(&v)
		res <- result{v, err}
	}()
	var st *session.Statement
	waitFor(t, "SELECT SLEEP(30) to run", func() bool {
		for _, a := range sess.Active() {
			if a.SQL == sleep {
				st = a
				return true
			}
		}
		return false
	})
	// KILL QUERY stops only a statement the server has begun: one that
	// reaches a connection still reading its command is forgotten.
	direct, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	waitFor(t, "the server to run SELECT SLEEP(30)", func() bool {
		var n int
		err := direct.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO = ?", sleep).Scan(&n)
		return err == nil && n > 0
	})
	clk := clock.Real{}
	start := clk.Now()
	if err := r.Reg.Cancel(ctx, st); err != nil {
		t.Fatal(err)
	}
	var got result
	select {
	case got = <-res:
	case <-time.After(20 * time.Second):
		t.Fatal("SELECT SLEEP(30) still running 20 s after the cancel")
	}
	elapsed := clk.Now().Sub(start)
	t.Logf("statement ended %v after Registry.Cancel; client got %d, %v", elapsed, got.v, got.err)
	snap := st.Snapshot()
	var me *gomysql.MySQLError
	switch {
	case errors.As(got.err, &me) && me.Number == 1317:
		if snap.Outcome != session.Cancelled || snap.Code != "1317" {
			t.Errorf("record %+v, want cancelled 1317", snap)
		}
	case got.err == nil && got.v == 1: // an interrupted SLEEP returning 1
		if snap.Outcome != session.OK || snap.Rows != 1 {
			t.Errorf("record %+v, want ok with 1 row", snap)
		}
	default:
		t.Fatalf("client got %d, %v", got.v, got.err)
	}
	var v int
	if err := conn.QueryRowContext(ctx, "SELECT 7").Scan(&v); err != nil || v != 7 {
		t.Fatalf("next statement: %d, %v", v, err)
	}
	if err := r.Reg.Cancel(ctx, st); !errors.Is(err, session.ErrNotRunning) {
		t.Errorf("cancel of an ended statement: %v", err)
	}
}

func TestCancelUnavailable(t *testing.T) {
	r := startRelay(t, Options{}, session.Options{})
	if r.fe.CanCancel() {
		t.Fatal("CanCancel = true without KillUser")
	}
	c := r.openClient(t, nil)
	conn, sess, _, _ := startSession(t, r, c)
	_ = conn
	if sess.Canceler() != nil {
		t.Fatal("canceler installed without KillUser")
	}
}

func TestUpstreamDown(t *testing.T) {
	dead := testenv.DeadAddr(t)
	r := startRelay(t, Options{Upstream: dead}, session.Options{})
	c := r.openClient(t, nil)
	err := c.db.PingContext(context.Background())
	var me *gomysql.MySQLError
	if !errors.As(err, &me) {
		t.Fatalf("ping: %v (%T), want *mysql.MySQLError", err, err)
	}
	if me.Number != erUpstream || !strings.Contains(me.Message, dead) || !strings.Contains(me.Message, "connection refused") {
		t.Fatalf("error %d %q: want %d naming %s and the reason", me.Number, me.Message, erUpstream, dead)
	}
	t.Logf("client saw: %v", me)
	if len(r.Reg.Sessions()) != 0 {
		t.Error("a session was registered")
	}
}

func TestOversizedClientPacket(t *testing.T) {
	r := startRelay(t, Options{MaxPacket: 1 << 20}, session.Options{})
	tests := []struct {
		name string
		pkt  []byte
		code uint16
	}{
		{"oversized", []byte{0x00, 0x00, 0x20, 0, comQuery, 'S', 'E', 'L'}, erNetPacketTooBig},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := r.openClient(t, nil)
			c.db.SetMaxOpenConns(1)
			if err := c.db.Ping(); err != nil {
				t.Fatal(err)
			}
			raw := *c.last.Load()
			if _, err := raw.Write(tt.pkt); err != nil {
				t.Fatal(err)
			}
			raw.SetReadDeadline(clock.SocketDeadline(10 * time.Second))
			reply, err := readPacket(raw, 1<<16)
			if err != nil {
				t.Fatalf("read reply: %v", err)
			}
			if reply[3] != 1 || reply[4] != 0xff || binary.LittleEndian.Uint16(reply[5:]) != tt.code || string(reply[8:13]) != "08S01" {
				t.Fatalf("reply %q", reply)
			}
			t.Logf("client got: %s", reply[13:])
			if _, err := raw.Read(make([]byte, 1)); err == nil {
				t.Fatal("connection still open")
			}
			// Another session is unaffected.
			other := r.openClient(t, nil)
			var v int
			if err := other.db.QueryRow("SELECT 5").Scan(&v); err != nil || v != 5 {
				t.Fatalf("other session: %d, %v", v, err)
			}
		})
	}
}

// TestMalformedCommandForwarded: commands MariaDB finds malformed reach it
// untouched; its ERR reaches the client, the session goes on, and the
// statement is recorded as far as it decodes.
func TestMalformedCommandForwarded(t *testing.T) {
	r := startRelay(t, Options{}, session.Options{})
	tests := []struct {
		name    string
		payload []byte
		sql     string // recorded statement; "" for a command without answer
	}{
		{"execute without an id", []byte{comStmtExecute, 1, 0, 0}, "COM_STMT_EXECUTE"},
		{"execute without flags", []byte{comStmtExecute, 0xff, 0xff, 0xff, 0x7f}, "COM_STMT_EXECUTE 2147483647"},
		{"fetch without a row count", []byte{comStmtFetch, 1, 0, 0, 0}, "COM_STMT_FETCH COM_STMT_FETCH 1"},
		{"close without an id", []byte{comStmtClose, 1}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := r.openClient(t, nil)
			conn, sess, _, _ := startSession(t, r, c)
			raw := *c.last.Load()
			if _, err := raw.Write(packet(0, tt.payload)); err != nil {
				t.Fatal(err)
			}
			if tt.sql != "" {
				raw.SetReadDeadline(clock.SocketDeadline(10 * time.Second))
				reply, err := readPacket(raw, 1<<16)
				raw.SetReadDeadline(time.Time{})
				if err != nil {
					t.Fatalf("read reply: %v (%v)", err, r.Errors())
				}
				if reply[3] != 1 || reply[4] != 0xff || bytes.Contains(reply, []byte("sluice")) {
					t.Fatalf("reply %q, want the server's ERR", reply)
				}
				t.Logf("server answered: %d %s", binary.LittleEndian.Uint16(reply[5:]), reply[7:])
			}
			var v int
			if err := conn.QueryRowContext(context.Background(), "SELECT 5").Scan(&v); err != nil || v != 5 {
				t.Fatalf("next query: %d, %v", v, err)
			}
			recs := sessionRecords(r.Reg, sess.ID)
			var got []string
			for _, s := range recs[1:] {
				got = append(got, fmt.Sprintf("%s/%v", s.SQL, s.Outcome))
			}
			want := []string{"SELECT 5/ok"}
			if tt.sql != "" {
				want = append([]string{tt.sql + "/error"}, want...)
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("statements %v, want %v", got, want)
			}
			if len(r.Errors()) != 0 {
				t.Fatal(r.Errors())
			}
		})
	}
}

// selfSigned returns a TLS server certificate for 127.0.0.1.
func selfSigned(t *testing.T) tls.Certificate { return testenv.SelfSigned(t).Server.Certificates[0] }

func TestClientTLS(t *testing.T) {
	cert := selfSigned(t)
	r := startRelay(t, Options{TLS: &tls.Config{Certificates: []tls.Certificate{cert}}}, session.Options{})
	pool := x509.NewCertPool()
	leaf, _ := x509.ParseCertificate(cert.Certificate[0])
	pool.AddCert(leaf)
	for _, useTLS := range []bool{true, false} {
		t.Run(fmt.Sprintf("tls=%v", useTLS), func(t *testing.T) {
			c := r.openClient(t, func(cfg *gomysql.Config) {
				if useTLS {
					cfg.TLS = &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}
				}
			})
			ctx := context.Background()
			conn, sess, up0, down0 := startSession(t, r, c)
			var cipher string
			var dummy string
			err := conn.QueryRowContext(ctx, "SHOW SESSION STATUS LIKE 'Ssl_cipher'").Scan(&dummy, &cipher)
			if err != nil {
				t.Fatal(err)
			}
			if cipher != "" {
				t.Errorf("upstream leg uses TLS (%q); it should be plain", cipher)
			}
			rows, err := conn.QueryContext(ctx, "SELECT seq FROM seq_1_to_100")
			if n := countRows(t, rows, err); n != 100 {
				t.Fatalf("%d rows", n)
			}
			checkRecords(t, r.Reg, sess.ID, []expect{
				{"COM_PING", session.OK, 0, ""},
				{"SHOW SESSION STATUS LIKE 'Ssl_cipher'", session.OK, 1, ""},
				{"SELECT seq FROM seq_1_to_100", session.OK, 100, ""},
			})
			if !useTLS {
				checkBytes(t, r, c, sess, up0, down0)
			}
			onlySession(t, r.Reg)
			conn.Close()
			c.db.Close()
			waitFor(t, "session to close", func() bool { return len(r.Reg.Sessions()) == 0 })
		})
	}
}

func TestUpstreamWithoutTLS(t *testing.T) {
	r := startRelay(t, Options{UpstreamTLS: &tls.Config{}}, session.Options{})
	c := r.openClient(t, nil)
	err := c.db.Ping()
	var me *gomysql.MySQLError
	if !errors.As(err, &me) || me.Number != erUpstream || !strings.Contains(me.Message, "does not offer TLS") {
		t.Fatalf("ping: %v", err)
	}
}

func TestSSLRequestRefused(t *testing.T) {
	r := startRelay(t, Options{}, session.Options{})
	nc, gr := dialGreeted(t, r.Addr)
	if gr.caps&capSSL != 0 {
		t.Fatal("greeting offers TLS with no TLS configured")
	}
	req := make([]byte, responsePrefix)
	binary.LittleEndian.PutUint32(req, capProtocol41|capSecureConnection|capSSL)
	reply := exchange(t, nc, packet(1, req))
	if reply[3] != 2 || reply[4] != 0xff || !bytes.Contains(reply, []byte("TLS is not configured")) {
		t.Fatalf("reply %q", reply)
	}
}

// dialGreeted connects a raw client to addr and reads the greeting. The
// connection's I/O times out after 10 s; the test closes it at cleanup.
func dialGreeted(t *testing.T, addr string) (net.Conn, greeting) {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(clock.SocketDeadline(10 * time.Second))
	g, err := readPacket(nc, maxHandshake)
	if err != nil {
		t.Fatal(err)
	}
	gr, err := parseGreeting(g[4:])
	if err != nil {
		t.Fatal(err)
	}
	return nc, gr
}

// exchange writes b to nc and returns the packet that answers it.
func exchange(t *testing.T, nc net.Conn, b []byte) []byte {
	t.Helper()
	if _, err := nc.Write(b); err != nil {
		t.Fatal(err)
	}
	reply, err := readPacket(nc, 1<<16)
	if err != nil {
		t.Fatal(err)
	}
	return reply
}

// TestSysbench runs sysbench's oltp_read_write (prepared statements, the
// default) through the relay and checks the statements recorded against
// the counts sysbench reports.
func TestSysbench(t *testing.T) {
	testenv.SkipShort(t, "takes 5s here")
	bin := testenv.Program(t, "sysbench")
	cfg := testenv.MySQLConfig(t)
	const db = "wiremysql_sysbench"
	admin := sql.OpenDB(mustConnector(t, cfg))
	defer admin.Close()
	if _, err := admin.Exec("CREATE DATABASE IF NOT EXISTS " + db); err != nil {
		t.Fatal(err)
	}
	r := startRelay(t, Options{}, session.Options{KeepStatements: 1 << 20})
	host, port, _ := net.SplitHostPort(r.Addr)
	sb := func(args ...string) string {
		t.Helper()
		base := []string{"oltp_read_write", "--db-driver=mysql", "--mysql-host=" + host, "--mysql-port=" + port,
			"--mysql-user=" + cfg.User, "--mysql-password=" + cfg.Passwd, "--mysql-db=" + db,
			"--tables=1", "--table-size=1000"}
		out, err := exec.Command(bin, append(base, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("sysbench %v: %v\n%s\n%v", args, err, out, r.Errors())
		}
		return string(out)
	}
	sb("cleanup")
	sb("prepare")

	// Count the statements of the run phase only.
	var mu sync.Mutex
	kinds := map[string]int{}
	var prepared = map[string]bool{}
	var executed []string
	var failed []session.Snapshot
	var bytesUp, bytesDown int64
	unwatch := r.Reg.Watch(&funcWatcher{func(e session.Event) {
		if e.Kind != session.StatementEnded {
			return
		}
		s := e.Statement.Snapshot()
		mu.Lock()
		defer mu.Unlock()
		bytesUp += s.BytesUp
		bytesDown += s.BytesDown
		if s.Outcome != session.OK {
			failed = append(failed, s)
		}
		if p, ok := strings.CutPrefix(s.SQL, "COM_STMT_PREPARE "); ok {
			prepared[p] = true
			kinds["prepare"]++
			return
		}
		executed = append(executed, s.SQL)
		switch word := strings.ToUpper(strings.Fields(s.SQL + " x")[0]); word {
		case "SELECT":
			kinds["read"]++
		case "INSERT", "UPDATE", "DELETE":
			kinds["write"]++
		default:
			kinds["other"]++
		}
	}})
	up0, down0 := r.ClientUp.Load(), r.ClientDown.Load()
	out := sb("run", "--time=5")
	unwatch()
	cu, cd := r.ClientUp.Load()-up0, r.ClientDown.Load()-down0
	sb("cleanup")
	if _, err := admin.Exec("DROP DATABASE " + db); err != nil {
		t.Fatal(err)
	}

	num := func(label string) int {
		m := regexp.MustCompile(`(?m)^\s*` + label + `:\s+(\d+)`).FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("sysbench output lacks %q:\n%s", label, out)
		}
		n, _ := strconv.Atoi(m[1])
		return n
	}
	read, write, other, total := num("read"), num("write"), num("other"), num("total")
	if errs := num("ignored errors"); errs != 0 {
		t.Logf("sysbench ignored %d errors (deadlocks between its threads)", errs)
	}
	mu.Lock()
	defer mu.Unlock()
	t.Logf("sysbench: read %d write %d other %d total %d; recorded %v; bytes %d/%d recorded, %d/%d relayed",
		read, write, other, total, kinds, bytesUp, bytesDown, cu, cd)
	if kinds["read"] != read || kinds["write"] != write || kinds["other"] != other || len(executed) != total {
		t.Errorf("recorded %v (%d executed), sysbench counted read %d write %d other %d total %d",
			kinds, len(executed), read, write, other, total)
	}
	for _, s := range executed {
		if !prepared[s] {
			t.Errorf("executed statement %q is not a prepared text", s)
			break
		}
	}
	for _, f := range failed {
		if f.Code != "1213" && f.Code != "1205" { // deadlocks and lock waits sysbench retries
			t.Errorf("failed statement %+v", f)
		}
	}
	within := func(a, b int64) bool { return a <= b && float64(b-a) <= 0.03*float64(b) }
	if !within(bytesUp, cu) || !within(bytesDown, cd) {
		t.Errorf("statements hold %d/%d bytes, the clients exchanged %d/%d", bytesUp, bytesDown, cu, cd)
	}
}

func mustConnector(t *testing.T, cfg *gomysql.Config) driver.Connector {
	t.Helper()
	c, err := gomysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// funcWatcher is a comparable session.Watcher (Registry.Watch's remover
// compares watchers, and func values are not comparable).
type funcWatcher struct{ f func(session.Event) }

func (w *funcWatcher) Observe(e session.Event) { w.f(e) }
