package testenv

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sluicelab/sluice/internal/lab/pgtemp"
)

// MariaDB is a private MariaDB server a test started with StartMariaDB:
// its own data directory and port, stopped and removed when the test
// ends. It never touches the shared test server.
type MariaDB struct {
	// Addr is the server's TCP address, 127.0.0.1:port.
	Addr string
	// User and Password name an account with every privilege (GRANT
	// OPTION included) from any host; Password is random.
	User, Password string

	dir  string
	sock string
	cmd  *exec.Cmd
	done chan struct{} // closed when mariadbd has exited
}

// StartMariaDB initialises a data directory with mariadb-install-db and
// starts mariadbd on a free loopback port with args added to its
// command line (--log-bin, --server-id, ...). When the process is root,
// the server runs as the system user mysql, as scripts/testdb runs it.
// The server is shut down (SIGTERM, then SIGKILL after 30 s) and its
// directory removed when the test ends. A missing mariadbd or
// mariadb-install-db fails the test under CI and skips it elsewhere.
func StartMariaDB(t testing.TB, args ...string) *MariaDB {
	t.Helper()
	install, server, client := Program(t, "mariadb-install-db"), Program(t, "mariadbd"), Program(t, "mariadb")
	if install == "" || server == "" || client == "" {
		return nil
	}
	var cred *syscall.Credential
	osUser := "root"
	if os.Geteuid() == 0 {
		u, err := user.Lookup("mysql")
		if err != nil {
			Missing(t, "running as root and no system user mysql to run mariadbd as: %v", err)
			return nil
		}
		uid, _ := strconv.ParseUint(u.Uid, 10, 32)
		gid, _ := strconv.ParseUint(u.Gid, 10, 32)
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	} else if u, err := user.Current(); err == nil {
		osUser = u.Username
	}
	// A short path: the socket's must fit in 108 bytes.
	dir, err := os.MkdirTemp("", "sluice-my-*")
	if err != nil {
		t.Fatalf("mariadb directory: %v", err)
	}
	m := &MariaDB{dir: dir, sock: filepath.Join(dir, "mysql.sock"), done: make(chan struct{})}
	t.Cleanup(func() {
		m.stop()
		os.RemoveAll(dir)
	})
	data := filepath.Join(dir, "data")
	if err := os.Mkdir(data, 0o755); err != nil {
		t.Fatalf("mariadb directory: %v", err)
	}
	runUser := osUser
	if cred != nil {
		runUser = "mysql"
		for _, p := range []string{dir, data} {
			if err := os.Chown(p, int(cred.Uid), int(cred.Gid)); err != nil {
				t.Fatalf("hand %s to mysql: %v", p, err)
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, install, "--user="+runUser, "--datadir="+data,
		"--auth-root-authentication-method=socket", "--skip-test-db").CombinedOutput()
	if err != nil {
		t.Fatalf("mariadb-install-db: %v\n%s", err, tailOf(out, 2000))
	}
	port := DeadAddr(t)
	_, p, _ := net.SplitHostPort(port)
	logFile := filepath.Join(dir, "mysql.err")
	m.cmd = exec.Command(server, append([]string{"--no-defaults", "--datadir=" + data, "--port=" + p,
		"--bind-address=127.0.0.1", "--socket=" + m.sock, "--pid-file=" + filepath.Join(dir, "mysql.pid"),
		"--log-error=" + logFile, "--skip-name-resolve", "--innodb-buffer-pool-size=32M",
		"--innodb-log-file-size=16M", "--innodb-flush-log-at-trx-commit=0", "--max-connections=50"}, args...)...)
	if cred != nil {
		m.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	}
	if err := m.cmd.Start(); err != nil {
		t.Fatalf("start mariadbd: %v", err)
	}
	go func() {
		m.cmd.Wait()
		close(m.done)
	}()
	m.Addr = "127.0.0.1:" + p
	pw, err := pgtemp.Password()
	if err != nil {
		t.Fatal(err)
	}
	m.User, m.Password = "sluice", pw
	setup := fmt.Sprintf("CREATE USER '%[1]s'@'%%' IDENTIFIED BY '%[2]s';\n"+
		"CREATE USER '%[1]s'@'localhost' IDENTIFIED BY '%[2]s';\n"+
		"GRANT ALL PRIVILEGES ON *.* TO '%[1]s'@'%%' WITH GRANT OPTION;\n"+
		"GRANT ALL PRIVILEGES ON *.* TO '%[1]s'@'localhost' WITH GRANT OPTION;\n"+
		"CREATE DATABASE IF NOT EXISTS sluice;\n", m.User, m.Password)
	for {
		cmd := exec.CommandContext(ctx, client, "--no-defaults", "--socket="+m.sock, "-u"+osUser, "-e", "SELECT 1")
		if err = cmd.Run(); err == nil {
			break
		}
		select {
		case <-m.done:
			log, _ := os.ReadFile(logFile)
			t.Fatalf("mariadbd exited during start:\n%s", tailOf(log, 3000))
		case <-ctx.Done():
			log, _ := os.ReadFile(logFile)
			t.Fatalf("mariadbd did not accept connections: %v\n%s", err, tailOf(log, 3000))
		case <-time.After(200 * time.Millisecond):
		}
	}
	cmd := exec.CommandContext(ctx, client, "--no-defaults", "--socket="+m.sock, "-u"+osUser)
	cmd.Stdin = bytes.NewReader([]byte(setup))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("mariadb setup: %v\n%s", err, tailOf(out, 2000))
	}
	return m
}

// Config returns the go-sql-driver configuration of the server's
// account, database sluice, at addr ("" means m.Addr): addr may be a
// proxy in front of the server.
func (m *MariaDB) Config(addr string) *mysql.Config {
	if addr == "" {
		addr = m.Addr
	}
	c := mysql.NewConfig()
	c.User, c.Passwd, c.Net, c.Addr, c.DBName = m.User, m.Password, "tcp", addr, "sluice"
	return c
}

// DB opens a database/sql pool to the server; it closes when the test
// ends.
func (m *MariaDB) DB(t testing.TB) *sql.DB {
	t.Helper()
	db, err := sql.Open("mysql", m.Config("").FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// Log returns the tail of the server's error log, for a failure message.
func (m *MariaDB) Log() string {
	b, _ := os.ReadFile(filepath.Join(m.dir, "mysql.err"))
	return tailOf(b, 4000)
}

// stop asks mariadbd to shut down and waits for it, killing it after 30 s.
func (m *MariaDB) stop() {
	if m.cmd == nil || m.cmd.Process == nil {
		return
	}
	m.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-m.done:
	case <-time.After(30 * time.Second):
		m.cmd.Process.Kill()
		<-m.done
	}
}

func tailOf(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(bytes.TrimSpace(b))
}
