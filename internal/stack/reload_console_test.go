package stack_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluicelab/sluice/internal/config"
	"github.com/sluicelab/sluice/internal/httpapi"
	"github.com/sluicelab/sluice/internal/stack"
	"github.com/sluicelab/sluice/internal/testenv"
	"github.com/sluicelab/sluice/internal/wlm"
)

// console connects to st's admin console as admin with password; the
// test's end closes the connection.
func console(t *testing.T, st *stack.Stack, password string) *pgx.Conn {
	t.Helper()
	return testenv.ConnectPG(t, "postgres://admin:"+password+"@"+st.AdminAddr().String()+"/sluice?sslmode=disable")
}

// configStack writes body to a file in a temporary directory and builds
// a stack from it that reloads that file.
func configStack(t *testing.T, body string) (*stack.Stack, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "sluice.yaml")
	writeFile(t, path, body)
	load := func() (*config.Config, error) { return config.Load(path) }
	cfg, err := load()
	if err != nil {
		t.Fatal(err)
	}
	return newStack(t, 0, stack.Options{Config: cfg, Load: load, Logger: testenv.Logger(0)}), path
}

// execManager runs the console statements qs, in order, on st's manager;
// an error fails t.
func execManager(t *testing.T, st *stack.Stack, qs ...string) {
	t.Helper()
	for _, q := range qs {
		if _, err := st.Manager().Service().Exec(context.Background(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// newStack builds a stack of opts, allowing New timeout (0: no limit),
// and closes it when the test ends. An error of New fails t.
func newStack(t testing.TB, timeout time.Duration, opts stack.Options) *stack.Stack {
	t.Helper()
	ctx := context.Background()
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	st, err := stack.New(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// TestReloadRelisten: a route whose listen address changes is bound at
// the new address; the old one stops accepting at once, and its open
// session keeps working until the grace ends, when it is closed.
func TestReloadRelisten(t *testing.T) {
	up := testenv.Echo(t)
	a, b := testenv.DeadAddr(t), testenv.DeadAddr(t)
	st, path := configStack(t, "shutdown_grace: 500ms\nroutes:\n  - name: e\n    listen: "+a+"\n    upstream: "+up+"\n")
	old := testenv.Dial(t, a)
	if !echoes(old, "before") {
		t.Fatal("no echo before the reload")
	}
	ch, err := reloadFile(t, st, path, "shutdown_grace: 500ms\nroutes:\n  - name: e\n    listen: "+b+"\n    upstream: "+up+"\n")
	if err != nil || len(ch.Relisten) != 1 {
		t.Fatalf("reload = %+v, %v; want e relistened", ch, err)
	}
	if !echoes(old, "draining") {
		t.Fatal("the old session stopped at the reload, not at the grace's end")
	}
	if c, err := net.Dial("tcp", a); err == nil {
		c.Close()
		t.Fatal("the old address still accepts")
	}
	c := testenv.Dial(t, b)
	if !echoes(c, "new") {
		t.Fatal("no echo at the new address")
	}
	testenv.Eventually(t, 30*time.Second, "the old session to be closed", func() bool { return !echoes(old, "x") })
	if !echoes(c, "still") {
		t.Fatal("the new session ended with the old one")
	}
}

// TestReloadRefusesRestartOnlyKeys: the admin console's address cannot
// change on reload; the error says so and names the key.
func TestReloadRefusesRestartOnlyKeys(t *testing.T) {
	up := testenv.Echo(t)
	adm := testenv.DeadAddr(t)
	st, path := configStack(t, "admin:\n  listen: "+adm+"\nroutes:\n  - name: e\n    listen: 127.0.0.1:0\n    upstream: "+up+"\n")
	_, err := reloadFile(t, st, path, "admin:\n  listen: "+testenv.DeadAddr(t)+"\nroutes:\n  - name: e\n    listen: 127.0.0.1:0\n    upstream: "+up+"\n")
	if !errors.As(err, new(*stack.ConfigError)) || !strings.Contains(err.Error(), "admin.listen cannot change on reload; restart") {
		t.Fatalf("reload = %v, want a refusal naming admin.listen", err)
	}
	if st.ConfigView().Revision != 0 {
		t.Fatal("the refused reload counted")
	}
}

// TestRoutePool: a route's pool key is the pool of its sessions whose
// user has no binding; an unknown pool is a configuration error naming
// the key, at start and on reload.
func TestRoutePool(t *testing.T) {
	up := testenv.Echo(t)
	route := func(pool string) string {
		return "routes:\n  - name: e\n    listen: 127.0.0.1:0\n    upstream: " + up + "\n    pool: " + pool + "\n"
	}
	path := filepath.Join(t.TempDir(), "bad.yaml")
	writeFile(t, path, route("nosuch"))
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	_, err = stack.New(context.Background(), stack.Options{Config: cfg})
	var ce *config.Error
	if !errors.As(err, new(*stack.ConfigError)) || !errors.As(err, &ce) || ce.Key != "routes[0].pool" || ce.Value != "nosuch" {
		t.Fatalf("New with an unknown pool = %v, want an error at routes[0].pool", err)
	}

	st, path := configStack(t, "routes:\n  - name: e\n    listen: 127.0.0.1:0\n    upstream: "+up+"\n")
	execManager(t, st, "CREATE RESOURCE POOL rp1")
	if got := st.Manager().Runtime().Bind("e", "nobody").Pool; got != "" {
		t.Fatalf("pool before the reload = %q", got)
	}
	if _, err := reloadFile(t, st, path, route("rp1")); err != nil {
		t.Fatal(err)
	}
	if got := st.Manager().Runtime().Bind("e", "nobody").Pool; got != "rp1" {
		t.Fatalf("pool after the reload = %q, want rp1", got)
	}
}

// TestConfigViews: SHOW CONFIG on the console and GET /api/config show
// the configuration in force, when it was loaded and its revision,
// without its secrets; RELOAD and POST /api/reload apply a new one.
func TestConfigViews(t *testing.T) {
	up := testenv.Echo(t)
	body := func(extra string) string {
		return "admin:\n  listen: 127.0.0.1:0\n  password: consolesecret\nhttp:\n  listen: 127.0.0.1:0\n  token: tokensecret\nroutes:\n  - name: e\n    listen: 127.0.0.1:0\n    upstream: " + up + "\n" + extra
	}
	st, path := configStack(t, body(""))
	ctx := context.Background()
	conn := console(t, st, "consolesecret")
	show := func() map[string]string {
		t.Helper()
		rows, err := conn.Query(ctx, "SHOW CONFIG", pgx.QueryExecModeSimpleProtocol)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for rows.Next() {
			var k, v string
			if err := rows.Scan(&k, &v); err != nil {
				t.Fatal(err)
			}
			out[k] = v
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return out
	}
	rows := show()
	if rows["file"] != path || rows["revision"] != "0" || rows["routes.e.upstream"] != up || rows["admin.password"] != "(set)" || rows["http.token"] != "(set)" {
		t.Fatalf("SHOW CONFIG = %v", rows)
	}
	for k, v := range rows {
		if strings.Contains(v, "secret") {
			t.Errorf("SHOW CONFIG %s shows a secret: %q", k, v)
		}
	}

	writeFile(t, path, body("  - name: f\n    listen: 127.0.0.1:0\n    upstream: "+up+"\n"))
	if _, err := conn.Exec(ctx, "RELOAD", pgx.QueryExecModeSimpleProtocol); err != nil {
		t.Fatalf("RELOAD: %v", err)
	}
	if rows := show(); rows["revision"] != "1" || rows["routes.f.listen"] == "" {
		t.Fatalf("SHOW CONFIG after RELOAD = %v", rows)
	}

	api := "http://" + st.HTTPAddr().String()
	do := func(method, path string) (int, []byte) {
		t.Helper()
		req, err := http.NewRequest(method, api+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer tokensecret")
		return testenv.Fetch(t, req)
	}
	code, b := do("GET", "/api/config")
	var v config.View
	if err := json.Unmarshal(b, &v); code != 200 || err != nil || v.Revision != 1 || len(v.Routes) != 2 || v.File != path || !v.HTTPToken {
		t.Fatalf("GET /api/config = %d %s (%v)", code, b, err)
	}
	if strings.Contains(string(b), "secret") {
		t.Fatalf("GET /api/config shows a secret: %s", b)
	}

	writeFile(t, path, body("    dial_timeout: soon\n"))
	code, b = do("POST", "/api/reload")
	var e httpapi.Error
	if err := json.Unmarshal(b, &e); code != http.StatusBadRequest || err != nil || e.Code != "F0000" || !strings.Contains(e.Message, "routes[0].dial_timeout") {
		t.Fatalf("POST /api/reload of a broken file = %d %s", code, b)
	}
	_, err := conn.Exec(ctx, "RELOAD", pgx.QueryExecModeSimpleProtocol)
	if !strings.Contains(err.Error(), "routes[0].dial_timeout") || !strings.Contains(err.Error(), "F0000") {
		t.Fatalf("RELOAD of a broken file: %v", err)
	}

	writeFile(t, path, body(""))
	code, b = do("POST", "/api/reload")
	var r httpapi.ReloadResponse
	if err := json.Unmarshal(b, &r); code != 200 || err != nil || len(r.Changes.Removed) != 1 || r.Changes.Removed[0] != "f" || r.Config.Revision != 2 {
		t.Fatalf("POST /api/reload = %d %s", code, b)
	}
}

// TestReloadAudited: the settings a reload applies are in the audit
// trail as surface reload, naming who asked for it: the console's user
// and address for RELOAD, a signal for a reload with no one behind it.
func TestReloadAudited(t *testing.T) {
	up := testenv.Echo(t)
	body := func(labels string) string {
		return "admin:\n  listen: 127.0.0.1:0\n  password: consolesecret\nsettings:\n  metrics_user_labels: " + labels +
			"\nroutes:\n  - name: e\n    listen: 127.0.0.1:0\n    upstream: " + up + "\n"
	}
	st, path := configStack(t, body("1"))
	ctx := context.Background()
	conn := console(t, st, "consolesecret")
	last := func() wlm.AuditEntry {
		t.Helper()
		a := st.Manager().Service().Audit()
		if len(a) == 0 {
			t.Fatal("audit trail is empty")
		}
		return a[len(a)-1]
	}
	if e := last(); e.Surface != wlm.SurfaceConfig || e.Addr != path || !strings.Contains(e.Statement, "metrics_user_labels") {
		t.Fatalf("at start: %+v", e)
	}
	writeFile(t, path, body("2"))
	if _, err := conn.Exec(ctx, "RELOAD", pgx.QueryExecModeSimpleProtocol); err != nil {
		t.Fatalf("RELOAD: %v", err)
	}
	local := conn.PgConn().Conn().LocalAddr().String()
	if e := last(); e.Surface != wlm.SurfaceReload || e.User != "console:admin" || e.Addr != local || !strings.Contains(e.Statement, "2") {
		t.Fatalf("after RELOAD from %s: %+v", local, e)
	}
	writeFile(t, path, body("3"))
	if _, err := st.ReloadConfig(ctx); err != nil {
		t.Fatal(err)
	}
	if e := last(); e.Surface != wlm.SurfaceReload || e.User != "signal" || e.Addr != path {
		t.Fatalf("after a reload with no actor: %+v", e)
	}
}
