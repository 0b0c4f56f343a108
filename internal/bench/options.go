package bench

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sluicelab/sluice/internal/bench/sbrand"
	"github.com/sluicelab/sluice/internal/clock"
)

// Driver names, as --db-driver spells them.
const (
	DriverMySQL = "mysql"
	DriverPgSQL = "pgsql"
)

// Report formats, as --format spells them.
const (
	FormatHuman = "human"
	FormatJSON  = "json"
)

// Connection I/O models, as --io-model spells them.
const (
	// IOPoller waits on Go's network poller: the runtime's few threads
	// serve every connection.
	IOPoller = "poller"
	// IOThread gives each run worker an operating-system thread of its
	// own, blocked in its own system calls, as sysbench's threads are
	// (see package threadconn).
	IOThread = "thread"
)

// Prepared-statement modes, as --db-ps-mode spells them.
const (
	PSAuto    = "auto"    // server-side prepared statements where the workload prepares
	PSDisable = "disable" // plain text queries with the values written in
)

// Options is the whole command line of `sluice bench`, typed. The zero value
// is not useful: start from DefaultOptions (ParseArgs does), which holds
// sysbench 1.0.20's defaults. Durations on the command line are whole
// seconds, as sysbench takes them.
type Options struct {
	// Workload is the workload name, e.g. "oltp_read_write".
	Workload string

	// Driver is --db-driver: DriverMySQL (the default) or DriverPgSQL.
	Driver string
	// DSN is --dsn: a postgres:// or mysql:// URL, or a go-sql-driver DSN
	// (user:pass@tcp(host:port)/db). When set it replaces the per-driver
	// connection options and selects the driver.
	DSN   string
	MySQL MySQLOptions
	PgSQL PgSQLOptions
	// PSMode is --db-ps-mode: PSAuto or PSDisable.
	PSMode string

	Threads int           // --threads: concurrent connections, >= 1
	Time    time.Duration // --time: run length after warm-up; 0 = no time limit
	Events  int64         // --events: total transactions; 0 = no limit
	// Rate is --rate: mean arrival rate in transactions per second (Poisson
	// arrivals queued for the workers, latency counted from arrival); 0
	// runs the workers flat out.
	Rate           int
	ReportInterval time.Duration // --report-interval: 0 = no interval lines
	WarmupTime     time.Duration // --warmup-time: run this long before counting
	Percentile     int           // --percentile: 1..100, 0 disables
	Histogram      bool          // --histogram: print the latency histogram
	Verbosity      int           // --verbosity: 0..5; 3 and up prints the report
	Format         string        // --format: FormatHuman or FormatJSON
	IOModel        string        // --io-model: how run workers wait, IOThread or IOPoller

	Rand     sbrand.Config // --rand-type, --rand-spec-*, --rand-pareto-h
	RandSeed int64         // --rand-seed: 0 seeds from the clock

	Tables          int  // --tables: sbtest1..sbtestN
	TableSize       int  // --table-size: rows per table
	RangeSize       int  // --range-size: rows per range select
	PointSelects    int  // --point-selects: per transaction
	SimpleRanges    int  // --simple-ranges
	SumRanges       int  // --sum-ranges
	OrderRanges     int  // --order-ranges
	DistinctRanges  int  // --distinct-ranges
	IndexUpdates    int  // --index-updates
	NonIndexUpdates int  // --non-index-updates
	DeleteInserts   int  // --delete-inserts: DELETE + INSERT pairs
	RangeSelects    bool // --range-selects: run the four range kinds at all
	AutoInc         bool // --auto-inc: AUTO_INCREMENT / SERIAL primary key
	SkipTrx         bool // --skip-trx: autocommit, no BEGIN/COMMIT
	Secondary       bool // --secondary: index id with a secondary key, no primary key
	CreateSecondary bool // --create-secondary: create index k_N on k
	RandomPoints    int  // --random-points: IN() list size of select_random_points
	NumberOfRanges  int  // --number-of-ranges: ranges of select_random_ranges
	Delta           int  // --delta: range width of select_random_ranges

	// Clock times the run; nil means clock.Real.
	Clock clock.Clock
}

// MySQLOptions are the --mysql-* connection options.
type MySQLOptions struct {
	Hosts         []string // --mysql-host: connections go round-robin over hosts x ports
	Ports         []int    // --mysql-port
	Sockets       []string // --mysql-socket: Unix sockets, used instead of hosts when set
	User          string   // --mysql-user
	Password      string   // --mysql-password
	DB            string   // --mysql-db
	SSL           bool     // --mysql-ssl: TLS when the server offers it
	Compression   bool     // --mysql-compression
	StorageEngine string   // --mysql-storage-engine
	// IgnoreErrors is --mysql-ignore-errors: server error numbers after
	// which the transaction is restarted and counted as an ignored error;
	// "all" ignores every error. Connection losses (2006, 2011, 2013, 2055)
	// in the list reconnect.
	IgnoreErrors []string
}

// PgSQLOptions are the --pgsql-* connection options.
type PgSQLOptions struct {
	Host     string // --pgsql-host: host name, address or socket directory
	Port     int    // --pgsql-port
	User     string // --pgsql-user
	Password string // --pgsql-password
	DB       string // --pgsql-db
}

// DefaultOptions returns sysbench 1.0.20's defaults (src/sysbench.c,
// src/lua/oltp_common.lua and the driver sources).
func DefaultOptions() Options {
	return Options{
		Driver: DriverMySQL,
		MySQL: MySQLOptions{
			Hosts:         []string{"localhost"},
			Ports:         []int{3306},
			User:          "sbtest",
			DB:            "sbtest",
			StorageEngine: "innodb",
			IgnoreErrors:  []string{"1213", "1020", "1205"},
		},
		PgSQL: PgSQLOptions{
			Host: "localhost",
			Port: 5432,
			User: "sbtest",
			DB:   "sbtest",
		},
		PSMode:          PSAuto,
		Threads:         1,
		Time:            10 * time.Second,
		Percentile:      95,
		Verbosity:       3,
		Format:          FormatHuman,
		IOModel:         IOThread,
		Rand:            sbrand.DefaultConfig(),
		Tables:          1,
		TableSize:       10000,
		RangeSize:       100,
		PointSelects:    10,
		SimpleRanges:    1,
		SumRanges:       1,
		OrderRanges:     1,
		DistinctRanges:  1,
		IndexUpdates:    1,
		NonIndexUpdates: 1,
		DeleteInserts:   1,
		RangeSelects:    true,
		AutoInc:         true,
		CreateSecondary: true,
		RandomPoints:    10,
		NumberOfRanges:  10,
		Delta:           5,
	}
}

// Validate checks the options for values no run can use. Errors name the
// option as the command line spells it.
func (o *Options) Validate() error {
	bad := func(opt string, v any, want string) error {
		return usageErrorf("bad value for --%s: %v (want %s)", opt, v, want)
	}
	if o.Workload != "" {
		if _, ok := lookupWorkload(o.Workload); !ok {
			return usageErrorf("unknown workload %s (want one of %s)", o.Workload, strings.Join(workloadNames(), ", "))
		}
	}
	switch o.Driver {
	case DriverMySQL, DriverPgSQL:
	default:
		return bad("db-driver", o.Driver, "mysql or pgsql")
	}
	if o.DSN != "" {
		drv, err := dsnDriver(o.DSN)
		if err != nil {
			return usageErrorf("bad value for --dsn: %v", err)
		}
		if drv != o.Driver {
			return usageErrorf("--dsn is a %s address but --db-driver is %s", drv, o.Driver)
		}
	}
	switch o.PSMode {
	case PSAuto, PSDisable:
	default:
		return bad("db-ps-mode", o.PSMode, "auto or disable")
	}
	switch o.Format {
	case FormatHuman, FormatJSON:
	default:
		return bad("format", o.Format, "human or json")
	}
	switch o.IOModel {
	case IOPoller, IOThread:
	default:
		return bad("io-model", o.IOModel, "poller or thread")
	}
	checks := []struct {
		name string
		v    int64
		min  int64
		max  int64
	}{
		{"threads", int64(o.Threads), 1, 1 << 20},
		{"events", o.Events, 0, 1 << 62},
		{"rate", int64(o.Rate), 0, 1 << 30},
		{"percentile", int64(o.Percentile), 0, 100},
		{"verbosity", int64(o.Verbosity), 0, 5},
		{"tables", int64(o.Tables), 1, 1 << 20},
		{"table-size", int64(o.TableSize), 0, 1<<31 - 1},
		{"range-size", int64(o.RangeSize), 0, 1<<31 - 1},
		{"point-selects", int64(o.PointSelects), 0, 1 << 20},
		{"simple-ranges", int64(o.SimpleRanges), 0, 1 << 20},
		{"sum-ranges", int64(o.SumRanges), 0, 1 << 20},
		{"order-ranges", int64(o.OrderRanges), 0, 1 << 20},
		{"distinct-ranges", int64(o.DistinctRanges), 0, 1 << 20},
		{"index-updates", int64(o.IndexUpdates), 0, 1 << 20},
		{"non-index-updates", int64(o.NonIndexUpdates), 0, 1 << 20},
		{"delete-inserts", int64(o.DeleteInserts), 0, 1 << 20},
		{"random-points", int64(o.RandomPoints), 1, 1 << 16},
		{"number-of-ranges", int64(o.NumberOfRanges), 1, 1 << 15},
		{"delta", int64(o.Delta), 0, 1<<31 - 1},
		{"rand-spec-iter", int64(o.Rand.SpecIter), 1, 1 << 20},
		{"rand-spec-pct", int64(o.Rand.SpecPct), 0, 100},
		{"rand-spec-res", int64(o.Rand.SpecRes), 0, 100},
	}
	for _, c := range checks {
		if c.v < c.min || c.v > c.max {
			return bad(c.name, c.v, fmt.Sprintf("an integer from %d to %d", c.min, c.max))
		}
	}
	if !(o.Rand.ParetoH > 0 && o.Rand.ParetoH < 1) {
		return bad("rand-pareto-h", o.Rand.ParetoH, "a number between 0 and 1")
	}
	if o.Time < 0 {
		return bad("time", o.Time, "a duration >= 0")
	}
	if o.ReportInterval < 0 {
		return bad("report-interval", o.ReportInterval, "a duration >= 0")
	}
	if o.WarmupTime < 0 {
		return bad("warmup-time", o.WarmupTime, "a duration >= 0")
	}
	if o.Histogram && o.Percentile == 0 {
		return usageErrorf("--histogram cannot be used with --percentile=0")
	}
	if o.Driver == DriverMySQL && o.DSN == "" {
		if len(o.MySQL.Sockets) == 0 && (len(o.MySQL.Hosts) == 0 || len(o.MySQL.Ports) == 0) {
			return usageErrorf("no MySQL host, port or socket given")
		}
		for _, p := range o.MySQL.Ports {
			if p < 1 || p > 65535 {
				return bad("mysql-port", p, "a port from 1 to 65535")
			}
		}
	}
	if o.Driver == DriverPgSQL && o.DSN == "" && (o.PgSQL.Port < 1 || o.PgSQL.Port > 65535) {
		return bad("pgsql-port", o.PgSQL.Port, "a port from 1 to 65535")
	}
	for _, e := range o.MySQL.IgnoreErrors {
		if e == "all" {
			continue
		}
		if _, err := strconv.ParseUint(e, 10, 16); err != nil {
			return bad("mysql-ignore-errors", e, `error numbers or "all"`)
		}
	}
	if !validIdent(o.MySQL.StorageEngine) {
		return bad("mysql-storage-engine", o.MySQL.StorageEngine, "an engine name such as innodb")
	}
	return nil
}

func validIdent(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return false
		}
	}
	return true
}

func (o *Options) clock() clock.Clock {
	if o.Clock == nil {
		return clock.Real{}
	}
	return o.Clock
}
