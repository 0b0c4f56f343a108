package admin_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/testenv"
)

// TestTerminateMidCopyKeepsFrames: a session terminated while the server
// streams a COPY OUT never reads a torn frame: every message it gets is
// whole, and an ErrorResponse (FATAL 57P01) comes, if at all, as a
// message of its own after the last whole one, never inside a CopyData.
// Repeated at several points of the stream, in user space and with the
// kernel fast path (the session is paired, and held in user space by
// the stream's large chunks; the statement's cancel, sent right after the
// terminate, must not reach the client as an ERROR of its own).
func TestTerminateMidCopyKeepsFrames(t *testing.T) {
	for _, fastPath := range []string{"off", "kernel"} {
		t.Run("fast_path="+fastPath, func(t *testing.T) {
			terminateMidCopy(t, startLabWith(t, fastPath))
		})
	}
}

func terminateMidCopy(t *testing.T, l *lab) {
	adm := l.admin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// The server materialises the series before the first row: 5 million
	// rows (500 MB of COPY), 1 million with -short, far more than the
	// points of the stream where the session is terminated.
	rows := 5_000_000
	if testing.Short() {
		rows = 1_000_000
	}
	for round, after := range []int{1 << 16, 100_003, 1 << 20, 3_000_017} {
		marker := fmt.Sprintf("copy_term_%d", round)
		c := testenv.ConnectPG(t, l.pgURL)
		hj, err := c.PgConn().Hijack()
		if err != nil {
			t.Fatal(err)
		}
		conn := hj.Conn
		q, _ := (&pgproto3.Query{String: "COPY (SELECT repeat('x', 100) FROM generate_series(1, " + strconv.Itoa(rows) + ")) TO STDOUT /* " + marker + " */"}).Encode(nil)
		if _, err := conn.Write(q); err != nil {
			t.Fatal(err)
		}
		id := sessionOf(t, adm, marker)
		var got bytes.Buffer
		if _, err := io.CopyN(&got, conn, int64(after)); err != nil {
			t.Fatalf("round %d: reading the stream: %v", round, err)
		}
		if _, err := adm.Exec(ctx, fmt.Sprintf("TERMINATE SESSION %d", id)); err != nil {
			t.Fatalf("round %d: TERMINATE SESSION: %v", round, err)
		}
		conn.SetReadDeadline(clock.SocketDeadline(30 * time.Second))
		if _, err := io.Copy(&got, conn); err != nil {
			t.Fatalf("round %d: reading to the end: %v", round, err)
		}
		conn.Close()
		if !checkFrames(t, round, got.Bytes()) {
			t.Errorf("round %d: the stream of %d bytes ended without FATAL 57P01 after the message in flight", round, got.Len())
		}
	}
}

// checkFrames parses b as PostgreSQL server messages: every complete
// one but the last is CopyOutResponse or CopyData, an ErrorResponse may
// only be the last whole message, and a stream cut inside a message
// (closed without the error) holds no ErrorResponse bytes in its tail.
// It reports whether the stream ended with FATAL 57P01 after whole
// messages.
func checkFrames(t *testing.T, round int, b []byte) bool {
	t.Helper()
	var last byte
	for len(b) >= 5 {
		n := int(binary.BigEndian.Uint32(b[1:5])) + 1
		if n > len(b) {
			break
		}
		typ := b[0]
		if last == 'E' {
			t.Fatalf("round %d: a %c message after the ErrorResponse", round, typ)
		}
		switch typ {
		case 'H', 'd':
		case 'E':
			if !bytes.Contains(b[:n], []byte("57P01")) {
				t.Fatalf("round %d: ErrorResponse %q, want FATAL 57P01", round, b[:n])
			}
		default:
			t.Fatalf("round %d: unexpected %c message in a COPY OUT", round, typ)
		}
		last = typ
		b = b[n:]
	}
	if bytes.Contains(b, []byte("57P01")) || bytes.Contains(b, []byte("terminating connection")) {
		t.Fatalf("round %d: the ErrorResponse was written inside a message: %q", round, b)
	}
	return last == 'E' && len(b) == 0
}

// TestTerminateMidResultMySQL: a MySQL session terminated while its
// result set streams reads ERR 1927 as a packet of its own, in sequence
// after the server's last packet, which sluice forwards whole first:
// never a closed connection (2013), a packet out of order or a
// malformed one.
func TestTerminateMidResultMySQL(t *testing.T) {
	l := startLab(t)
	adm := l.admin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	db, err := sql.Open("mysql", l.myDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// A terminated connection read ERR 1927, which a driver takes for an
	// ordinary error: pooled, the next round would get the closed one.
	db.SetMaxIdleConns(0)
	for round := range 6 {
		conn, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		rows, err := conn.QueryContext(ctx, "SELECT REPEAT('x', 100) FROM seq_1_to_3000000")
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		var rerr error
		for rows.Next() {
			n++
			if n == 1000*(round+1) {
				var id int64
				if err := adm.QueryRow(ctx, "SELECT id FROM sessions WHERE route = 'my' ORDER BY id DESC LIMIT 1").Scan(&id); err != nil {
					t.Fatal(err)
				}
				if _, err := adm.Exec(ctx, fmt.Sprintf("TERMINATE SESSION %d", id)); err != nil {
					t.Fatalf("TERMINATE SESSION: %v", err)
				}
			}
		}
		rerr = rows.Err()
		rows.Close()
		conn.Close()
		var me *mysql.MySQLError
		if !errors.As(rerr, &me) || me.Number != 1927 {
			t.Errorf("round %d: after %d rows the client got %v, want ERR 1927", round, n, rerr)
		}
	}
}

// TestTerminateBackendOverColumn: pg_terminate_backend and
// pg_cancel_backend take a column, as PostgreSQL's do over
// pg_stat_activity: SELECT pg_terminate_backend(id) FROM sessions WHERE
// ... ends every matching session and answers a boolean a row, in the
// simple and the extended protocol.
func TestTerminateBackendOverColumn(t *testing.T) {
	l := startLab(t)
	adm := l.admin(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var clients []*pgx.Conn
	for range 3 {
		clients = append(clients, testenv.ConnectPG(t, l.pgURL))
	}
	testenv.Eventually(t, 10*time.Second, "three sessions on route pg", func() bool {
		var n int
		return adm.QueryRow(ctx, "SELECT count(*) FROM sessions WHERE route = 'pg'").Scan(&n) == nil && n == 3
	})
	// Nothing runs: each cancel answers f, and no session ends.
	rows, err := adm.Query(ctx, "SELECT pg_cancel_backend(id) AS cancelled FROM sessions WHERE route = 'pg' ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[bool])
	if err != nil || len(got) != 3 || got[0] || got[1] || got[2] || rows.FieldDescriptions()[0].Name != "cancelled" {
		t.Fatalf("pg_cancel_backend over sessions: %v, %v", got, err)
	}
	// Extended protocol (pgx prepares it): every session of the route ends.
	rows, err = adm.Query(ctx, "SELECT pg_terminate_backend(id) FROM sessions WHERE route = 'pg'")
	if err != nil {
		t.Fatal(err)
	}
	got, err = pgx.CollectRows(rows, pgx.RowTo[bool])
	if err != nil || len(got) != 3 || !got[0] || !got[1] || !got[2] {
		t.Fatalf("pg_terminate_backend over sessions: %v, %v", got, err)
	}
	for i, c := range clients {
		var n int
		if err := c.QueryRow(ctx, "SELECT 1").Scan(&n); err == nil {
			t.Errorf("client %d still served after its session was terminated", i)
		}
	}
}

// TestCancelMissingWarns: pg_cancel_backend and pg_terminate_backend of an
// id that names no session answer f with a WARNING, as PostgreSQL's do for
// a pid that is no backend, read here by psql; of a session that exists
// but runs nothing, f without one.
func TestCancelMissingWarns(t *testing.T) {
	l := startLab(t)
	for _, fn := range []string{"pg_cancel_backend", "pg_terminate_backend"} {
		out, stderr, err := l.psql(t, "-c", "SELECT "+fn+"(999999)")
		if err != nil {
			t.Fatalf("%s: %v: %s", fn, err, stderr)
		}
		if strings.TrimSpace(out) != "f" || !strings.Contains(stderr, "WARNING:  session 999999 is not a sluice session") {
			t.Errorf("%s(999999): %q, stderr %q; want f and a WARNING", fn, out, stderr)
		}
	}
	client := testenv.ConnectPG(t, l.pgURL)
	adm := l.admin(t)
	ctx := context.Background()
	if err := client.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	var id int64
	if err := adm.QueryRow(ctx, "SELECT id FROM sessions WHERE route = 'pg' LIMIT 1").Scan(&id); err != nil {
		t.Fatal(err)
	}
	out, stderr, err := l.psql(t, "-c", fmt.Sprintf("SELECT pg_cancel_backend(%d)", id))
	if err != nil || strings.TrimSpace(out) != "f" || strings.Contains(stderr, "WARNING") {
		t.Errorf("pg_cancel_backend of an idle session: %q, stderr %q, %v; want f and no warning", out, stderr, err)
	}
}
