package bench

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sluicelab/sluice/internal/bench/sbrand"
)

func TestDefaultsAreSysbench1020(t *testing.T) {
	o, w, c, err := ParseArgs([]string{"oltp_read_write", "run"})
	if err != nil || w != "oltp_read_write" || c != "run" {
		t.Fatalf("ParseArgs = %q %q %v", w, c, err)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"db-driver", o.Driver, "mysql"},
		{"db-ps-mode", o.PSMode, "auto"},
		{"threads", o.Threads, 1},
		{"time", o.Time, 10 * time.Second},
		{"events", o.Events, int64(0)},
		{"rate", o.Rate, 0},
		{"report-interval", o.ReportInterval, time.Duration(0)},
		{"percentile", o.Percentile, 95},
		{"verbosity", o.Verbosity, 3},
		{"histogram", o.Histogram, false},
		{"rand-type", o.Rand.Dist, sbrand.Special},
		{"rand-spec-iter", o.Rand.SpecIter, 12},
		{"rand-spec-pct", o.Rand.SpecPct, 1},
		{"rand-spec-res", o.Rand.SpecRes, 75},
		{"rand-pareto-h", o.Rand.ParetoH, 0.2},
		{"rand-seed", o.RandSeed, int64(0)},
		{"tables", o.Tables, 1},
		{"table-size", o.TableSize, 10000},
		{"range-size", o.RangeSize, 100},
		{"point-selects", o.PointSelects, 10},
		{"simple-ranges", o.SimpleRanges, 1},
		{"sum-ranges", o.SumRanges, 1},
		{"order-ranges", o.OrderRanges, 1},
		{"distinct-ranges", o.DistinctRanges, 1},
		{"index-updates", o.IndexUpdates, 1},
		{"non-index-updates", o.NonIndexUpdates, 1},
		{"delete-inserts", o.DeleteInserts, 1},
		{"range-selects", o.RangeSelects, true},
		{"auto-inc", o.AutoInc, true},
		{"skip-trx", o.SkipTrx, false},
		{"secondary", o.Secondary, false},
		{"create-secondary", o.CreateSecondary, true},
		{"mysql-storage-engine", o.MySQL.StorageEngine, "innodb"},
		{"mysql-host", o.MySQL.Hosts, []string{"localhost"}},
		{"mysql-port", o.MySQL.Ports, []int{3306}},
		{"mysql-user", o.MySQL.User, "sbtest"},
		{"mysql-db", o.MySQL.DB, "sbtest"},
		{"mysql-ignore-errors", o.MySQL.IgnoreErrors, []string{"1213", "1020", "1205"}},
		{"pgsql-host", o.PgSQL.Host, "localhost"},
		{"pgsql-port", o.PgSQL.Port, 5432},
		{"pgsql-user", o.PgSQL.User, "sbtest"},
		{"pgsql-db", o.PgSQL.DB, "sbtest"},
		{"random-points", o.RandomPoints, 10},
		{"number-of-ranges", o.NumberOfRanges, 10},
		{"delta", o.Delta, 5},
		{"format", o.Format, "human"},
		{"io-model", o.IOModel, "thread"},
	}
	for _, c := range checks {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("--%s default = %v, want %v", c.name, c.got, c.want)
		}
	}
}

func TestParseArgs(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		workload string
		command  string
		check    func(o Options) bool
	}{
		{"dashes", []string{"--table-size=5", "oltp_read_only", "prepare"}, "oltp_read_only", "prepare",
			func(o Options) bool { return o.TableSize == 5 }},
		{"underscores", []string{"--table_size=5", "--point_selects=3", "oltp_read_only", "prepare"}, "oltp_read_only", "prepare",
			func(o Options) bool { return o.TableSize == 5 && o.PointSelects == 3 }},
		{"mixed in one name", []string{"--non_index-updates=4", "oltp_write_only", "run"}, "oltp_write_only", "run",
			func(o Options) bool { return o.NonIndexUpdates == 4 }},
		{"separate value", []string{"--threads", "8", "--mysql-host", "db1", "oltp_read_write", "run"}, "oltp_read_write", "run",
			func(o Options) bool { return o.Threads == 8 && reflect.DeepEqual(o.MySQL.Hosts, []string{"db1"}) }},
		{"options after the command", []string{"oltp_read_write", "run", "--threads=4", "--time", "20"}, "oltp_read_write", "run",
			func(o Options) bool { return o.Threads == 4 && o.Time == 20*time.Second }},
		{"options between", []string{"oltp_read_write", "--tables=3", "cleanup"}, "oltp_read_write", "cleanup",
			func(o Options) bool { return o.Tables == 3 }},
		{"bare boolean", []string{"--skip-trx", "oltp_read_write", "run"}, "oltp_read_write", "run",
			func(o Options) bool { return o.SkipTrx }},
		{"bare boolean before a word", []string{"oltp_read_write", "--skip_trx", "run"}, "oltp_read_write", "run",
			func(o Options) bool { return o.SkipTrx }},
		{"boolean off", []string{"--auto-inc=off", "--range-selects=false", "--create-secondary=0", "oltp_read_write", "run"}, "oltp_read_write", "run",
			func(o Options) bool { return !o.AutoInc && !o.RangeSelects && !o.CreateSecondary }},
		{"boolean on values", []string{"--skip-trx=true", "--secondary=1", "--histogram=on", "oltp_read_write", "run"}, "oltp_read_write", "run",
			func(o Options) bool { return o.SkipTrx && o.Secondary && o.Histogram }},
		{"boolean separate value", []string{"--skip-trx", "off", "oltp_read_write", "run"}, "oltp_read_write", "run",
			func(o Options) bool { return !o.SkipTrx }},
		{"lists", []string{"--mysql-host=a,b", "--mysql-port=1,2", "--mysql-ignore-errors=all", "oltp_read_write", "run"}, "oltp_read_write", "run",
			func(o Options) bool {
				return reflect.DeepEqual(o.MySQL.Hosts, []string{"a", "b"}) && reflect.DeepEqual(o.MySQL.Ports, []int{1, 2}) && o.MySQL.IgnoreErrors[0] == "all"
			}},
		{"rand options", []string{"--rand-type=pareto", "--rand-pareto-h=0.3", "--rand-seed=9", "oltp_read_write", "run"}, "oltp_read_write", "run",
			func(o Options) bool { return o.Rand.Dist == sbrand.Pareto && o.Rand.ParetoH == 0.3 && o.RandSeed == 9 }},
		{"deprecated aliases", []string{"--num-threads=3", "--max-requests=5", "--max-time=7", "oltp_read_write", "run"}, "oltp_read_write", "run",
			func(o Options) bool { return o.Threads == 3 && o.Events == 5 && o.Time == 7*time.Second }},
		{"script path", []string{"/usr/share/sysbench/oltp_point_select.lua", "run"}, "oltp_point_select", "run", nil},
		{"pgsql", []string{"--db-driver=pgsql", "--pgsql-port=15432", "--pgsql-password=", "oltp_read_write", "run"}, "oltp_read_write", "run",
			func(o Options) bool { return o.Driver == "pgsql" && o.PgSQL.Port == 15432 && o.PgSQL.Password == "" }},
		{"dsn postgres", []string{"--dsn=postgres://u:p@h:5/db", "oltp_read_write", "run"}, "oltp_read_write", "run",
			func(o Options) bool { return o.Driver == "pgsql" }},
		{"dsn mysql url", []string{"--dsn", "mysql://u:p@h:5/db", "oltp_read_write", "run"}, "oltp_read_write", "run",
			func(o Options) bool { return o.Driver == "mysql" }},
		{"dsn go-sql-driver", []string{"--dsn=u:p@tcp(h:5)/db", "oltp_read_write", "run"}, "oltp_read_write", "run",
			func(o Options) bool { return o.Driver == "mysql" }},
		{"durations", []string{"--time=0.5", "--report-interval=250ms", "--warmup-time=2", "oltp_read_write", "run"}, "oltp_read_write", "run",
			func(o Options) bool {
				return o.Time == 500*time.Millisecond && o.ReportInterval == 250*time.Millisecond && o.WarmupTime == 2*time.Second
			}},
		{"json", []string{"--format=json", "oltp_read_write", "run"}, "oltp_read_write", "run",
			func(o Options) bool { return o.Format == "json" }},
		{"help option", []string{"--help"}, "", "help", nil},
		{"help command", []string{"oltp_read_write", "help"}, "oltp_read_write", "help", nil},
		{"end of options", []string{"--threads=2", "--", "oltp_read_write", "run"}, "oltp_read_write", "run",
			func(o Options) bool { return o.Threads == 2 }},
		{"no words", nil, "", "", nil},
		{"compatibility no-ops", []string{"--forced-shutdown=off", "--thread-stack-size=64K", "--debug", "oltp_read_write", "run"}, "oltp_read_write", "run", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, w, c, err := ParseArgs(tt.args)
			if err != nil {
				t.Fatalf("ParseArgs(%q): %v", tt.args, err)
			}
			if w != tt.workload || c != tt.command || o.Workload != tt.workload {
				t.Fatalf("workload, command = %q, %q; want %q, %q", w, c, tt.workload, tt.command)
			}
			if tt.check != nil && !tt.check(o) {
				t.Fatalf("options not as expected: %+v", o)
			}
		})
	}
}

func TestParseArgsErrors(t *testing.T) {
	tests := []struct {
		args []string
		msg  string
	}{
		{[]string{"--foo", "oltp_read_write", "run"}, "unknown option --foo"},
		{[]string{"--foo=1", "oltp_read_write", "run"}, "unknown option --foo"},
		{[]string{"-t", "oltp_read_write", "run"}, "unknown option -t"},
		{[]string{"oltp_foo", "run"}, "unknown workload oltp_foo"},
		{[]string{"oltp_read_write", "go"}, "unknown command go"},
		{[]string{"oltp_read_write", "run", "extra"}, "unexpected argument extra"},
		{[]string{"--threads=abc", "oltp_read_write", "run"}, `bad value for --threads: "abc"`},
		{[]string{"--threads=0", "oltp_read_write", "run"}, "bad value for --threads: 0"},
		{[]string{"--threads"}, "option --threads needs a value"},
		{[]string{"--skip-trx=maybe", "oltp_read_write", "run"}, `bad value for --skip-trx: "maybe"`},
		{[]string{"--db-ps-mode=sometimes", "oltp_read_write", "run"}, "bad value for --db-ps-mode"},
		{[]string{"--db-driver=oracle", "oltp_read_write", "run"}, "bad value for --db-driver"},
		{[]string{"--rand-type=zipfian", "oltp_read_write", "run"}, "bad value for --rand-type"},
		{[]string{"--percentile=101", "oltp_read_write", "run"}, "bad value for --percentile"},
		{[]string{"--time=-1", "oltp_read_write", "run"}, "bad value for --time"},
		{[]string{"--mysql-port=0", "oltp_read_write", "run"}, "bad value for --mysql-port"},
		{[]string{"--format=xml", "oltp_read_write", "run"}, "bad value for --format"},
		{[]string{"--io-model=threads", "oltp_read_write", "run"}, "bad value for --io-model"},
		{[]string{"--percentile=0", "--histogram", "oltp_read_write", "run"}, "--histogram cannot be used with --percentile=0"},
		{[]string{"--dsn=http://x", "oltp_read_write", "run"}, "bad value for --dsn"},
		{[]string{"--db-driver=mysql", "--dsn=postgres://h/db", "oltp_read_write", "run"}, "--dsn is a pgsql address but --db-driver is mysql"},
		{[]string{"--mysql-ignore-errors=12x", "oltp_read_write", "run"}, "bad value for --mysql-ignore-errors"},
		{[]string{"--mysql-storage-engine=x;drop", "oltp_read_write", "run"}, "bad value for --mysql-storage-engine"},
		{[]string{"--rand-pareto-h=1", "oltp_read_write", "run"}, "bad value for --rand-pareto-h"},
	}
	for _, tt := range tests {
		_, _, _, err := ParseArgs(tt.args)
		if err == nil {
			t.Errorf("ParseArgs(%q) accepted", tt.args)
			continue
		}
		if !IsUsage(err) {
			t.Errorf("ParseArgs(%q): %v is not a usage error", tt.args, err)
		}
		if !strings.Contains(err.Error(), tt.msg) {
			t.Errorf("ParseArgs(%q) = %q, want it to contain %q", tt.args, err, tt.msg)
		}
		if strings.Contains(err.Error(), "\n") {
			t.Errorf("ParseArgs(%q): message spans lines: %q", tt.args, err)
		}
	}
}

func TestUsageListsEveryOption(t *testing.T) {
	var b strings.Builder
	writeUsage(&b)
	o := DefaultOptions()
	for _, d := range optionTable(&o) {
		if !strings.Contains(b.String(), "--"+d.name) {
			t.Errorf("usage lacks --%s", d.name)
		}
	}
	for _, w := range workloadNames() {
		if _, ok := lookupWorkload(w); !ok {
			t.Errorf("workload %s listed but unknown", w)
		}
	}
}

func FuzzParseArgs(f *testing.F) {
	for _, s := range []string{
		"oltp_read_write run",
		"--threads=8 --time 20 oltp_read_write run --skip-trx",
		"--skip_trx off oltp_point_select prepare",
		"--dsn=postgres://u:p@h:5/db bulk_insert cleanup",
		"--mysql-port=1,2,x oltp_read_write run",
		"--time=1e300 --rate=-5 --",
		"--rand-pareto-h=NaN --report-interval=-1ms oltp_insert run",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		o, w, c, err := ParseArgs(strings.Fields(line))
		if err != nil {
			if !IsUsage(err) {
				t.Fatalf("error %v is not a usage error", err)
			}
			return
		}
		if c != CmdHelp {
			if err := o.Validate(); err != nil {
				t.Fatalf("parsed options fail validation: %v", err)
			}
		}
		if w != o.Workload {
			t.Fatalf("workload %q vs %q", w, o.Workload)
		}
	})
}

func FuzzDSNDriver(f *testing.F) {
	for _, s := range []string{"postgres://u:p@h:5/db?sslmode=disable", "mysql://u:p@h/db?tls=false", "u:p@tcp(h:1)/db", "x", "mysql://h:99999/db", "postgresql://%zz"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, dsn string) {
		drv, err := dsnDriver(dsn)
		if err == nil && drv != DriverMySQL && drv != DriverPgSQL {
			t.Fatalf("driver %q", drv)
		}
	})
}
