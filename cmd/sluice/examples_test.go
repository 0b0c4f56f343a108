package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluicelab/sluice/internal/config"
	"github.com/sluicelab/sluice/internal/testenv"
)

// TestExamples loads every configuration under examples/ with the loader
// of `sluice serve` (file, flags, environment secrets), points it at the
// test servers (each route's upstream, the listen addresses to free
// loopback ports, the catalog into a temporary directory), builds it
// with stack.New, runs the example's .sql file (if any) on its admin
// console with psql, as the example's comment says to, and queries the
// database through each route. A key the loader no longer knows, an
// option the stack refuses or a statement the console rejects fails it.
func TestExamples(t *testing.T) {
	files, err := filepath.Glob("../../examples/*.yaml")
	if err != nil || len(files) < 3 {
		t.Fatalf("examples: %v %q", err, files)
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			t.Setenv("SLUICE_ADMIN_PASSWORD", "example-admin-pw")
			t.Setenv("SLUICE_HTTP_TOKEN", "example-token")
			cfg, err := loadConfig(serveFlags{config: file})
			if err != nil {
				t.Fatalf("load: %v", err)
			}
			applyEnv(cfg)
			if len(cfg.Routes) == 0 {
				t.Fatal("no routes")
			}
			checkExampleRoutes := pointAtTestServers(t, cfg)
			st := runApp(t, cfg)
			if cfg.Catalog != "" {
				if _, err := os.Stat(filepath.Dir(cfg.Catalog)); err != nil {
					t.Fatal(err)
				}
			}
			script := strings.TrimSuffix(file, ".yaml") + ".sql"
			if _, err := os.Stat(script); err == nil {
				if st.AdminAddr() == nil {
					t.Fatalf("%s needs the admin console, which the example has not", script)
				}
				psqlFile(t, st.AdminAddr().String(), "example-admin-pw", script)
			}
			checkExampleRoutes()
		})
	}
}

// pointAtTestServers rewrites cfg's addresses for the test servers and
// returns a function that queries the database through every route.
func pointAtTestServers(t *testing.T, cfg *config.Config) (check func()) {
	t.Helper()
	if cfg.Admin.Listen != "" {
		cfg.Admin.Listen = "127.0.0.1:0"
	}
	if cfg.HTTP.Listen != "" {
		cfg.HTTP.Listen = "127.0.0.1:0"
	}
	if cfg.Catalog != "" {
		cfg.Catalog = filepath.Join(t.TempDir(), filepath.Base(cfg.Catalog))
	}
	cfg.Grace = time.Second
	var checks []func()
	for i := range cfg.Routes {
		r := &cfg.Routes[i]
		r.Listen = freeAddr(t)
		listen := r.Listen
		switch r.Protocol {
		case "postgres":
			url := testenv.PostgresURL(t)
			r.Upstream = testenv.PostgresAddr(t)
			checks = append(checks, func() {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				c, err := pgx.ConnectConfig(ctx, testenv.PostgresConfigVia(t, url, listen))
				if err != nil {
					t.Fatalf("route %s: %v", r.Name, err)
				}
				defer c.Close(ctx)
				var n int
				if err := c.QueryRow(ctx, "SELECT 41 + 1").Scan(&n); err != nil || n != 42 {
					t.Fatalf("route %s: %d, %v", r.Name, n, err)
				}
			})
		case "mysql":
			mc := testenv.MySQLConfig(t)
			r.Upstream = mc.Addr
			r.KillUser, r.KillPassword = mc.User, mc.Passwd
			checks = append(checks, func() {
				mc.Addr = listen
				db := testenv.OpenMySQL(t, mc)
				var n int
				if err := db.QueryRow("SELECT 41 + 1").Scan(&n); err != nil || n != 42 {
					t.Fatalf("route %s: %d, %v", r.Name, n, err)
				}
			})
		default:
			t.Fatalf("route %s: protocol %s has no test server", r.Name, r.Protocol)
		}
	}
	return func() {
		for _, c := range checks {
			c()
		}
	}
}

// psqlFile runs a SQL file with psql on the admin console at addr, as
// user admin, stopping at the first error.
func psqlFile(t *testing.T, addr, password, file string) {
	t.Helper()
	if out, err := runPsql(t, addr, "admin", "sluice", []string{"PGPASSWORD=" + password}, "-v", "ON_ERROR_STOP=1", "-X", "-q", "-f", file); err != nil {
		t.Fatalf("psql -f %s: %v\n%s", file, err, out)
	}
}
