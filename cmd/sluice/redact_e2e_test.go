package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"

	"github.com/sluicelab/sluice/internal/config"
	"github.com/sluicelab/sluice/internal/testenv"
)

// TestPasswordsHidden sends statements that set passwords through a real
// postgres route (pgx, simple and extended protocol) and a real mysql
// route (go-sql-driver/mysql) to the test servers, forwarded RESOURCE
// POOL ones and one whose password the statement-text limit cuts, and
// checks that no password shows in /api/statements, the dashboard's
// snapshot, the admin console's SHOW STATEMENTS (through psql) or the
// debug log, while the statements themselves do, with '***'.
func TestPasswordsHidden(t *testing.T) {
	httpAddr := freeAddr(t)
	ta := &testApp{admin: freeAddr(t)}
	logs := &testenv.Buffer{}
	fa := startForwardAppWith(t, func(c *config.Config) {
		c.Admin.Listen, c.Admin.Password = ta.admin, "adminpw"
		c.HTTP.Listen = httpAddr
	}, slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	ta.Stack = fa.Stack
	ctx := context.Background()

	// Every password starts with "pw-"; nothing else the test shows does.
	const p1, p2, p3 = "sluice_redact_p1", "sluice_redact_p2", "sluice_redact_p3"
	dropRoles(t, testenv.PostgresURL(t), p1, p2, p3)
	pc := testenv.ConnectPG(t, fa.routeURL(fa.pgUser, fa.pgPass))
	// The cut one: the 4096-byte limit falls inside its password.
	pad := strings.Repeat("x", 4096-len("ALTER ROLE "+p2+" /**/ PASSWORD 'pw-se"))
	long := "ALTER ROLE " + p2 + " /*" + pad + "*/ PASSWORD 'pw-secret-long'"
	for _, q := range []string{
		"CREATE USER " + p1 + " PASSWORD 'pw-secret-1'",
		"CREATE ROLE " + p2 + " WITH LOGIN ENCRYPTED PASSWORD 'pw-secret-2'",
		"ALTER ROLE " + p2 + " PASSWORD $$pw-secret-3$$",
		"ALTER ROLE " + p2 + " PASSWORD E'pw-secret-4\\'s'",
		// What psql's \password sends: the SCRAM verifier it computed.
		"ALTER USER " + p1 + " PASSWORD 'SCRAM-SHA-256$4096:pw-c2FsdA==$pw-c3RvcmVk:pw-c2VydmVy'",
		"CREATE USER " + p3 + " RESOURCE POOL 'p1' PASSWORD 'pw-secret-5'",
		long,
	} {
		if err := simple(ctx, pc, q); err != nil {
			t.Fatalf("%.60s: %v", q, err)
		}
	}
	if _, err := pc.Exec(ctx, "ALTER ROLE "+p1+" PASSWORD 'pw-secret-6'", pgx.QueryExecModeExec); err != nil {
		t.Fatalf("extended protocol: %v", err)
	}

	const m1, m2 = "sluice_redact_m1", "sluice_redact_m2"
	dropMySQLUsers(t, fa.my, m1, m2)
	rc := mysql.NewConfig()
	rc.User, rc.Passwd, rc.Net, rc.Addr = fa.my.User, fa.my.Passwd, "tcp", fa.myRoute
	my := testenv.OpenMySQL(t, rc)
	for _, q := range []string{
		"CREATE USER '" + m1 + "'@'%' IDENTIFIED BY 'pw-secret-m1'",
		"ALTER USER '" + m1 + "'@'%' IDENTIFIED BY \"pw-secret-m2\"",
		"SET PASSWORD FOR '" + m1 + "'@'%' = PASSWORD('pw-secret-m3')",
		"ALTER USER '" + m1 + "'@'%' IDENTIFIED VIA mysql_native_password USING PASSWORD('pw-secret-m4')",
		"GRANT USAGE ON *.* TO '" + m1 + "'@'%' IDENTIFIED BY 'pw-secret-m5'",
		"CREATE USER " + m2 + " RESOURCE POOL 'p1' PASSWORD 'pw-secret-m6'",
	} {
		if _, err := my.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}

	get := func(path string) string {
		resp, err := http.Get("http://" + httpAddr + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d %v", path, resp.StatusCode, err)
		}
		return string(b)
	}
	views := map[string]string{
		"/api/statements": get("/api/statements?state=all&limit=1000"),
		"/api/snapshot":   get("/api/snapshot"),
		"SHOW STATEMENTS": ta.psqlAdmin(t, "SHOW STATEMENTS"),
		"the log":         logs.String(),
	}
	if !strings.Contains(views["the log"], "admin console listening") {
		t.Fatalf("the log holds nothing of the app's: %q", views["the log"])
	}
	for name, text := range views {
		if i := strings.Index(text, "pw-"); i >= 0 {
			t.Errorf("%s shows a password: ...%s...", name, text[max(0, i-80):min(len(text), i+40)])
		}
	}
	for _, name := range []string{"/api/statements", "SHOW STATEMENTS"} {
		for _, want := range []string{
			p1 + " PASSWORD '***'", "ENCRYPTED PASSWORD '***'", "*/ PASSWORD '***'",
			m1 + "'@'%' IDENTIFIED BY '***'", "PASSWORD('***')", p3, m2,
		} {
			if !strings.Contains(views[name], want) {
				t.Errorf("%s does not show %q", name, want)
			}
		}
	}
}
