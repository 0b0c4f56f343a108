package admin

import (
	"context"
	"encoding/binary"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/pgserver/pgtest"
	"github.com/sluicelab/sluice/internal/testenv"
)

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
	conn, err := pgx.Connect(ctx, c.url("admin", password))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "SHOW RULES -- "+strings.Repeat("x", maxMessage))
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "54000" {
		t.Errorf("pgx: err = %v, want SQLSTATE 54000", err)
	}
}
