package pg

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/pgserver/pgtest"
	"github.com/sluicelab/sluice/internal/session"
	"github.com/sluicelab/sluice/internal/testenv"
)

// cancelBound is how long a cancelled pg_sleep(30) may take to return.
// Cancellation is typically a few milliseconds; the bound only tells a
// cancelled statement from one that ran to its end on a loaded machine.
const cancelBound = 10 * time.Second

// startSleep runs SELECT pg_sleep(30) on conn and waits until the server
// is executing it (a cancel that arrives earlier is ignored by the server).
func startSleep(t *testing.T, db *dbConfig, conn *pgx.Conn) <-chan error {
	t.Helper()
	ctx := context.Background()
	errc := make(chan error, 1)
	pid := conn.PgConn().PID()
	go func() {
		_, err := conn.Exec(ctx, "SELECT pg_sleep(30)")
		errc <- err
	}()
	admin, err := pgx.Connect(ctx, db.url)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	waitFor(t, 10*time.Second, "pg_sleep to run", func() bool {
		var n int
		err := admin.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE pid = $1 AND state = 'active' AND query LIKE 'SELECT pg_sleep%'", pid).Scan(&n)
		return err == nil && n == 1
	})
	return errc
}

func checkCancelled(t *testing.T, errc <-chan error, start time.Time) {
	t.Helper()
	var err error
	timer := clock.Real{}.NewTimer(cancelBound)
	defer timer.Stop()
	select {
	case err = <-errc:
	case <-timer.C():
		t.Fatalf("statement still running %v after the cancel", cancelBound)
	}
	t.Logf("cancelled statement returned after %v", clock.Real{}.Now().Sub(start))
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "57014" {
		t.Fatalf("err = %v, want SQLSTATE 57014", err)
	}
}

// cancelEachWay cancels a pg_sleep on conn, a session of r, twice: by
// the client's CancelRequest and by Registry.Cancel. Each must end the
// statement with 57014.
func cancelEachWay(t *testing.T, r *relay, db *dbConfig, conn *pgx.Conn, sess *session.Session) {
	t.Helper()
	ctx := context.Background()
	t.Run("client CancelRequest", func(t *testing.T) {
		errc := startSleep(t, db, conn)
		start := clock.Real{}.Now()
		if err := conn.PgConn().CancelRequest(ctx); err != nil {
			t.Fatal(err)
		}
		checkCancelled(t, errc, start)
	})
	t.Run("Registry.Cancel", func(t *testing.T) {
		errc := startSleep(t, db, conn)
		act := sess.Active()
		if len(act) != 1 || act[0].SQL != "SELECT pg_sleep(30)" {
			t.Fatalf("active statements: %v", act)
		}
		start := clock.Real{}.Now()
		if err := r.Reg.Cancel(ctx, act[0]); err != nil {
			t.Fatal(err)
		}
		checkCancelled(t, errc, start)
		if !act[0].CancelRequested() {
			t.Error("cancel not marked as requested")
		}
	})
}

func TestCancel(t *testing.T) {
	db, r := relayToDB(t)
	ctx := context.Background()
	conn := r.connect(t, db)
	sess := sessionOf(t, r, conn.PgConn())

	cancelEachWay(t, r, db, conn, sess)
	var n int
	if err := conn.QueryRow(ctx, "SELECT 41 + 1").Scan(&n); err != nil || n != 42 {
		t.Fatalf("query after cancels: %d, %v", n, err)
	}
	sts := statementsOf(r, sess, 0)
	if len(sts) != 3 {
		t.Fatalf("%d statements: %+v", len(sts), sts)
	}
	for _, st := range sts[:2] {
		if st.Outcome != session.Cancelled || st.Code != "57014" {
			t.Errorf("cancelled statement recorded as %v %q", st.Outcome, st.Code)
		}
	}
	if sts[2].Outcome != session.OK || sts[2].Rows != 1 {
		t.Errorf("last statement %+v", sts[2])
	}
	// A CancelRequest with a key nobody registered is closed unanswered.
	c := pgtest.Dial(t, r.Addr, 10*time.Second)
	c.Send(&pgproto3.CancelRequest{ProcessID: 1, SecretKey: []byte{9, 9, 9, 9}})
	if b, err := io.ReadAll(c.Conn); err != nil || len(b) != 0 {
		t.Errorf("unknown key answered %q, %v", b, err)
	}
}

func TestUpstreamDown(t *testing.T) {
	dead := testenv.DeadAddr(t)
	r := startRelay(t, dead, Options{})
	_, err := pgx.Connect(context.Background(), "postgres://u:p@"+r.Addr+"/db?sslmode=disable&connect_timeout=10")
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		t.Fatalf("err = %v, want a *pgconn.PgError", err)
	}
	want := "sluice: could not connect to upstream " + dead + ": connection refused"
	if pe.Code != "08006" || pe.Severity != "FATAL" || pe.Message != want {
		t.Errorf("got %s %s %q, want FATAL 08006 %q", pe.Severity, pe.Code, pe.Message, want)
	}
	waitFor(t, 5*time.Second, "open error", func() bool { return len(r.Errors()) == 1 })
	if n := len(r.Reg.Sessions()); n != 0 {
		t.Errorf("%d sessions left open", n)
	}
}

// selfSigned returns a TLS server config with a fresh certificate for
// 127.0.0.1 and a pool trusting it.
func selfSigned(t testing.TB) (*tls.Config, *x509.CertPool) {
	t.Helper()
	c := testenv.SelfSigned(t)
	return c.Server, c.Pool
}

func TestTLSTermination(t *testing.T) {
	db := testDB(t)
	serverTLS, pool := selfSigned(t)
	r := startRelay(t, db.addr(), Options{TLS: serverTLS})
	ctx := context.Background()
	for _, params := range []string{"sslmode=require", "sslmode=require&sslnegotiation=direct"} {
		t.Run(params, func(t *testing.T) {
			u := strings.Replace(r.url(db, ""), "sslmode=disable", params, 1)
			conn, err := pgx.Connect(ctx, u)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(ctx)
			if _, ok := conn.PgConn().Conn().(*tls.Conn); !ok {
				t.Fatalf("client connection is %T, want *tls.Conn", conn.PgConn().Conn())
			}
			if testenv.ServerSSL(t, conn) {
				t.Fatal("upstream connection uses TLS; want a plain upstream connection")
			}
			// Cancel requests come over TLS too.
			errc := startSleep(t, db, conn)
			start := clock.Real{}.Now()
			if err := conn.PgConn().CancelRequest(ctx); err != nil {
				t.Fatal(err)
			}
			checkCancelled(t, errc, start)
		})
	}

	// Direct TLS without ALPN is refused, as PostgreSQL does.
	tc, err := tls.Dial("tcp", r.Addr, &tls.Config{RootCAs: pool})
	if err != nil {
		t.Fatal(err)
	}
	reply, _ := io.ReadAll(tc)
	tc.Close()
	var e pgproto3.ErrorResponse
	if len(reply) < 5 || reply[0] != 'E' || e.Decode(reply[5:]) != nil || e.Code != "08P01" || !strings.Contains(e.Message, "ALPN") {
		t.Errorf("direct TLS without ALPN answered %q", reply)
	}

	// psql, which negotiates with SSLRequest.
	_, port, _ := strings.Cut(r.Addr, ":")
	psql := exec.Command(testenv.Program(t, "psql"), "-X", "-At", "-c", "SELECT 'tls ok'",
		"host=127.0.0.1 port="+port+" user="+db.user+" password="+db.password+" dbname="+db.database+" sslmode=require")
	if out, err := psql.CombinedOutput(); err != nil || strings.TrimSpace(string(out)) != "tls ok" {
		t.Fatalf("psql sslmode=require: %v: %s", err, out)
	}

	// A sluice whose upstream is another TLS-terminating sluice: the
	// startup and the cancel connections both negotiate TLS upstream, and
	// the cancel key passes through both unchanged.
	outer := startRelay(t, r.Addr, Options{UpstreamTLS: &tls.Config{RootCAs: pool}})
	conn := outer.connect(t, db)
	errc := startSleep(t, db, conn)
	act := sessionOf(t, outer, conn.PgConn()).Active()
	if len(act) != 1 {
		t.Fatalf("active: %v", act)
	}
	start := clock.Real{}.Now()
	if err := outer.Reg.Cancel(ctx, act[0]); err != nil {
		t.Fatal(err)
	}
	checkCancelled(t, errc, start)
	if errs := r.Errors(); len(errs) != 1 {
		t.Errorf("open errors: %v, want only the refused direct TLS", errs)
	}
	outer.checkOpenErrors(t)
}

func TestMalformedClientMessage(t *testing.T) {
	db, r := relayToDB(t)
	ctx := context.Background()
	good := r.connect(t, db)

	bad := pgtest.Hijack(t, r.url(db, ""), 10*time.Second)
	if _, err := bad.Write([]byte("\x00\x01garbage that is no message")); err != nil {
		t.Fatal(err)
	}
	pgtest.ExpectFatal(t, bad, "08P01", "invalid frontend message type 0x00")
	var n int
	if err := good.QueryRow(ctx, "SELECT 7").Scan(&n); err != nil || n != 7 {
		t.Fatalf("other session after the violation: %d, %v", n, err)
	}
}

func TestReplicationStreamIsOneStatement(t *testing.T) {
	db, r := relayToDB(t)
	ctx := context.Background()
	conn, err := pgconn.Connect(ctx, r.url(db, "replication=true"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	res, err := conn.Exec(ctx, "IDENTIFY_SYSTEM").ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	pos := string(res[0].Rows[0][2])
	sess := sessionOf(t, r, conn)

	fe := conn.Frontend()
	start := "START_REPLICATION PHYSICAL " + pos
	fe.Send(&pgproto3.Query{String: start})
	if err := fe.Flush(); err != nil {
		t.Fatal(err)
	}
	receive := func() pgproto3.BackendMessage {
		t.Helper()
		_ = conn.Conn().SetReadDeadline(clock.SocketDeadline(20 * time.Second))
		m, err := fe.Receive()
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	if m, ok := receive().(*pgproto3.CopyBothResponse); !ok {
		t.Fatalf("got %T, want CopyBothResponse", m)
	}
	// Make some WAL so the stream carries data.
	admin, err := pgx.Connect(ctx, db.url)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	table := fmt.Sprintf("sluice_wirepg_wal_%d", os.Getpid())
	// A synchronous commit flushes the WAL, which wakes the WAL sender.
	if _, err := admin.Exec(ctx, "SET synchronous_commit = on; CREATE TABLE "+table+" AS SELECT g FROM generate_series(1, 1000) g; DROP TABLE "+table); err != nil {
		t.Fatal(err)
	}
	for {
		if _, ok := receive().(*pgproto3.CopyData); ok {
			break
		}
	}
	act := sess.Active()
	if len(act) != 1 || act[0].SQL != start || act[0].BytesDown() == 0 {
		t.Fatalf("while streaming: active %v", act)
	}
	// A standby status update, then the end of the stream.
	fe.Send(&pgproto3.CopyData{Data: append([]byte{'r'}, make([]byte, 33)...)})
	fe.Send(&pgproto3.CopyDone{})
	if err := fe.Flush(); err != nil {
		t.Fatal(err)
	}
	for {
		if _, ok := receive().(*pgproto3.ReadyForQuery); ok {
			break
		}
	}
	sts := statementsOf(r, sess, 0)
	if len(sts) != 2 || sts[1].SQL != start || sts[1].Outcome != session.OK {
		t.Fatalf("statements %+v", sts)
	}
	if sts[1].BytesUp < int64(len(start)+5+39+5) {
		t.Errorf("stream statement holds %d client bytes", sts[1].BytesUp)
	}
}
