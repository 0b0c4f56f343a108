package wlm

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/link"
	"github.com/sluicelab/sluice/internal/netem"
	"github.com/sluicelab/sluice/internal/sqlstate"
	"github.com/sluicelab/sluice/internal/wlm/catalog"
	"github.com/sluicelab/sluice/internal/wlm/ddl"
)

var t0 = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

func newTestManager(t *testing.T, o ManagerOptions) *Manager {
	t.Helper()
	if o.Clock == nil {
		o.Clock = clock.NewFake(t0)
	}
	m, err := NewManager(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func mustExec(t *testing.T, m *Manager, sql string) Result {
	t.Helper()
	res, err := m.Service().Exec(context.Background(), sql)
	if err != nil {
		t.Fatalf("Exec(%q): %v", sql, err)
	}
	return res
}

// execErr runs sql and returns its *ddl.Error, failing if there is none.
func execErr(t *testing.T, m *Manager, sql string) *ddl.Error {
	t.Helper()
	_, err := m.Service().Exec(context.Background(), sql)
	var e *ddl.Error
	if !errors.As(err, &e) {
		t.Fatalf("Exec(%q) = %v, want *ddl.Error", sql, err)
	}
	return e
}

const reference = `CREATE EXCEPT RULE bandwidth_rule1 WITH(bandwidth=128, ELAPSEDTIME=60, action='penalty');
CREATE RESOURCE POOL rp1 WITH(EXCEPT_RULE='bandwidth_rule1');
CREATE USER user1 RESOURCE POOL 'rp1' PASSWORD 'xxxxxxxx';`

func TestReferenceStatements(t *testing.T) {
	m := newTestManager(t, ManagerOptions{})
	tags := []string{"CREATE EXCEPT RULE", "CREATE RESOURCE POOL", "CREATE ROLE"}
	for i, sql := range strings.Split(reference, "\n") {
		if res := mustExec(t, m, sql); res.Tag != tags[i] {
			t.Errorf("%s: tag %q, want %q", sql, res.Tag, tags[i])
		}
	}
	c := m.Service().Catalog()
	if r := c.Rules["bandwidth_rule1"]; r == nil || *r != (Rule{Bandwidth: 128, ElapsedTime: 60, Action: Penalty}) {
		t.Errorf("rule = %+v", r)
	}
	if p := c.Pools["rp1"]; p == nil || !reflect.DeepEqual(p.ExceptRules, []string{"bandwidth_rule1"}) || p.Weight != 1 || p.Priority != link.Normal {
		t.Errorf("pool = %+v", p)
	}
	if u := c.Users["user1"]; u == nil || u.Pool != "rp1" {
		t.Errorf("user = %+v", u)
	}
	if b := m.Runtime().Bind("r", "user1"); b.Pool != "rp1" || b.Class != link.Normal || b.Link != m.Runtime().Link(DefaultLink) {
		t.Errorf("Bind = %+v", b)
	}
}

func TestAdmissionOptions(t *testing.T) {
	m := newTestManager(t, ManagerOptions{})
	steps := []struct {
		sql     string
		active  int
		timeout time.Duration
		link    int
	}{
		{"CREATE RESOURCE POOL p WITH (active_statements=4, queue_timeout=30); CREATE LINK l", 4, 30 * time.Second, 0},
		{"ALTER RESOURCE POOL p WITH (active_statements=-1)", 0, 30 * time.Second, 0},
		{"ALTER RESOURCE POOL p WITH (active_statements=2, queue_timeout='250ms')", 2, 250 * time.Millisecond, 0},
		{"ALTER RESOURCE POOL p WITH (active_statements=DEFAULT, queue_timeout=-1)", 0, 0, 0},
		{"ALTER RESOURCE POOL p WITH (active_statements=unlimited, queue_timeout=0); ALTER LINK l WITH (max_active_statements=16)", 0, 0, 16},
		{"ALTER LINK l WITH (max_active_statements=-1)", 0, 0, 0},
		{"ALTER LINK l WITH (max_active_statements=5); ALTER LINK l WITH (max_active_statements=DEFAULT)", 0, 0, 0},
	}
	for _, s := range steps {
		mustExec(t, m, s.sql)
		c := m.Service().Catalog()
		p := c.Pools["p"]
		if p.ActiveStatements != s.active || p.QueueTimeout != s.timeout || c.Links["l"].MaxActiveStatements != s.link {
			t.Errorf("%s: active_statements %d, queue_timeout %v, max_active_statements %d; want %d, %v, %d",
				s.sql, p.ActiveStatements, p.QueueTimeout, c.Links["l"].MaxActiveStatements, s.active, s.timeout, s.link)
		}
	}
}

func TestRuleOptions(t *testing.T) {
	tests := []struct {
		with string
		want Rule
	}{
		{"bandwidth=128", Rule{Bandwidth: 128, ElapsedTime: Unlimited, Action: Abort}},
		{"bandwidth=-1, elapsedtime=10", Rule{Bandwidth: Unlimited, ElapsedTime: 10, Action: Abort}},
		{"bandwidth='100Mbit'", Rule{Bandwidth: 12.5, ElapsedTime: Unlimited, Action: Abort}},
		{"bandwidth=0.5, elapsedtime='2m', action=PENALTY", Rule{Bandwidth: 0.5, ElapsedTime: 120, Action: Penalty}},
		{"elapsedtime=0", Rule{Bandwidth: Unlimited, ElapsedTime: 0, Action: Abort}},
		{"elapsedtime=5, cputime=-1, memsize=-1", Rule{Bandwidth: Unlimited, ElapsedTime: 5, Action: Abort}},
		{"blocktime=10", Rule{Bandwidth: Unlimited, ElapsedTime: Unlimited, BlockTime: 10, Action: Abort}},
		{"blocktime='1.5m', action=penalty", Rule{Bandwidth: Unlimited, ElapsedTime: Unlimited, BlockTime: 90, Action: Penalty}},
		{"blocktime=0.25, bandwidth=-1, elapsedtime=-1", Rule{Bandwidth: Unlimited, ElapsedTime: Unlimited, BlockTime: 0.25, Action: Abort}},
		{"elapsedtime=5, blocktime=-1", Rule{Bandwidth: Unlimited, ElapsedTime: 5, Action: Abort}},
	}
	for i, tt := range tests {
		m := newTestManager(t, ManagerOptions{})
		mustExec(t, m, "CREATE EXCEPT RULE r WITH ("+tt.with+")")
		if got := *m.Service().Catalog().Rules["r"]; got != tt.want {
			t.Errorf("%d: WITH (%s) = %+v, want %+v", i, tt.with, got, tt.want)
		}
	}
}

func TestExecErrors(t *testing.T) {
	setup := reference + `
CREATE LINK wan WITH (delay='5ms');
CREATE EXCEPT RULE other WITH (elapsedtime=1);`
	tests := []struct {
		sql  string
		code string
		pos  int
		msg  string
	}{
		{"CREATE EXCEPT RULE bandwidth_rule1 WITH (bandwidth=1)", sqlstate.DuplicateObject, 20, `except rule "bandwidth_rule1" already exists`},
		{"CREATE RESOURCE POOL rp1", sqlstate.DuplicateObject, 22, `resource pool "rp1" already exists`},
		{"CREATE USER user1 RESOURCE POOL 'rp1'", sqlstate.DuplicateObject, 13, `user "user1" already exists`},
		{"CREATE LINK default", sqlstate.DuplicateObject, 13, `link "default" already exists`},
		{"ALTER EXCEPT RULE nope WITH (bandwidth=1)", sqlstate.UndefinedObject, 19, `except rule "nope" does not exist`},
		{"ALTER RESOURCE POOL nope WITH (weight=2)", sqlstate.UndefinedObject, 21, `resource pool "nope" does not exist`},
		{"ALTER USER nobody PASSWORD 'x'", sqlstate.UndefinedObject, 12, `user "nobody" does not exist`},
		{"ALTER USER nobody RESOURCE POOL 'nopool'", sqlstate.UndefinedObject, 33, `resource pool "nopool" does not exist`},
		{"ALTER LINK nope WITH (delay='1ms')", sqlstate.UndefinedObject, 12, `link "nope" does not exist`},
		{"DROP EXCEPT RULE nope", sqlstate.UndefinedObject, 18, `except rule "nope" does not exist`},
		{"CREATE USER u2 RESOURCE POOL 'rp9'", sqlstate.UndefinedObject, 30, `resource pool "rp9" does not exist`},
		{"CREATE RESOURCE POOL p2 WITH (except_rule='other,missing')", sqlstate.UndefinedObject, 43, `except rule "missing" does not exist`},
		{"CREATE EXCEPT RULE r WITH (bandwidth='12 parsecs')", sqlstate.InvalidParameterValue, 38, `invalid value for parameter "bandwidth": "12 parsecs"`},
		{"CREATE EXCEPT RULE r WITH (bandwidth=-2)", sqlstate.InvalidParameterValue, 38, `invalid value for parameter "bandwidth": "-2"`},
		{"CREATE EXCEPT RULE r WITH (elapsedtime='soon')", sqlstate.InvalidParameterValue, 40, `"elapsedtime": "soon"`},
		{"CREATE EXCEPT RULE r WITH (elapsedtime=1, action='kill')", sqlstate.InvalidParameterValue, 50, `"action": "kill"`},
		{"CREATE EXCEPT RULE r WITH (action='penalty')", sqlstate.InvalidParameterValue, 20, `except rule "r" has no threshold`},
		{"CREATE EXCEPT RULE r WITH (cputime=10)", sqlstate.FeatureNotSupported, 28, "sluice cannot measure CPU time"},
		{"CREATE EXCEPT RULE r WITH (elapsedtime=1, spillsize=100)", sqlstate.FeatureNotSupported, 43, "cannot measure spill to disk"},
		{"CREATE EXCEPT RULE r WITH (blocktime=0)", sqlstate.InvalidParameterValue, 38, `invalid value for parameter "blocktime": "0"`},
		{"CREATE EXCEPT RULE r WITH (blocktime='soon')", sqlstate.InvalidParameterValue, 38, `"blocktime": "soon"`},
		{"CREATE EXCEPT RULE r WITH (blocktime=-1)", sqlstate.InvalidParameterValue, 20, `except rule "r" has no threshold`},
		{"CREATE EXCEPT RULE r WITH (blocktime=5, elapsedtime=1)", sqlstate.InvalidParameterValue, 20, "a rule with blocktime sets neither"},
		{"ALTER EXCEPT RULE bandwidth_rule1 WITH (blocktime=5)", sqlstate.InvalidParameterValue, 19, "a rule with blocktime sets neither"},
		{"CREATE RESOURCE POOL p WITH (active_statements=0)", sqlstate.InvalidParameterValue, 48, `invalid value for parameter "active_statements": "0"`},
		{"CREATE RESOURCE POOL p WITH (active_statements=many)", sqlstate.InvalidParameterValue, 48, `"active_statements": "many"`},
		{"CREATE RESOURCE POOL p WITH (active_statements=-2)", sqlstate.InvalidParameterValue, 48, `"active_statements": "-2"`},
		{"CREATE RESOURCE POOL p WITH (queue_timeout='soon')", sqlstate.InvalidParameterValue, 44, `"queue_timeout": "soon"`},
		{"CREATE LINK l WITH (max_active_statements=0)", sqlstate.InvalidParameterValue, 43, `"max_active_statements": "0"`},
		{"CREATE EXCEPT RULE r WITH (speed=5)", sqlstate.InvalidParameterValue, 28, `unrecognized except rule parameter "speed"`},
		{"CREATE RESOURCE POOL p WITH (weight=0)", sqlstate.InvalidParameterValue, 37, `"weight": "0"`},
		{"CREATE RESOURCE POOL p WITH (network_priority='urgent')", sqlstate.InvalidParameterValue, 47, `"network_priority": "urgent"`},
		{"CREATE RESOURCE POOL p WITH (mem_percent=20)", sqlstate.FeatureNotSupported, 30, "mem_percent is not supported"},
		{"CREATE RESOURCE POOL p WITH (delay='10')", sqlstate.InvalidParameterValue, 36, `"delay": "10"`},
		{"CREATE LINK l WITH (capacity='fast')", sqlstate.InvalidParameterValue, 30, `"capacity": "fast"`},
		{"CREATE LINK l WITH (loss='200%')", sqlstate.InvalidParameterValue, 26, `"loss": "200%"`},
		{"CREATE LINK l WITH (distribution=weird)", sqlstate.InvalidParameterValue, 34, `"distribution": "weird"`},
		{"CREATE LINK l WITH (colour=red)", sqlstate.InvalidParameterValue, 21, `unrecognized link parameter "colour"`},
		{"DROP EXCEPT RULE bandwidth_rule1", sqlstate.DependentObjectsStillExist, 18, "other objects depend on it"},
		{"DROP RESOURCE POOL rp1", sqlstate.DependentObjectsStillExist, 20, "other objects depend on it"},
		{"DROP LINK default", sqlstate.DependentObjectsStillExist, 11, "always exists"},
		{"SET nonsense = 1", sqlstate.UndefinedObject, 5, `unrecognized configuration parameter "nonsense"`},
		{"SET low_priority_bandwidth = 'lots'", sqlstate.InvalidParameterValue, 30, `"low_priority_bandwidth": "lots"`},
		{"SET network_control = maybe", sqlstate.InvalidParameterValue, 23, `"network_control": "maybe"`},
		{"SET except_check_period = '1ms'", sqlstate.InvalidParameterValue, 27, `"except_check_period": "1ms"`},
		{"SET low_priority_yield = '0%'", sqlstate.InvalidParameterValue, 26, `"low_priority_yield": "0%"`},
		{"SET low_priority_yield = '150%'", sqlstate.InvalidParameterValue, 26, `"low_priority_yield": "150%"`},
		{"SHOW nonsense", sqlstate.UndefinedObject, 6, `unrecognized configuration parameter "nonsense"`},
		{"RESET nonsense", sqlstate.UndefinedObject, 7, `unrecognized configuration parameter`},
		{"SELECT * FROM nowhere", sqlstate.UndefinedTable, 15, `relation "nowhere"`},
		{"SELECT * FROM pg_catalog.pg_class", sqlstate.FeatureNotSupported, 15, `relation "pg_class"`},
		{"SELECT nope FROM pg_session_wlmstat", sqlstate.UndefinedColumn, 8, `column "nope" does not exist`},
		{"SELECT version(), now()", sqlstate.FeatureNotSupported, 1, "statement not supported"}, // a ddl.Query: the console's SQL engine runs it
		{"SELECT * FROM pg_session_wlmstat WHERE usename = 'u'", sqlstate.FeatureNotSupported, 1, "statement not supported"},
		{"GRANT ALL ON x TO y", sqlstate.InsufficientPrivilege, 1, `only read (GRANT)`},
	}
	for _, tt := range tests {
		m := newTestManager(t, ManagerOptions{})
		mustExec(t, m, setup)
		before := m.Service().Catalog()
		v := m.Runtime().Version()
		e := execErr(t, m, tt.sql)
		if e.Code != tt.code || e.Position != tt.pos || !strings.Contains(e.Message, tt.msg) {
			t.Errorf("%s\n got %s %q at %d\nwant %s %q at %d", tt.sql, e.Code, e.Message, e.Position, tt.code, tt.msg, tt.pos)
		}
		if m.Service().Catalog() != before || m.Runtime().Version() != v {
			t.Errorf("%s: the failed statement changed the catalog", tt.sql)
		}
	}
}

func TestAtomicAlter(t *testing.T) {
	m := newTestManager(t, ManagerOptions{})
	mustExec(t, m, "CREATE RESOURCE POOL p WITH (weight=2, delay='1ms')")
	before := *m.Service().Catalog().Pools["p"]
	// The first option is valid, the second is not: neither applies.
	e := execErr(t, m, "ALTER RESOURCE POOL p WITH (weight=7, delay='x')")
	if e.Code != sqlstate.InvalidParameterValue {
		t.Fatalf("code %s", e.Code)
	}
	if got := *m.Service().Catalog().Pools["p"]; !reflect.DeepEqual(got, before) {
		t.Errorf("pool after failed ALTER = %+v, want %+v", got, before)
	}
	// Several statements in one Exec stop at the first error; the ones
	// before it stay applied, each atomically.
	_, err := m.Service().Exec(context.Background(), "ALTER RESOURCE POOL p WITH (weight=3); ALTER RESOURCE POOL p WITH (weight=-5)")
	if err == nil {
		t.Fatal("no error")
	}
	if w := m.Service().Catalog().Pools["p"].Weight; w != 3 {
		t.Errorf("weight = %d, want 3", w)
	}
}

func TestDropCascadeAndIfExists(t *testing.T) {
	m := newTestManager(t, ManagerOptions{})
	mustExec(t, m, reference)
	mustExec(t, m, "CREATE EXCEPT RULE r2 WITH (elapsedtime=30); ALTER RESOURCE POOL rp1 WITH (except_rule='bandwidth_rule1, r2')")
	if got := m.Service().Catalog().Pools["rp1"].ExceptRules; !reflect.DeepEqual(got, []string{"bandwidth_rule1", "r2"}) {
		t.Fatalf("rules = %v", got)
	}
	res := mustExec(t, m, "DROP EXCEPT RULE bandwidth_rule1 CASCADE")
	if res.Tag != "DROP EXCEPT RULE" || len(res.Notices) != 1 {
		t.Errorf("result %+v", res)
	}
	if got := m.Service().Catalog().Pools["rp1"].ExceptRules; !reflect.DeepEqual(got, []string{"r2"}) {
		t.Errorf("rules after cascade = %v", got)
	}
	res = mustExec(t, m, "DROP RESOURCE POOL rp1 CASCADE")
	if m.Service().Catalog().Users["user1"] != nil || m.Service().Catalog().Pools["rp1"] != nil {
		t.Error("pool or its user survived DROP ... CASCADE")
	}
	vDrop := m.Runtime().Version()
	res = mustExec(t, m, "DROP USER IF EXISTS ghost, other")
	if m.Runtime().Version() != vDrop {
		t.Error("a DROP IF EXISTS that dropped nothing bumped Version")
	}
	if res.Tag != "DROP ROLE" || len(res.Notices) != 2 || !strings.Contains(res.Notices[0], `user "ghost" does not exist, skipping`) {
		t.Errorf("result %+v", res)
	}
	mustExec(t, m, "CREATE RESOURCE POOL p; CREATE USER a RESOURCE POOL p; ALTER USER a RESOURCE POOL 'default_pool'")
	if u := m.Service().Catalog().Users["a"]; u.Pool != "" {
		t.Errorf("user a pool %q after binding to default_pool", u.Pool)
	}
	mustExec(t, m, "DROP RESOURCE POOL p; DROP USER a")
	v := m.Runtime().Version()
	res = mustExec(t, m, "CREATE EXCEPT RULE IF NOT EXISTS r2 WITH (bandwidth=1)")
	if len(res.Notices) != 1 || !strings.Contains(res.Notices[0], `except rule "r2" already exists, skipping`) || m.Service().Catalog().Rules["r2"].ElapsedTime != 30 {
		t.Errorf("CREATE IF NOT EXISTS of an existing rule: %+v", res)
	}
	if m.Runtime().Version() != v {
		t.Error("a CREATE IF NOT EXISTS that did nothing bumped Version")
	}
	mustExec(t, m, "CREATE LINK IF NOT EXISTS wan WITH (delay='1ms')")
	if m.Runtime().Link("wan") == nil {
		t.Error("CREATE LINK IF NOT EXISTS did not create the link")
	}
}

func TestSettings(t *testing.T) {
	m := newTestManager(t, ManagerOptions{})
	show := func(name string) string {
		t.Helper()
		res := mustExec(t, m, "SHOW "+name)
		if len(res.Rows) != 1 || len(res.Columns) != 1 || res.Columns[0] != name {
			t.Fatalf("SHOW %s = %+v", name, res)
		}
		return res.Rows[0][0]
	}
	def := m.Runtime().Link(DefaultLink)
	if got := def.Config(); got.LowPriorityBandwidth != 256_000_000 || got.LowPriorityQueueBytes != 64<<10 || got.LowYieldPercent != 10 || !got.NetworkControl {
		t.Errorf("default link config %+v", got)
	}
	for _, tt := range []struct{ set, name, want string }{
		{"SET low_priority_bandwidth = '64MB'", "low_priority_bandwidth", "64MB/s"},
		{"SET low_priority_bandwidth TO 0", "low_priority_bandwidth", "unlimited"},
		{"SET cluster_low_priority_bandwidth = '30MB'", "cluster_low_priority_bandwidth", "30MB/s"},
		{"SET cluster_low_priority_bandwidth = unlimited", "cluster_low_priority_bandwidth", "unlimited"},
		{"SET low_priority_queue_bytes = '1MiB'", "low_priority_queue_bytes", "1MiB"},
		{"SET low_priority_queue_bytes = -1", "low_priority_queue_bytes", "-1"},
		{"SET low_priority_yield = '10%'", "low_priority_yield", "10%"},
		{"SET low_priority_yield = 100", "low_priority_yield", "100%"},
		{"SET low_priority_yield TO DEFAULT", "low_priority_yield", "10%"},
		{"SET network_control = off", "network_control", "off"},
		{"SET except_check_period = 2", "except_check_period", "2s"},
		{"SET except_check_period TO '500ms'", "except_check_period", "500ms"},
		{"SET except_check_period TO DEFAULT", "except_check_period", "5s"},
	} {
		if res := mustExec(t, m, tt.set); res.Tag != "SET" {
			t.Errorf("%s: tag %q", tt.set, res.Tag)
		}
		if got := show(tt.name); got != tt.want {
			t.Errorf("after %s: SHOW %s = %q, want %q", tt.set, tt.name, got, tt.want)
		}
	}
	mustExec(t, m, "CREATE LINK wan; SET low_priority_bandwidth = '64MB'")
	for _, name := range []string{DefaultLink, "wan"} {
		if got := m.Runtime().Link(name).Config(); got.LowPriorityBandwidth != 64e6 || got.NetworkControl {
			t.Errorf("link %s after SET: %+v", name, got)
		}
	}
	if res := mustExec(t, m, "RESET network_control"); res.Tag != "RESET" || show("network_control") != "on" {
		t.Error("RESET network_control did not restore on")
	}
	mustExec(t, m, "RESET ALL")
	if m.Service().Catalog().Settings != catalog.DefaultSettings() {
		t.Errorf("settings after RESET ALL: %+v", m.Service().Catalog().Settings)
	}
	res := mustExec(t, m, "SHOW ALL")
	if len(res.Rows) != len(catalog.SettingNames()) || res.Columns[0] != "name" {
		t.Errorf("SHOW ALL = %+v", res)
	}
	if err := m.Service().Set(context.Background(), "Network_Control", "off"); err != nil || m.Service().Catalog().Settings.NetworkControl {
		t.Errorf("Set: %v", err)
	}
}

func TestLinksRuntime(t *testing.T) {
	m := newTestManager(t, ManagerOptions{})
	v := m.Runtime().Version()
	mustExec(t, m, "CREATE LINK wan WITH (capacity='1Gbit', queue_size='1MiB', delay='10ms', jitter='1ms', distribution=normal, correlation=0.25, rate='100MB', burst='64KiB', loss='0.1%', window='4MiB', seed=42, rto='300ms')")
	if m.Runtime().Version() <= v {
		t.Error("Version did not increase")
	}
	wan := m.Runtime().Link("wan")
	if wan == nil {
		t.Fatal("no runtime link wan")
	}
	if got := wan.Config(); got.Capacity != 125_000_000 || got.QueueSize != 1<<20 {
		t.Errorf("wan config %+v", got)
	}
	mustExec(t, m, "ALTER LINK wan WITH (capacity='2Gbit')")
	if m.Runtime().Link("wan") != wan || wan.Config().Capacity != 250_000_000 {
		t.Errorf("ALTER LINK did not reconfigure the same link: %+v", wan.Config())
	}
	if err := m.Runtime().SetRoute("pg", Route{Link: "wan", Protocol: "postgres", CanCancel: true}); err != nil {
		t.Fatal(err)
	}
	b := m.Runtime().Bind("pg", "anyone")
	want := netem.Params{Delay: 10 * time.Millisecond, Jitter: time.Millisecond, Distribution: netem.Normal, Correlation: 0.25,
		Rate: 100e6, Burst: 64 << 10, Loss: 0.001, RTO: 300 * time.Millisecond, Window: 4 << 20, Seed: 42}
	if b.Link != wan || b.Up != want || b.Down != want {
		t.Errorf("Bind = %+v\nwant Up %+v", b, want)
	}
	e := execErr(t, m, "DROP LINK wan")
	if e.Code != sqlstate.DependentObjectsStillExist || !strings.Contains(e.Message, `route "pg"`) {
		t.Errorf("DROP LINK used by a route: %v", e)
	}
	m.Runtime().RemoveRoute("pg")
	mustExec(t, m, "DROP LINK wan")
	if m.Runtime().Link("wan") != nil {
		t.Error("link survived DROP LINK")
	}
	res := mustExec(t, m, "SHOW LINKS")
	if len(res.Rows) != 1 || res.Rows[0][0] != DefaultLink || res.Rows[0][1] != "unlimited" {
		t.Errorf("SHOW LINKS = %+v", res)
	}
	if err := m.Service().DefineLink(context.Background(), "lab", map[string]string{"Delay": "2ms", "capacity": "10MB"}); err != nil {
		t.Fatal(err)
	}
	if err := m.Service().DefineLink(context.Background(), "lab", map[string]string{"delay": "3ms"}); err != nil {
		t.Fatal(err)
	}
	if d := m.Service().Catalog().Links["lab"]; d.Capacity != 10e6 || *d.Emulation.Delay != Duration(3*time.Millisecond) {
		t.Errorf("lab = %+v", d)
	}
	if err := m.Service().DefineLink(context.Background(), "lab", map[string]string{"delay": "x"}); err == nil {
		t.Error("DefineLink accepted a bad delay")
	}
}

func TestForwardUser(t *testing.T) {
	m := newTestManager(t, ManagerOptions{})
	mustExec(t, m, "CREATE RESOURCE POOL p1; CREATE RESOURCE POOL \"P2\"")
	ctx := context.Background()
	steps := []struct {
		sql      string
		d        ddl.Dialect
		rest     string
		took     bool
		code     string // SQLSTATE of the error, "" for none
		user     string // user whose binding is checked after the step
		pool     string // that user's pool; "-" for no binding at all
		position int    // error position
	}{
		{"SELECT 1", ddl.PostgreSQL, "SELECT 1", false, "", "u1", "-", 0},
		{"CREATE USER u1 RESOURCE POOL 'p1' PASSWORD 'pw'", ddl.PostgreSQL, "CREATE USER u1 PASSWORD 'pw'", true, "", "u1", "p1", 0},
		// Again: the database decides whether the user exists, the
		// binding is simply replaced.
		{"CREATE USER u1 RESOURCE POOL P1", ddl.PostgreSQL, "CREATE USER u1", true, "", "u1", "p1", 0},
		{"ALTER USER u1 RESOURCE POOL \"P2\"", ddl.PostgreSQL, "ALTER USER u1", true, "", "u1", "P2", 0},
		{"ALTER USER u1 RESOURCE POOL default_pool", ddl.PostgreSQL, "ALTER USER u1", true, "", "u1", "", 0},
		{"ALTER USER u9 RESOURCE POOL 'nope' LOGIN", ddl.PostgreSQL, "", true, sqlstate.UndefinedObject, "u9", "-", 29},
		{"ALTER USER U3 RESOURCE POOL 'p1' PASSWORD 'x'", ddl.MySQL, "ALTER USER U3 IDENTIFIED BY 'x'", true, "", "U3", "p1", 0},
	}
	for _, s := range steps {
		rest, took, err := m.Service().ForwardUser(ctx, s.sql, s.d)
		var code string
		var pos int
		if err != nil {
			var e *ddl.Error
			if !errors.As(err, &e) {
				t.Fatalf("ForwardUser(%q) error %T, want *ddl.Error", s.sql, err)
			}
			code, pos = e.Code, e.Position
		}
		if rest != s.rest || took != s.took || code != s.code || pos != s.position {
			t.Fatalf("ForwardUser(%q) = %q, %v, %v; want %q, %v, %s at %d", s.sql, rest, took, err, s.rest, s.took, s.code, s.position)
		}
		u := m.Service().Catalog().Users[s.user]
		switch {
		case s.pool == "-" && u != nil:
			t.Fatalf("after %q: user %s bound to %q, want no binding", s.sql, s.user, u.Pool)
		case s.pool != "-" && (u == nil || u.Pool != s.pool):
			t.Fatalf("after %q: user %s = %+v, want pool %q", s.sql, s.user, u, s.pool)
		}
	}
	if e := execErr(t, m, "DROP RESOURCE POOL p1"); e.Code != sqlstate.DependentObjectsStillExist {
		t.Fatalf("DROP of a pool a forwarded binding uses: %v", e)
	}
}

func TestBindLayers(t *testing.T) {
	m := newTestManager(t, ManagerOptions{})
	mustExec(t, m, `CREATE LINK wan WITH (delay='10ms', jitter='2ms', rate='1MB');
CREATE RESOURCE POOL slow WITH (delay='50ms', network_priority=low, weight=4);
CREATE RESOURCE POOL vip WITH (network_priority=high);
CREATE USER u1 RESOURCE POOL 'slow';
CREATE USER u2 RESOURCE POOL 'vip'`)
	route := map[string]string{"jitter": "5ms", "loss": "1%"}
	v := m.Runtime().Version()
	if err := m.Runtime().SetRoute("r", Route{Link: "wan", Protocol: "postgres", Emulation: route, Pool: "vip", CanCancel: true}); err != nil {
		t.Fatal(err)
	}
	if m.Runtime().Version() <= v {
		t.Error("SetRoute did not bump Version")
	}
	tests := []struct {
		user  string
		pool  string
		class link.Class
		want  netem.Params
	}{
		{"u1", "slow", link.Low, netem.Params{Delay: 50 * time.Millisecond, Jitter: 5 * time.Millisecond, Rate: 1e6, Loss: 0.01}},
		{"u2", "vip", link.High, netem.Params{Delay: 10 * time.Millisecond, Jitter: 5 * time.Millisecond, Rate: 1e6, Loss: 0.01}},
		{"stranger", "vip", link.High, netem.Params{Delay: 10 * time.Millisecond, Jitter: 5 * time.Millisecond, Rate: 1e6, Loss: 0.01}},
	}
	for _, tt := range tests {
		b := m.Runtime().Bind("r", tt.user)
		if b.Pool != tt.pool || b.Class != tt.class || b.Up != tt.want || b.Down != tt.want || b.Link != m.Runtime().Link("wan") {
			t.Errorf("Bind(r, %s) = %+v", tt.user, b)
		}
	}
	// Unknown routes use the default link, no route options.
	if b := m.Runtime().Bind("nope", "stranger"); b.Pool != "" || b.Class != link.Normal || !b.Up.IsZero() || b.Link != m.Runtime().Link(DefaultLink) {
		t.Errorf("Bind(nope) = %+v", b)
	}
	if got := m.Runtime().Link("wan").Config().Weights["slow"]; got != 4 {
		t.Errorf("pool weight on link = %d", got)
	}
	// Unsetting a pool option falls back to the route's / link's.
	v = m.Runtime().Version()
	mustExec(t, m, "ALTER RESOURCE POOL slow WITH (delay=DEFAULT)")
	if m.Runtime().Version() <= v {
		t.Error("ALTER did not bump Version")
	}
	if b := m.Runtime().Bind("r", "u1"); b.Up.Delay != 10*time.Millisecond {
		t.Errorf("delay after unset = %v", b.Up.Delay)
	}
	for _, r := range []Route{{Link: "nope"}, {Pool: "nope"}, {Emulation: map[string]string{"delay": "soon"}}, {Emulation: map[string]string{"speed": "1"}}} {
		var e *ddl.Error
		want := sqlstate.UndefinedObject
		if r.Emulation != nil {
			want = sqlstate.InvalidParameterValue
		}
		if err := m.Runtime().SetRoute("bad", r); !errors.As(err, &e) || e.Code != want || !strings.HasPrefix(e.Message, "route bad: ") {
			t.Errorf("SetRoute(%+v) = %v", r, err)
		}
	}
	if _, ok := m.Runtime().Routes()["bad"]; ok {
		t.Error("a refused route was added")
	}
	e := execErr(t, m, "DROP RESOURCE POOL vip CASCADE")
	if e.Code != sqlstate.DependentObjectsStillExist || !strings.Contains(e.Message, `route "r"`) {
		t.Errorf("dropping a route's default pool: %v", e)
	}
	if _, err := catalog.ParseEmulation(map[string]string{"speed": "1"}); err == nil {
		t.Error("ParseEmulation accepted an unknown option")
	}
}

// distinctEmulation returns an Emulation with every option set to a
// pointer of its own, so that a result shows where each option came from.
func distinctEmulation() Emulation {
	var e Emulation
	v := reflect.ValueOf(&e).Elem()
	for i := range v.NumField() {
		v.Field(i).Set(reflect.New(v.Field(i).Type().Elem()))
	}
	return e
}

func TestEmulationOver(t *testing.T) {
	base, top := distinctEmulation(), distinctEmulation()
	if got := base.Over(Emulation{}); got != base {
		t.Errorf("Over(zero) = %+v, want the receiver %+v", got, base)
	}
	if got := (Emulation{}).Over(top); got != top {
		t.Errorf("zero.Over(o) = %+v, want o %+v", got, top)
	}
	if got := base.Over(top); got != top {
		t.Errorf("Over(all set) = %+v, want o %+v", got, top)
	}
	// One option set in o replaces that option only. Loss and LossModel
	// are one option, loss: either replaces both.
	typ := reflect.TypeFor[Emulation]()
	for i := range typ.NumField() {
		var o Emulation
		reflect.ValueOf(&o).Elem().Field(i).Set(reflect.ValueOf(top).Field(i))
		want := base
		reflect.ValueOf(&want).Elem().Field(i).Set(reflect.ValueOf(top).Field(i))
		switch typ.Field(i).Name {
		case "Loss":
			want.LossModel = nil
		case "LossModel":
			want.Loss = nil
		}
		if got := base.Over(o); got != want {
			t.Errorf("Over(only %s) = %+v, want %+v", typ.Field(i).Name, got, want)
		}
	}
}

func TestEmulationParams(t *testing.T) {
	tests := []struct {
		e    Emulation
		want netem.Params
	}{
		{Emulation{}, netem.Params{}},
		{Emulation{Delay: new(Duration(10 * time.Millisecond))}, netem.Params{Delay: 10 * time.Millisecond}},
		{Emulation{Jitter: new(Duration(time.Millisecond))}, netem.Params{Jitter: time.Millisecond}},
		{Emulation{Distribution: new(netem.Normal)}, netem.Params{Distribution: netem.Normal}},
		{Emulation{Correlation: new(0.25)}, netem.Params{Correlation: 0.25}},
		{Emulation{Rate: new(int64(100e6))}, netem.Params{Rate: 100e6}},
		{Emulation{Burst: new(int64(64 << 10))}, netem.Params{Burst: 64 << 10}},
		{Emulation{Loss: new(0.001)}, netem.Params{Loss: 0.001}},
		{Emulation{LossModel: &catalog.LossModel{Kind: netem.GilbertElliott, P: 0.01, R: 0.3, BadLoss: 0.5, GoodLoss: 0.001}},
			netem.Params{LossModel: netem.LossModel{Kind: netem.GilbertElliott, P: 0.01, R: 0.3, BadLoss: 0.5, GoodLoss: 0.001}}},
		{Emulation{RTO: new(Duration(300 * time.Millisecond))}, netem.Params{RTO: 300 * time.Millisecond}},
		{Emulation{Window: new(int64(4 << 20))}, netem.Params{Window: 4 << 20}},
		{Emulation{Seed: new(int64(42))}, netem.Params{Seed: 42}},
	}
	if n := reflect.TypeFor[Emulation]().NumField(); len(tests) != n+1 {
		t.Fatalf("%d cases for %d options: every option needs one", len(tests)-1, n)
	}
	for _, tt := range tests {
		if got := tt.e.Params(); got != tt.want {
			t.Errorf("%+v.Params() = %+v, want %+v", tt.e, got, tt.want)
		}
	}
	// Options set to their zero value give zero parameters.
	if got := distinctEmulation().Params(); got != (netem.Params{}) {
		t.Errorf("Params of zero-valued options = %+v", got)
	}
}

func TestAbortNeedsCancel(t *testing.T) {
	m := newTestManager(t, ManagerOptions{})
	if err := m.Runtime().SetRoute("my", Route{Protocol: "mysql", CanCancel: false}); err != nil {
		t.Fatal(err)
	}
	// Binding a user to an abort pool is accepted: the user need not come
	// through the route that cannot cancel. The console says so.
	mustExec(t, m, "CREATE EXCEPT RULE slow WITH (elapsedtime=60); CREATE RESOURCE POOL p WITH (except_rule='slow')")
	res := mustExec(t, m, "CREATE USER u RESOURCE POOL 'p'")
	if len(res.Notices) != 1 || !strings.Contains(res.Notices[0], `through route "my" (mysql) cannot have them cancelled`) || !strings.Contains(res.Notices[0], "kill_user") {
		t.Errorf("binding notices %q, want one naming route my and kill_user", res.Notices)
	}
	// A route whose own default pool aborts is certain to need the
	// cancel: making that pool's rule abort is refused.
	mustExec(t, m, "ALTER EXCEPT RULE slow WITH (action=penalty)")
	if err := m.Runtime().SetRoute("my", Route{Protocol: "mysql", Pool: "p"}); err != nil {
		t.Fatal(err)
	}
	if e := execErr(t, m, "ALTER EXCEPT RULE slow WITH (action=abort)"); e.Code != sqlstate.FeatureNotSupported || !strings.Contains(e.Message, `route "my" (mysql), whose sessions default to that pool`) {
		t.Errorf("making the default pool of a route that cannot cancel abort: %v, want 0A000", e)
	}
	if err := m.Runtime().SetRoute("my", Route{Protocol: "mysql"}); err != nil {
		t.Fatal(err)
	}
	mustExec(t, m, "ALTER EXCEPT RULE slow WITH (action=abort)")
	// Once the route can cancel, abort rules are accepted.
	if err := m.Runtime().SetRoute("my", Route{Protocol: "mysql", CanCancel: true}); err != nil {
		t.Fatal(err)
	}
	mustExec(t, m, "ALTER EXCEPT RULE slow WITH (action=abort)")
	// A situation created by SetRoute is tolerated: unrelated DDL works.
	if err := m.Runtime().SetRoute("tcp", Route{Protocol: "tcp"}); err != nil {
		t.Fatal(err)
	}
	mustExec(t, m, "SET network_control = off; CREATE RESOURCE POOL q")
}

// TestBlockTimeAbortNeedsNoCancel: the abort of a blocktime rule ends a
// wait in the proxy, so it is accepted on a route that cannot cancel.
func TestBlockTimeAbortNeedsNoCancel(t *testing.T) {
	m := newTestManager(t, ManagerOptions{})
	if err := m.Runtime().SetRoute("my", Route{Protocol: "mysql", CanCancel: false}); err != nil {
		t.Fatal(err)
	}
	mustExec(t, m, "CREATE EXCEPT RULE queued WITH (blocktime=10, action=abort); CREATE RESOURCE POOL p WITH (except_rule='queued', active_statements=2); CREATE USER u RESOURCE POOL 'p'")
	mustExec(t, m, "CREATE EXCEPT RULE slow WITH (elapsedtime=60)")
	// An elapsedtime abort beside it may need the route's cancel, for a
	// bound user who comes through it: accepted, and said.
	if res := mustExec(t, m, "ALTER RESOURCE POOL p WITH (except_rule='queued,slow')"); len(res.Notices) != 1 || !strings.Contains(res.Notices[0], `"slow"`) {
		t.Errorf("an elapsedtime abort beside a blocktime one: notices %q, want one naming slow", res.Notices)
	}
}

func TestShowLists(t *testing.T) {
	m := newTestManager(t, ManagerOptions{})
	mustExec(t, m, reference)
	if err := m.Runtime().SetRoute("pg", Route{Protocol: "postgres", CanCancel: true}); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		sql  string
		cols string
		rows int
		row0 string
	}{
		{"SHOW POOLS", "name,except_rule,weight,network_priority,emulation,users,sessions,active_statements,queue_timeout,running,waiting,idle_in_transaction,idle_holders", 1, "rp1,bandwidth_rule1,1,normal,,1,0,-1,0,0,0,0,0"},
		{"SHOW RULES", "name,bandwidth,elapsedtime,action,pools,firings,blocktime", 1, "bandwidth_rule1,128MB/s,60s,penalty,rp1,0,-1"},
		{"SHOW USERS", "user,resource_pool,sessions", 1, "user1,rp1,0"},
		{"SHOW ROUTES", "name,protocol,link,pool,can_cancel,emulation", 1, "pg,postgres,default,,yes,"},
		{"SHOW LINKS", "name,capacity,queue_size,emulation,routes,bytes_high,bytes_normal,bytes_low,waiting,queued,max_active_statements", 1, "default,unlimited,default,,pg,0,0,0,0,0,-1"},
		{"SHOW SESSIONS", "id,route,user,database,pool,client,bytes_up,bytes_down,unsent_bytes,statements,started,penalised,kind,coordinator,state,slot,idle_in_transaction", 0, ""},
		{"SHOW STATEMENTS", "id,session,route,user,database,pool,state,penalised,class,elapsed,bytes_up,bytes_down,bandwidth_mbps,rows,sql,except_info,block_time,parent,total_bytes_up,total_bytes_down,nodes", 0, ""},
		{"SELECT version()", "version", 1, "sluice dev admin console (PostgreSQL protocol 3.0)"},
		{"SELECT 1 AS one, 'x'", "one,?column?", 1, "1,x"},
		{"SELECT current_setting('low_priority_bandwidth')", "current_setting", 1, "256MB/s"},
	} {
		res := mustExec(t, m, tt.sql)
		if got := strings.Join(res.Columns, ","); got != tt.cols {
			t.Errorf("%s: columns %s, want %s", tt.sql, got, tt.cols)
		}
		if len(res.Rows) != tt.rows {
			t.Errorf("%s: %d rows, want %d", tt.sql, len(res.Rows), tt.rows)
			continue
		}
		if tt.rows > 0 {
			if got := strings.Join(res.Rows[0], ","); got != tt.row0 {
				t.Errorf("%s: row %s, want %s", tt.sql, got, tt.row0)
			}
		}
	}
}

func TestLowPriorityCaps(t *testing.T) {
	m := newTestManager(t, ManagerOptions{})
	mustExec(t, m, "CREATE LINK wan; SET low_priority_bandwidth = '64MB'")
	low := func(name string) int64 { return m.Runtime().Link(name).Config().LowPriorityBandwidth }
	for _, tt := range []struct {
		step      string
		caps      map[string]int64
		exec      string
		def, wan  int64
		created   string
		createdBW int64
	}{
		{step: "below the setting", caps: map[string]int64{DefaultLink: 10e6}, def: 10e6, wan: 64e6},
		{step: "above the setting", caps: map[string]int64{DefaultLink: 100e6, "wan": 1e6}, def: 64e6, wan: 1e6},
		{step: "outlasts SET", exec: "SET low_priority_bandwidth = '2MB'", def: 2e6, wan: 1e6},
		{step: "setting unlimited", exec: "SET low_priority_bandwidth = 0", def: 100e6, wan: 1e6},
		{step: "new link", caps: map[string]int64{"lan": 5e6}, exec: "CREATE LINK lan", def: 0, wan: 0, created: "lan", createdBW: 5e6},
		{step: "removed", caps: map[string]int64{}, def: 0, wan: 0, created: "lan", createdBW: 0},
	} {
		if tt.caps != nil {
			m.Runtime().SetLowPriorityCaps(tt.caps)
		}
		if tt.exec != "" {
			mustExec(t, m, tt.exec)
		}
		if got := low(DefaultLink); got != tt.def {
			t.Errorf("%s: default low rate %d, want %d", tt.step, got, tt.def)
		}
		if got := low("wan"); got != tt.wan {
			t.Errorf("%s: wan low rate %d, want %d", tt.step, got, tt.wan)
		}
		if tt.created != "" {
			if got := low(tt.created); got != tt.createdBW {
				t.Errorf("%s: %s low rate %d, want %d", tt.step, tt.created, got, tt.createdBW)
			}
		}
	}
}
