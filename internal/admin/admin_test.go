package admin

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/pgserver/pgtest"
	"github.com/sluicelab/sluice/internal/session"
	"github.com/sluicelab/sluice/internal/testenv"
	"github.com/sluicelab/sluice/internal/wlm"
)

const password = "s3cret pass"

const reference = `CREATE EXCEPT RULE bandwidth_rule1 WITH(bandwidth=128, ELAPSEDTIME=60, action='penalty');
CREATE RESOURCE POOL rp1 WITH(EXCEPT_RULE='bandwidth_rule1');
CREATE USER user1 RESOURCE POOL 'rp1' PASSWORD 'xxxxxxxx';
`

type console struct {
	mgr  *wlm.Manager
	reg  *session.Registry
	srv  *Server
	addr *net.TCPAddr
	done chan error
}

// startConsole serves a console on a loopback port until the test ends.
func startConsole(t *testing.T, o Options) *console {
	t.Helper()
	reg := session.NewRegistry(session.Options{})
	mgr, err := wlm.NewManager(wlm.ManagerOptions{Registry: reg, CatalogPath: filepath.Join(t.TempDir(), "catalog.json")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mgr.Close() })
	o.Catalog, o.Views, o.Sessions = mgr.Service(), mgr.Views(), mgr.Runtime()
	if o.Users == nil && !o.AllowNoPassword {
		o.Users = map[string]string{"admin": password}
	}
	srv, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &console{mgr: mgr, reg: reg, srv: srv, addr: ln.Addr().(*net.TCPAddr), done: make(chan error, 1)}
	go func() { c.done <- srv.Serve(context.Background(), ln) }()
	t.Cleanup(func() {
		srv.Close()
		if err := <-c.done; !errors.Is(err, ErrServerClosed) {
			t.Errorf("Serve returned %v", err)
		}
	})
	return c
}

func (c *console) url(user, pw string) string {
	return "postgres://" + user + ":" + strings.ReplaceAll(pw, " ", "%20") + "@" + c.addr.String() + "/sluice?sslmode=disable"
}

// connect opens a pgx connection to the console as admin, within 30 s;
// it closes when the test ends.
func (c *console) connect(t *testing.T) *pgx.Conn {
	t.Helper()
	return testenv.ConnectPG(t, c.url("admin", password))
}

// psql runs the real psql against the console.
func (c *console) psql(t *testing.T, pw string, args ...string) (string, string, error) {
	t.Helper()
	bin := testenv.Program(t, "psql")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	all := append([]string{"-X", "-h", c.addr.IP.String(), "-p", strconv.Itoa(c.addr.Port), "-U", "admin", "-d", "sluice", "-v", "ON_ERROR_STOP=1"}, args...)
	cmd := exec.CommandContext(ctx, bin, all...)
	cmd.Env = append(os.Environ(), "PGPASSWORD="+pw, "PGSSLMODE=prefer", "PGCONNECT_TIMEOUT=10")
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	return out.String(), errOut.String(), err
}

func TestPsqlReferenceStatements(t *testing.T) {
	c := startConsole(t, Options{})
	script := filepath.Join(t.TempDir(), "reference.sql")
	if err := os.WriteFile(script, []byte(reference), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, err := c.psql(t, password, "-f", script)
	if err != nil {
		t.Fatalf("psql: %v\n%s%s", err, out, errOut)
	}
	if want := "CREATE EXCEPT RULE\nCREATE RESOURCE POOL\nCREATE ROLE\n"; out != want {
		t.Errorf("psql output %q, want %q (stderr %q)", out, want, errOut)
	}
	out, errOut, err = c.psql(t, password, "-At", "-F", "|",
		"-c", "SHOW RULES", "-c", "SHOW POOLS", "-c", "SHOW USERS", "-c", "SHOW low_priority_bandwidth",
		"-c", "SET low_priority_bandwidth = '64MB'", "-c", "SHOW low_priority_bandwidth",
		"-c", "SELECT * FROM pg_session_wlmstat", "-c", "SELECT version()")
	if err != nil {
		t.Fatalf("psql: %v\n%s%s", err, out, errOut)
	}
	want := strings.Join([]string{
		"bandwidth_rule1|128MB/s|60s|penalty|rp1|0|-1",
		"rp1|bandwidth_rule1|1|normal||1|0|-1|0|0|0|0|0",
		"user1|rp1|0",
		"256MB/s",
		"SET",
		"64MB/s",
		"sluice dev admin console (PostgreSQL protocol 3.0)",
	}, "\n") + "\n"
	if out != want {
		t.Errorf("psql output\n%s\nwant\n%s\nstderr %s", out, want, errOut)
	}
	if got := c.mgr.Runtime().Link(wlm.DefaultLink).Config().LowPriorityBandwidth; got != 64e6 {
		t.Errorf("low_priority_bandwidth on the link = %d", got)
	}
}

func TestPsqlErrors(t *testing.T) {
	c := startConsole(t, Options{})
	_, errOut, err := c.psql(t, "wrong", "-c", "SHOW ALL")
	if err == nil || !strings.Contains(errOut, `password authentication failed for user "admin"`) {
		t.Errorf("wrong password: err %v, stderr %q", err, errOut)
	}
	_, errOut, err = c.psql(t, password, "-c", "CREATE EXCEPT RULE r WITH (bandwidth 1)")
	if err == nil || !strings.Contains(errOut, `ERROR:  syntax error at or near "1"`) || !strings.Contains(errOut, "LINE 1: CREATE EXCEPT RULE r WITH (bandwidth 1)\n                                             ^") {
		t.Errorf("syntax error: err %v, stderr %q", err, errOut)
	}
	// psql's own catalog queries fail cleanly.
	_, errOut, err = c.psql(t, password, "-c", `\dt`)
	if err == nil || !strings.Contains(errOut, "unsupported SELECT") {
		t.Errorf(`\dt: err %v, stderr %q`, err, errOut)
	}
}

func pgErr(t *testing.T, err error) *pgconn.PgError {
	t.Helper()
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		t.Fatalf("error %v (%T) is not a *pgconn.PgError", err, err)
	}
	return pe
}

func TestPgx(t *testing.T) {
	c := startConsole(t, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	_, err := pgx.Connect(ctx, c.url("admin", "wrong"))
	if pe := pgErr(t, err); pe.Code != "28P01" {
		t.Errorf("wrong password: %v", pe)
	}
	_, err = pgx.Connect(ctx, c.url("nobody", password))
	if pe := pgErr(t, err); pe.Code != "28P01" {
		t.Errorf("unknown user: %v", pe)
	}

	eachMode(t, c, func(t *testing.T, mode pgx.QueryExecMode, conn *pgx.Conn) {
		if err := conn.Ping(ctx); err != nil {
			t.Fatal(err)
		}
		name := "p_" + strings.ReplaceAll(mode.String(), " ", "_")
		for _, sql := range []string{
			"CREATE EXCEPT RULE IF_NOT_USED WITH (elapsedtime=1)",
			"CREATE RESOURCE POOL " + name + " WITH (weight=3)",
		} {
			if strings.HasPrefix(sql, "CREATE EXCEPT") && mode != pgx.QueryExecModeCacheStatement {
				continue
			}
			tag, err := conn.Exec(ctx, sql)
			if err != nil {
				t.Fatalf("%s: %v", sql, err)
			}
			if !strings.HasPrefix(tag.String(), "CREATE") {
				t.Errorf("%s: tag %q", sql, tag)
			}
		}
		// Exec through the extended protocol: pgx only uses it with
		// arguments, so run the statement as a query.
		rows, err := conn.Query(ctx, "ALTER RESOURCE POOL "+name+" WITH (weight=4)")
		if err != nil {
			t.Fatal(err)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		if rows.CommandTag().String() != "ALTER RESOURCE POOL" {
			t.Errorf("tag %q", rows.CommandTag())
		}
		var weight string
		if err := conn.QueryRow(ctx, "SELECT weight FROM pools").Scan(&weight); err != nil {
			t.Fatal(err)
		}
		if p := c.mgr.Service().Catalog().Pools[name]; p == nil || p.Weight != 4 {
			t.Errorf("pool %s = %+v", name, p)
		}
		var v string
		if err := conn.QueryRow(ctx, "SHOW network_control").Scan(&v); err != nil || v != "on" {
			t.Errorf("SHOW network_control = %q, %v", v, err)
		}
		_, err = conn.Exec(ctx, "CREATE RESOURCE POOL x WITH (weight 3)")
		if pe := pgErr(t, err); pe.Code != "42601" || pe.Position != 37 {
			t.Errorf("syntax error: %s at %d: %s", pe.Code, pe.Position, pe.Message)
		}
		// Some modes report the error from Query, others from rows.
		rows, err = conn.Query(ctx, "SELECT nope FROM pg_session_wlmstat")
		if err == nil {
			rows.Close()
			err = rows.Err()
		}
		if pe := pgErr(t, err); pe.Code != "42703" || pe.Position != 8 {
			t.Errorf("undefined column: %s at %d: %s", pe.Code, pe.Position, pe.Message)
		}
		// The connection is still usable after errors.
		if err := conn.QueryRow(ctx, "SELECT 1").Scan(&v); err != nil || v != "1" {
			t.Errorf("SELECT 1 = %q, %v", v, err)
		}
	})
	if _, ok := c.mgr.Service().Catalog().Rules["if_not_used"]; !ok {
		t.Error("rule created through pgx is missing")
	}
}

func TestShowSessionsAndStatements(t *testing.T) {
	c := startConsole(t, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn := c.connect(t)
	if _, err := conn.Exec(ctx, reference); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	s := c.reg.Open(session.Info{Route: "pg", Protocol: "postgres", Client: "10.0.0.1:5000"}, now)
	s.SetIdentity("user1", "shop", "psql")
	s.SetPool("rp1")
	st := s.Begin("COPY big FROM STDIN", now)
	st.AddUp(3 << 20)
	s.AddUp(3 << 20)
	st.Penalize("except rule bandwidth_rule1 (penalty): test")
	done := s.Begin("SELECT 1", now)
	done.End(now, session.OK, 1, "")

	check := func(sql string, want map[string]string) {
		t.Helper()
		rows, err := conn.Query(ctx, sql)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		if !rows.Next() {
			t.Fatalf("%s: no rows (%v)", sql, rows.Err())
		}
		vals, err := rows.Values()
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for i, f := range rows.FieldDescriptions() {
			got[f.Name] = fmt.Sprint(vals[i])
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s: %s = %q, want %q", sql, k, got[k], v)
			}
		}
	}
	check("SHOW SESSIONS", map[string]string{"route": "pg", "user": "user1", "database": "shop", "pool": "rp1", "client": "10.0.0.1:5000", "bytes_up": "3145728", "statements": "2", "penalised": "yes", "kind": "client"})
	check("SHOW STATEMENTS", map[string]string{"user": "user1", "pool": "rp1", "state": "running", "penalised": "yes", "class": "low", "bytes_up": "3145728", "sql": "COPY big FROM STDIN", "except_info": "except rule bandwidth_rule1 (penalty): test"})
	check("SELECT sessionid, usename AS who, status, resource_pool, priority, query FROM pg_session_wlmstat", map[string]string{"who": "user1", "status": "active", "resource_pool": "rp1", "priority": "low", "query": "COPY big FROM STDIN"})
	check("SELECT * FROM gs_wlm_session_statistics LIMIT 1", map[string]string{"usename": "user1", "status": "running", "penalized": "yes", "send_bytes": "3145728", "query": "COPY big FROM STDIN"})
	check("SELECT * FROM gs_wlm_session_history", map[string]string{"status": "ok", "rows": "1", "query": "SELECT 1"})
}

func TestTrustAndLifecycle(t *testing.T) {
	c := startConsole(t, Options{AllowNoPassword: true})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, "postgres://admin@"+c.addr.String()+"/x?sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	var v string
	if err := conn.QueryRow(ctx, "SELECT version()").Scan(&v); err != nil || !strings.HasPrefix(v, "sluice") {
		t.Errorf("version = %q, %v", v, err)
	}
	// Close ends live connections and Serve; a second Close is harmless.
	c.srv.Close()
	if err := c.srv.Close(); err != nil {
		t.Error(err)
	}
	if err := conn.Ping(ctx); err == nil {
		t.Error("connection survived Close")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.srv.Serve(ctx, ln); !errors.Is(err, ErrServerClosed) {
		t.Errorf("Serve after Close = %v", err)
	}

	// Serve ends with its context.
	srv, err := New(Options{Catalog: c.mgr.Service(), Views: c.mgr.Views(), Sessions: c.mgr.Runtime(), AllowNoPassword: true})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ln, err = net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sctx, scancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(sctx, ln) }()
	scancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Serve = %v, want context.Canceled", err)
	}

	if _, err := New(Options{Catalog: c.mgr.Service(), Views: c.mgr.Views()}); err == nil {
		t.Error("New without users or AllowNoPassword succeeded")
	}
	if _, err := New(Options{}); err == nil {
		t.Error("New without Sessions succeeded")
	}
}

func TestGarbageInput(t *testing.T) {
	c := startConsole(t, Options{})
	inputs := [][]byte{
		{0, 0, 0, 8, 0xde, 0xad, 0xbe, 0xef},        // unknown startup code
		{0xff, 0xff, 0xff, 0xff},                    // absurd length
		{0, 0, 0, 8, 4, 0xd2, 0x16, 0x2f},           // SSLRequest, then EOF
		append([]byte{0, 0, 0, 9, 0, 3, 0, 0}, 0),   // startup without a user
		[]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), // not PostgreSQL at all
	}
	for i, in := range inputs {
		nc, err := net.Dial("tcp", c.addr.String())
		if err != nil {
			t.Fatal(err)
		}
		nc.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := nc.Write(in); err != nil {
			t.Fatal(err)
		}
		nc.(*net.TCPConn).CloseWrite()
		// The server answers (or not) and closes the connection.
		buf := make([]byte, 4096)
		for {
			if _, err := nc.Read(buf); err != nil {
				if ne, ok := err.(net.Error); ok && ne.Timeout() {
					t.Errorf("input %d: connection left open", i)
				}
				break
			}
		}
		nc.Close()
	}
	// The console still works.
	c.connect(t).Close(context.Background())
}

func TestClientParamsAndNegotiation(t *testing.T) {
	c := startConsole(t, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// A client asking for protocol 3.2 is served as 3.0.
	conn := testenv.ConnectPG(t, c.url("admin", password)+"&max_protocol_version=3.2&application_name=tool")
	for _, sql := range []string{"SET extra_float_digits = 3", "SET search_path TO public", "RESET search_path", "SET TimeZone = 'UTC'"} {
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Errorf("%s: %v", sql, err)
		}
	}
	var v string
	if err := conn.QueryRow(ctx, "SHOW application_name").Scan(&v); err != nil || v != "tool" {
		t.Errorf("application_name = %q, %v", v, err)
	}
	if err := conn.QueryRow(ctx, "SHOW search_path").Scan(&v); err != nil || v != "" {
		t.Errorf("search_path = %q, %v", v, err)
	}
	// Catalog settings are the manager's.
	if _, err := conn.Exec(ctx, "SET network_control = off"); err != nil || c.mgr.Service().Catalog().Settings.NetworkControl {
		t.Errorf("SET network_control: %v", err)
	}
}

// TestTrustAcceptsOnlyAdmin: without a password the console is user
// admin's alone; another name is refused as PostgreSQL refuses a role
// that does not exist, by pgx and by psql alike.
func TestTrustAcceptsOnlyAdmin(t *testing.T) {
	c := startConsole(t, Options{AllowNoPassword: true})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, user := range []string{"anyone", "postgres", "Admin", "admin "} {
		conn, err := pgx.Connect(ctx, "postgres://"+strings.ReplaceAll(user, " ", "%20")+"@"+c.addr.String()+"/sluice?sslmode=disable")
		if err == nil {
			conn.Close(ctx)
			t.Errorf("user %q accepted without a password", user)
			continue
		}
		pe := pgErr(t, err)
		if want := `role "` + user + `" does not exist`; pe.Severity != "FATAL" || pe.Code != "28000" || pe.Message != want {
			t.Errorf("user %q: got %s %s %q, want FATAL 28000 %q", user, pe.Severity, pe.Code, pe.Message, want)
		}
	}
	conn, err := pgx.Connect(ctx, "postgres://admin@"+c.addr.String()+"/sluice?sslmode=disable")
	if err != nil {
		t.Fatalf("user admin: %v", err)
	}
	conn.Close(ctx)

	psql := func(user string) (string, error) {
		cmd := exec.CommandContext(ctx, testenv.Program(t, "psql"), "-X", "-At", "-h", c.addr.IP.String(), "-p", strconv.Itoa(c.addr.Port),
			"-U", user, "-d", "sluice", "-c", "SELECT version()")
		cmd.Env = append(os.Environ(), "PGCONNECT_TIMEOUT=10", "PGSSLMODE=prefer")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := psql("intruder"); err == nil || !strings.Contains(out, `FATAL:  role "intruder" does not exist`) {
		t.Errorf("psql -U intruder: %v\n%s", err, out)
	}
	if out, err := psql("admin"); err != nil || !strings.HasPrefix(out, "sluice") {
		t.Errorf("psql -U admin: %v\n%s", err, out)
	}
}

// TestOversizedMessage: a message announcing more than the limit gets a
// FATAL ErrorResponse 54000 before the console closes the connection,
// whether the client sent only the header (a raw socket) or the whole
// message (pgx).
func TestOversizedMessage(t *testing.T) {
	c := startConsole(t, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	pc, err := pgconn.Connect(ctx, c.url("admin", password))
	if err != nil {
		t.Fatal(err)
	}
	hj, err := pc.Hijack()
	if err != nil {
		t.Fatal(err)
	}
	nc := hj.Conn
	defer nc.Close()
	hdr := []byte{'Q', 0, 0, 0, 0}
	binary.BigEndian.PutUint32(hdr[1:], maxMessage+4+1) // a body one byte over the limit
	if _, err := nc.Write(hdr); err != nil {
		t.Fatal(err)
	}
	_ = nc.SetReadDeadline(clock.Real{}.Now().Add(10 * time.Second))
	pgtest.ExpectFatal(t, nc, "54000", strconv.Itoa(maxMessage))

	// pgx writes the whole message before it reads the answer.
	conn := c.connect(t)
	_, err = conn.Exec(ctx, "SHOW RULES -- "+strings.Repeat("x", maxMessage))
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "54000" {
		t.Errorf("pgx: err = %v, want SQLSTATE 54000", err)
	}
}
