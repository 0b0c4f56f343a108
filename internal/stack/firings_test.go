package stack_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicelab/sluice/internal/testenv"
)

// TestFiringsSurviveRestart: with a catalog file, a rule's firing on a
// real PostgreSQL statement is in the firings view, in the file beside
// the catalog, and in the firings view again after the stack is closed
// and started anew on the same configuration.
func TestFiringsSurviveRestart(t *testing.T) {
	pg := testenv.PostgresConfig(t)
	dir := t.TempDir()
	addr := testenv.DeadAddr(t)
	body := fmt.Sprintf("catalog: %s\nroutes:\n  - name: fr\n    listen: %s\n    upstream: %s:%d\n    protocol: postgres\n",
		filepath.Join(dir, "catalog.json"), addr, pg.Host, pg.Port)
	st, path := configStack(t, body)
	ctx := context.Background()
	execManager(t, st,
		"CREATE EXCEPT RULE fr_slow WITH (elapsedtime=1, action=penalty)",
		"CREATE RESOURCE POOL fr_pool WITH (except_rule='fr_slow')",
		"ALTER ROUTE fr WITH (pool='fr_pool')",
		"SET except_check_period = '100ms'",
	)
	c := testenv.ConnectPGConfig(t, pgVia(t, addr, "firings_restart"))
	if _, err := c.Exec(ctx, "SELECT pg_sleep(1.5)"); err != nil {
		t.Fatal(err)
	}
	firings := func(what string, rows [][]string) {
		t.Helper()
		if len(rows) != 1 || rows[0][0] != "fr_slow" || rows[0][1] != "penalty" || !strings.Contains(rows[0][2], "pg_sleep") {
			t.Fatalf("%s: firings %v, want the one of fr_slow", what, rows)
		}
	}
	res, err := st.Manager().Service().Exec(ctx, "SELECT rule, action, query FROM firings")
	if err != nil {
		t.Fatal(err)
	}
	firings("before the restart", res.Rows)
	st.Close()
	data, err := os.ReadFile(filepath.Join(dir, "catalog.json.firings"))
	if err != nil || !strings.Contains(string(data), "fr_slow") {
		t.Fatalf("the firing file: %q, %v", data, err)
	}

	again, _ := configStack(t, mustRead(t, path))
	res, err = again.Manager().Service().Exec(ctx, "SELECT rule, action, query FROM firings")
	if err != nil {
		t.Fatal(err)
	}
	firings("after the restart", res.Rows)
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestFiringsFileUnusable: a firing history file that cannot be read
// (here a directory in its place) does not stop the stack: the history
// is kept in memory and the firings view answers.
func TestFiringsFileUnusable(t *testing.T) {
	dir := t.TempDir()
	catalog := filepath.Join(dir, "catalog.json")
	if err := os.Mkdir(catalog+".firings", 0o700); err != nil {
		t.Fatal(err)
	}
	st, _ := configStack(t, "catalog: "+catalog+"\n")
	res, err := st.Manager().Service().Exec(context.Background(), "SELECT rule FROM firings")
	if err != nil || len(res.Rows) != 0 {
		t.Fatalf("firings view: %v, %v; want it empty", res.Rows, err)
	}
	if fi, err := os.Stat(catalog + ".firings"); err != nil || !fi.IsDir() {
		t.Errorf("the directory in the file's place was touched: %v, %v", fi, err)
	}
}
