package admin

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

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
