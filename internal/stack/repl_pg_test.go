package stack_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluicelab/sluice/internal/lab/pgtemp"
	"github.com/sluicelab/sluice/internal/session"
	"github.com/sluicelab/sluice/internal/stack"
	"github.com/sluicelab/sluice/internal/testenv"
)

// Replication through a postgres route: a private primary (initdb's
// defaults: wal_level=replica, max_wal_senders=10, and pg_hba lines for
// replication from 127.0.0.1 with scram-sha-256), a role with the
// REPLICATION attribute, and the real pg_basebackup, pg_verifybackup and
// a streaming standby talking to the primary through sluice.

const (
	replUser     = "replpg_rep"
	replPassword = "replpg-secret"
)

// replPrimary is a private primary and a sluice stack with route "repl"
// to it, over a link emulating 2 ms of delay and 50 MB/s.
type replPrimary struct {
	srv   *pgtemp.Server
	bin   string // the server's bin directory
	st    *stack.Stack
	route string // the route's address
	super *pgx.Conn
}

func startReplPrimary(t *testing.T, settings ...string) *replPrimary {
	t.Helper()
	bin, err := pgtemp.FindBinaries("")
	if err != nil {
		testenv.Missing(t, "%v", err)
		return nil
	}
	for _, p := range []string{"pg_basebackup", "pg_verifybackup", "pg_recvlogical"} {
		if _, err := os.Stat(filepath.Join(bin, p)); err != nil {
			testenv.Missing(t, "%s not in %s", p, bin)
			return nil
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv, err := pgtemp.Start(ctx, pgtemp.Options{Settings: settings})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	super := testenv.ConnectPG(t, srv.URL())
	for _, q := range []string{
		fmt.Sprintf("CREATE ROLE %s WITH LOGIN REPLICATION PASSWORD '%s'", replUser, replPassword),
		"CREATE TABLE replpg_rows (id int PRIMARY KEY, v text)",
		"INSERT INTO replpg_rows SELECT g, md5(g::text) FROM generate_series(1, 20000) g",
	} {
		if _, err := super.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	upstream := testenv.PostgresAddrOf(t, srv.URL())
	route := testenv.DeadAddr(t)
	st, _ := configStack(t, "catalog: \"\"\nroutes:\n"+
		"  - name: repl\n    listen: "+route+"\n    upstream: "+upstream+"\n    protocol: postgres\n    link: replpg_wan\n"+
		"links:\n  - name: replpg_wan\n    capacity: 50MB\n    delay: 2ms\n")
	return &replPrimary{srv: srv, bin: bin, st: st, route: route, super: super}
}

// waitStandbyRows waits up to a minute until the rows of replpg_rows
// on standby (their count and a digest of every id and value) are
// those on primary now; what names the wait in a failure.
func waitStandbyRows(t *testing.T, primary, standby *pgx.Conn, what string) {
	t.Helper()
	const digest = "SELECT count(*), md5(string_agg(id::text || ':' || v, ',' ORDER BY id)) FROM replpg_rows"
	ctx := context.Background()
	var wantN int
	var want string
	if err := primary.QueryRow(ctx, digest).Scan(&wantN, &want); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, what, func() bool {
		var gotN int
		var got string
		if err := standby.QueryRow(ctx, digest).Scan(&gotN, &got); err != nil {
			t.Logf("standby: %v", err)
			return false
		}
		return gotN == wantN && got == want
	})
}

// client connects to the route as the replication role, to database
// postgres, as an ordinary client.
func (p *replPrimary) client(t *testing.T) *pgx.Conn {
	t.Helper()
	host, port, _ := net.SplitHostPort(p.route)
	return testenv.ConnectPGConfig(t, mustConfig(t, fmt.Sprintf("postgres://%s:%s@%s:%s/postgres?sslmode=disable", replUser, replPassword, host, port)))
}

func mustConfig(t *testing.T, url string) *pgx.ConnConfig {
	t.Helper()
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// run runs one of the server's programs to completion, with the
// replication role's password, and returns its combined output.
func (p *replPrimary) run(t *testing.T, timeout time.Duration, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(p.bin, name), args...)
	cmd.Env = append(os.Environ(), "PGPASSWORD="+replPassword, "PGSSLMODE=disable")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// baseBackupArgs are pg_basebackup's arguments for a backup through the
// route into dir.
func (p *replPrimary) baseBackupArgs(dir string, extra ...string) []string {
	host, port, _ := net.SplitHostPort(p.route)
	return append([]string{"-h", host, "-p", port, "-U", replUser, "-D", dir, "-X", "stream", "-c", "fast", "--no-sync"}, extra...)
}

// watchKinds samples the registry every 20 ms until stop is closed and
// returns the kinds of the sessions it saw, and whether a running
// statement of a basebackup session was penalised.
func watchKinds(reg *session.Registry, stop <-chan struct{}) (wait func() (kinds map[session.Kind]bool, penalised bool)) {
	var mu sync.Mutex
	kinds := map[session.Kind]bool{}
	penalised := false
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			mu.Lock()
			for _, s := range reg.Sessions() {
				kinds[s.Kind()] = true
				if s.Kind() == session.KindBaseBackup {
					for _, st := range s.Active() {
						if snap := st.Snapshot(); snap.Penalized && strings.HasPrefix(snap.SQL, "BASE_BACKUP") {
							penalised = true
						}
					}
				}
			}
			mu.Unlock()
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	return func() (map[session.Kind]bool, bool) {
		<-done
		mu.Lock()
		defer mu.Unlock()
		return kinds, penalised
	}
}

// TestReplPGBaseBackup: pg_basebackup -X stream through a delayed,
// capacity-limited route makes a backup pg_verifybackup accepts; sluice
// saw a basebackup session (and the WAL stream's replication session).
// Then the replication user's pool gets a penalty rule and
// active_statements=1, and a client session of that user holds the one
// slot (a transaction left open): a slower backup is never held for
// admission, its BASE_BACKUP is penalised while it runs and shows as
// class low in SHOW STATEMENTS, and the backup still verifies.
func TestReplPGBaseBackup(t *testing.T) {
	testenv.SkipShort(t, "takes 6s here")
	p := startReplPrimary(t)

	dir := filepath.Join(t.TempDir(), "plain")
	stop := make(chan struct{})
	wait := watchKinds(p.st.Registry(), stop)
	began := time.Now()
	p.run(t, 2*time.Minute, "pg_basebackup", p.baseBackupArgs(dir)...)
	took := time.Since(began)
	close(stop)
	kinds, _ := wait()
	var through int64
	for _, r := range showRows(t, p.st, "SHOW LINKS") {
		if r["name"] == "replpg_wan" {
			for _, c := range []string{"bytes_high", "bytes_normal", "bytes_low"} {
				n, _ := strconv.ParseInt(r[c], 10, 64)
				through += n
			}
		}
	}
	if through == 0 {
		t.Error("no bytes through the route's link")
	}
	t.Logf("backup through a 2 ms, 50 MB/s link: %d bytes in %v (%.1f MB/s)", through, took.Round(time.Millisecond), float64(through)/took.Seconds()/1e6)
	if !kinds[session.KindBaseBackup] || !kinds[session.KindReplication] {
		t.Errorf("kinds seen %v, want basebackup and replication (the WAL stream)", kinds)
	}
	p.run(t, time.Minute, "pg_verifybackup", dir)

	execManager(t, p.st,
		"CREATE EXCEPT RULE replpg_slow WITH (elapsedtime=1, action='penalty')",
		"CREATE RESOURCE POOL replpg_pool WITH (except_rule='replpg_slow', active_statements=1)",
		"CREATE USER "+replUser+" RESOURCE POOL 'replpg_pool'",
	)
	beginSlot(t, p.client(t))
	for _, r := range showRows(t, p.st, "SHOW POOLS") {
		if r["name"] == "replpg_pool" && r["running"] != "1" {
			t.Fatalf("replpg_pool running %q, want 1 (the open transaction's slot)", r["running"])
		}
	}
	dir = filepath.Join(t.TempDir(), "penalised")
	stop = make(chan struct{})
	wait = watchKinds(p.st.Registry(), stop)
	var class string
	var classOnce sync.Once
	done := make(chan struct{})
	go func() {
		defer close(done)
		// The rule fires after 1 s; the backup, throttled by the server
		// to 8 MB/s, lasts several seconds.
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			for _, r := range showRows(t, p.st, "SHOW STATEMENTS") {
				if strings.HasPrefix(r["sql"], "BASE_BACKUP") && r["penalised"] == "yes" {
					classOnce.Do(func() { class = r["class"] })
				}
			}
		}
	}()
	p.run(t, 2*time.Minute, "pg_basebackup", p.baseBackupArgs(dir, "--max-rate=8M")...)
	close(stop)
	<-done
	kinds, penalised := wait()
	if !kinds[session.KindBaseBackup] || !penalised {
		t.Errorf("kinds seen %v, BASE_BACKUP penalised %v; want a penalised basebackup", kinds, penalised)
	}
	if class != "low" {
		t.Errorf("class of the penalised BASE_BACKUP in SHOW STATEMENTS = %q, want low", class)
	}
	p.run(t, time.Minute, "pg_verifybackup", dir)
}

// showRows runs a SHOW on the stack's console and returns its rows by
// column name.
func showRows(t *testing.T, st *stack.Stack, show string) []map[string]string {
	t.Helper()
	res, err := st.Manager().Service().Exec(context.Background(), show)
	if err != nil {
		t.Errorf("%s: %v", show, err)
		return nil
	}
	var out []map[string]string
	for _, row := range res.Rows {
		m := map[string]string{}
		for i, c := range res.Columns {
			m[c] = row[i]
		}
		out = append(out, m)
	}
	return out
}

// postgresCredential is the identity a server runs as: nil when the
// process is not root, the postgres user when it is (as pgtemp does).
func postgresCredential(t *testing.T) *syscall.Credential {
	t.Helper()
	if os.Geteuid() != 0 {
		return nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		testenv.Missing(t, "user postgres: %v", err)
		return nil
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
}

// TestReplPGStandby: a standby made with pg_basebackup -R through the
// route streams from the primary through it (primary_conninfo names the
// route); rows written on the primary appear on the standby with the
// same contents, and sluice shows the walreceiver's replication session.
func TestReplPGStandby(t *testing.T) {
	testenv.SkipShort(t, "takes 5s here")
	p := startReplPrimary(t)
	cred := postgresCredential(t)
	base, err := os.MkdirTemp("", "sluice-standby-*")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	data := filepath.Join(base, "data")
	p.run(t, 2*time.Minute, "pg_basebackup", p.baseBackupArgs(data, "-R")...)
	if conf, err := os.ReadFile(filepath.Join(data, "postgresql.auto.conf")); err != nil || !bytes.Contains(conf, []byte(p.route[strings.LastIndex(p.route, ":")+1:])) {
		t.Fatalf("postgresql.auto.conf does not point at the route %s: %v\n%s", p.route, err, conf)
	}
	if cred != nil {
		err := filepath.Walk(base, func(path string, _ os.FileInfo, err error) error {
			if err != nil {
				return err
			}
			return os.Lchown(path, int(cred.Uid), int(cred.Gid))
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	var log testenv.Buffer
	cmd := exec.Command(filepath.Join(p.bin, "postgres"), "-D", data, "-p", strconv.Itoa(port),
		"-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories="+base,
		"-c", "fsync=off", "-c", "hot_standby=on", "-c", "max_connections=200", "-c", "logging_collector=off")
	cmd.Dir = base
	cmd.Stdout, cmd.Stderr = &log, &log
	if cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
	})
	standbyURL := strings.Replace(p.srv.URL(), p.srv.URL()[strings.LastIndex(p.srv.URL(), ":"):strings.LastIndex(p.srv.URL(), "/")], ":"+strconv.Itoa(port), 1)
	var standby *pgx.Conn
	testenv.Eventually(t, time.Minute, "the standby accepts connections", func() bool {
		select {
		case <-exited:
			t.Fatalf("standby exited:\n%s", log.String())
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, standbyURL)
		if err != nil {
			return false
		}
		standby = c
		return true
	})
	t.Cleanup(func() { standby.Close(context.Background()) })
	ctx := context.Background()
	var inRecovery bool
	if err := standby.QueryRow(ctx, "SELECT pg_is_in_recovery()").Scan(&inRecovery); err != nil || !inRecovery {
		t.Fatalf("standby in recovery %v, %v", inRecovery, err)
	}

	if _, err := p.super.Exec(ctx, "INSERT INTO replpg_rows SELECT g, repeat(md5(g::text), 20) FROM generate_series(20001, 40000) g"); err != nil {
		t.Fatal(err)
	}
	if _, err := p.super.Exec(ctx, "UPDATE replpg_rows SET v = v || '!' WHERE id % 7 = 0"); err != nil {
		t.Fatal(err)
	}
	waitStandbyRows(t, p.super, standby, "the standby has the primary's rows")

	var repl []map[string]string
	for _, r := range showRows(t, p.st, "SHOW SESSIONS") {
		if r["kind"] == "replication" {
			repl = append(repl, r)
		}
	}
	if len(repl) != 1 || repl[0]["user"] != replUser {
		t.Errorf("replication sessions %v, want the walreceiver's, of %s", repl, replUser)
	}
	// The stream is one statement: START_REPLICATION, begun at its
	// Query and running while the CopyBoth stream lasts.
	var streaming []string
	var first uint64
	for _, s := range p.st.Registry().Sessions() {
		if s.Kind() != session.KindReplication {
			continue
		}
		first = s.ID
		for _, st := range s.Active() {
			streaming = append(streaming, st.Snapshot().SQL)
		}
	}
	if len(streaming) != 1 || !strings.HasPrefix(streaming[0], "START_REPLICATION") {
		t.Errorf("running statements of the replication session %q, want its START_REPLICATION", streaming)
	}
	var sender string
	if err := p.super.QueryRow(ctx, "SELECT state FROM pg_stat_replication").Scan(&sender); err != nil || sender != "streaming" {
		t.Errorf("pg_stat_replication state %q, %v; want streaming", sender, err)
	}

	// An abort rule on the replication role's pool cancels the stream;
	// the standby connects again and catches up.
	execManager(t, p.st,
		"CREATE EXCEPT RULE replpg_cut WITH (elapsedtime=1, action='abort')",
		"CREATE RESOURCE POOL replpg_repl WITH (except_rule='replpg_cut')",
		"CREATE USER "+replUser+" RESOURCE POOL 'replpg_repl'",
	)
	testenv.Eventually(t, time.Minute, "the abort rule cancels START_REPLICATION", func() bool {
		for _, st := range p.st.Registry().Recent() {
			if snap := st.Snapshot(); strings.HasPrefix(snap.SQL, "START_REPLICATION") && snap.Outcome == session.Cancelled {
				return true
			}
		}
		return false
	})
	if _, err := p.super.Exec(ctx, "DELETE FROM replpg_rows WHERE id % 3 = 0"); err != nil {
		t.Fatal(err)
	}
	waitStandbyRows(t, p.super, standby, "the standby catches up after the cancelled stream")
	testenv.Eventually(t, time.Minute, "a new replication session", func() bool {
		for _, s := range p.st.Registry().Sessions() {
			if s.Kind() == session.KindReplication && s.ID != first {
				return true
			}
		}
		return false
	})
}

// TestReplPGLogical: pg_recvlogical with test_decoding, connected through
// the route with replication=database, creates its slot and receives the
// changes made on the primary; sluice sees a logical session whose
// START_REPLICATION runs as one statement.
func TestReplPGLogical(t *testing.T) {
	testenv.SkipShort(t, "takes 3s here")
	p := startReplPrimary(t, "wal_level=logical")
	host, port, _ := net.SplitHostPort(p.route)
	common := []string{"-h", host, "-p", port, "-U", replUser, "-d", "postgres", "-S", "replpg_slot"}
	p.run(t, time.Minute, "pg_recvlogical", append(common, "--create-slot", "-P", "test_decoding")...)
	out := filepath.Join(t.TempDir(), "changes.txt")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var log testenv.Buffer
	cmd := exec.CommandContext(ctx, filepath.Join(p.bin, "pg_recvlogical"), append(common, "--start", "-f", out, "-F", "1", "--no-loop")...)
	cmd.Env = append(os.Environ(), "PGPASSWORD="+replPassword, "PGSSLMODE=disable")
	cmd.Stdout, cmd.Stderr = &log, &log
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGINT) }
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		cancel()
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			t.Errorf("pg_recvlogical did not stop:\n%s", log.String())
		}
	}()
	testenv.Eventually(t, time.Minute, "a running logical START_REPLICATION", func() bool {
		select {
		case err := <-exited:
			t.Fatalf("pg_recvlogical exited: %v\n%s", err, log.String())
		default:
		}
		for _, s := range p.st.Registry().Sessions() {
			if s.Kind() != session.KindLogical {
				continue
			}
			for _, st := range s.Active() {
				if strings.HasPrefix(st.Snapshot().SQL, "START_REPLICATION SLOT") {
					return true
				}
			}
		}
		return false
	})
	bctx := context.Background()
	if _, err := p.super.Exec(bctx, "INSERT INTO replpg_rows VALUES (90001, 'logical-one'), (90002, 'logical-two')"); err != nil {
		t.Fatal(err)
	}
	if _, err := p.super.Exec(bctx, "UPDATE replpg_rows SET v = 'logical-three' WHERE id = 90001"); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"table public.replpg_rows: INSERT: id[integer]:90001 v[text]:'logical-one'",
		"table public.replpg_rows: INSERT: id[integer]:90002 v[text]:'logical-two'",
		"table public.replpg_rows: UPDATE: id[integer]:90001 v[text]:'logical-three'",
	}
	var got []byte
	testenv.Eventually(t, time.Minute, "the changes reach pg_recvlogical", func() bool {
		got, _ = os.ReadFile(out)
		for _, w := range want {
			if !bytes.Contains(got, []byte(w)) {
				return false
			}
		}
		return true
	})
	if i, j := bytes.Index(got, []byte(want[0])), bytes.Index(got, []byte(want[2])); i > j {
		t.Errorf("changes out of order:\n%s", got)
	}
	rows := showRows(t, p.st, "SHOW SESSIONS")
	logical := 0
	for _, r := range rows {
		if r["kind"] == "logical" && r["user"] == replUser && r["database"] == "postgres" {
			logical++
		}
	}
	if logical != 1 {
		t.Errorf("SHOW SESSIONS %v: want one logical session of %s on postgres", rows, replUser)
	}
}
