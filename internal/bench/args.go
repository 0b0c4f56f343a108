package bench

import (
	"errors"
	"fmt"
	"io"
	"math"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/sluicelab/sluice/internal/bench/sbrand"
)

// Commands a workload takes.
const (
	CmdPrepare = "prepare"
	CmdRun     = "run"
	CmdCleanup = "cleanup"
	CmdHelp    = "help"
)

// UsageError is a command line the benchmark cannot run: an unknown
// option, workload or command, or a bad value. Main exits with status 2 on
// it.
type UsageError struct{ Msg string }

func (e *UsageError) Error() string { return e.Msg }

func usageErrorf(format string, args ...any) error {
	return &UsageError{Msg: fmt.Sprintf(format, args...)}
}

// IsUsage reports whether err is (or wraps) a UsageError.
func IsUsage(err error) bool {
	var u *UsageError
	return errors.As(err, &u)
}

// ParseArgs parses sysbench's command line: [options] WORKLOAD COMMAND,
// with options before, between or after the two words. Options are
// --name=value or --name value; '-' and '_' are the same inside a name;
// a boolean option alone means on, and takes on|off|true|false|yes|no|1|0
// as its value. "--" ends the options. The workload may be given as
// sysbench's script path (…/oltp_read_write.lua).
//
// It returns the options (sysbench's defaults where not given, Workload
// set), the workload and the command; command is "help" when --help is
// given. Errors are UsageErrors naming the offending word. A missing
// workload or command is not an error here (Main prints the usage); an
// unknown one is.
func ParseArgs(args []string) (o Options, workload, command string, err error) {
	o = DefaultOptions()
	defs := optionTable(&o)
	byName := make(map[string]*optDef, len(defs))
	for i := range defs {
		byName[defs[i].name] = &defs[i]
	}
	var words []string
	var help bool
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			words = append(words, args[i+1:]...)
			break
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			words = append(words, a)
			continue
		}
		if !strings.HasPrefix(a, "--") {
			return o, "", "", usageErrorf("unknown option %s", a)
		}
		name, val, hasVal := strings.Cut(a[2:], "=")
		key := strings.ReplaceAll(name, "_", "-")
		if key == "help" {
			help = true
			continue
		}
		def, ok := byName[key]
		if !ok {
			return o, "", "", usageErrorf("unknown option --%s", name)
		}
		if !hasVal {
			switch {
			case def.isBool:
				val = "on"
				if i+1 < len(args) {
					if _, ok := parseBool(args[i+1]); ok {
						val = args[i+1]
						i++
					}
				}
			case i+1 < len(args):
				val = args[i+1]
				i++
			default:
				return o, "", "", usageErrorf("option --%s needs a value", name)
			}
		}
		if err := def.set(val); err != nil {
			return o, "", "", usageErrorf("bad value for --%s: %q (%v)", name, val, err)
		}
	}
	if len(words) > 2 {
		return o, "", "", usageErrorf("unexpected argument %s", words[2])
	}
	if len(words) > 0 {
		workload = workloadName(words[0])
		if _, ok := lookupWorkload(workload); !ok {
			return o, "", "", usageErrorf("unknown workload %s (want one of %s)", words[0], strings.Join(workloadNames(), ", "))
		}
		o.Workload = workload
	}
	if len(words) > 1 {
		command = words[1]
		switch command {
		case CmdPrepare, CmdRun, CmdCleanup, CmdHelp:
		default:
			return o, "", "", usageErrorf("unknown command %s (want prepare, run, cleanup or help)", command)
		}
	}
	if help {
		command = CmdHelp
	}
	if o.DSN != "" {
		drv, err := dsnDriver(o.DSN)
		if err != nil {
			return o, "", "", usageErrorf("bad value for --dsn: %v", err)
		}
		if byName["db-driver"].given && o.Driver != drv {
			return o, "", "", usageErrorf("--dsn is a %s address but --db-driver is %s", drv, o.Driver)
		}
		o.Driver = drv
	}
	if command != CmdHelp {
		if err := o.Validate(); err != nil {
			return o, "", "", err
		}
	}
	return o, workload, command, nil
}

// workloadName accepts sysbench's script paths for the built-in workloads.
func workloadName(w string) string {
	return strings.TrimSuffix(path.Base(w), ".lua")
}

// optDef is one command-line option bound to its field.
type optDef struct {
	name   string // canonical spelling, dashes
	arg    string // value placeholder for the help text; "" for booleans
	help   string
	def    string // default for the help text
	isBool bool
	given  bool // set by set
	setter func(string) error
}

func (d *optDef) set(v string) error {
	d.given = true
	return d.setter(v)
}

// optionTable binds every option to a field of o. The table is built per
// parse, so parsing has no shared state.
func optionTable(o *Options) []optDef {
	var defs []optDef
	add := func(d optDef) { defs = append(defs, d) }
	intOpt := func(name, help string, p *int) {
		add(optDef{name: name, arg: "N", help: help, def: strconv.Itoa(*p), setter: func(v string) error {
			n, err := parseInt(v)
			if err != nil {
				return err
			}
			if n < math.MinInt32 || n > math.MaxInt32 {
				return errors.New("out of range")
			}
			*p = int(n)
			return nil
		}})
	}
	int64Opt := func(name, help string, p *int64) {
		add(optDef{name: name, arg: "N", help: help, def: strconv.FormatInt(*p, 10), setter: func(v string) error {
			n, err := parseInt(v)
			if err != nil {
				return err
			}
			*p = n
			return nil
		}})
	}
	secOpt := func(name, help string, p *time.Duration) {
		add(optDef{name: name, arg: "N", help: help + " in seconds", def: strconv.Itoa(int(p.Seconds())), setter: func(v string) error {
			d, err := parseSeconds(v)
			if err != nil {
				return err
			}
			*p = d
			return nil
		}})
	}
	boolOpt := func(name, help string, p *bool) {
		def := "off"
		if *p {
			def = "on"
		}
		add(optDef{name: name, help: help, def: def, isBool: true, setter: func(v string) error {
			b, ok := parseBool(v)
			if !ok {
				return errors.New("want on or off")
			}
			*p = b
			return nil
		}})
	}
	strOpt := func(name, help string, p *string) {
		add(optDef{name: name, arg: "STRING", help: help, def: *p, setter: func(v string) error {
			*p = v
			return nil
		}})
	}
	listOpt := func(name, help string, p *[]string) {
		add(optDef{name: name, arg: "LIST", help: help, def: strings.Join(*p, ","), setter: func(v string) error {
			*p = splitList(v)
			return nil
		}})
	}
	ignored := func(name, arg, help string, isBool bool) {
		add(optDef{name: name, arg: arg, help: help + " (accepted for compatibility, no effect)", isBool: isBool, setter: func(string) error { return nil }})
	}

	// General options (src/sysbench.c, src/sb_logger.c).
	intOpt("threads", "number of threads to use", &o.Threads)
	int64Opt("events", "limit for total number of events, 0 for no limit", &o.Events)
	secOpt("time", "limit for total execution time, 0 for no limit,", &o.Time)
	secOpt("warmup-time", "execute events for this long with statistics off before the measured run,", &o.WarmupTime)
	intOpt("rate", "average transactions rate, 0 for unlimited rate", &o.Rate)
	secOpt("report-interval", "report intermediate statistics every this long, 0 disables,", &o.ReportInterval)
	intOpt("percentile", "percentile to calculate in latency statistics (1-100), 0 disables", &o.Percentile)
	boolOpt("histogram", "print latency histogram in report", &o.Histogram)
	intOpt("verbosity", "verbosity level {5 - debug, 0 - only critical messages}", &o.Verbosity)
	strOpt("format", "report format {human, json}", &o.Format)
	strOpt("io-model", "how run workers wait {thread: each in its own thread, as sysbench's; poller: on Go's network poller}", &o.IOModel)
	intOpt("num-threads", "deprecated alias for --threads", &o.Threads)
	int64Opt("max-requests", "deprecated alias for --events", &o.Events)
	secOpt("max-time", "deprecated alias for --time", &o.Time)
	intOpt("tx-rate", "deprecated alias for --rate", &o.Rate)
	ignored("forced-shutdown", "STRING", "seconds to wait after --time before forcing shutdown", false)
	ignored("thread-stack-size", "SIZE", "size of stack per thread", false)
	ignored("debug", "", "print more debugging info", true)
	ignored("validate", "", "perform validation checks where possible", true)
	ignored("db-debug", "", "print database-specific debug information", true)
	ignored("mysql-debug", "", "trace all client library calls", true)

	// Random numbers (src/sb_rand.c).
	add(optDef{name: "rand-type", arg: "STRING", help: "random numbers distribution {uniform, gaussian, special, pareto}", def: o.Rand.Dist.String(), setter: func(v string) error {
		d, err := sbrand.ParseDist(v)
		if err != nil {
			return errors.New("want uniform, gaussian, special or pareto")
		}
		o.Rand.Dist = d
		return nil
	}})
	intOpt("rand-spec-iter", "number of iterations used for numbers generation", &o.Rand.SpecIter)
	intOpt("rand-spec-pct", "percentage of values to be treated as 'special' (for special distribution)", &o.Rand.SpecPct)
	intOpt("rand-spec-res", "percentage of 'special' values to use (for special distribution)", &o.Rand.SpecRes)
	int64Opt("rand-seed", "seed for random number generator, 0 seeds from the current time", &o.RandSeed)
	add(optDef{name: "rand-pareto-h", arg: "N", help: "parameter h for pareto distribution", def: "0.2", setter: func(v string) error {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return errors.New("want a number")
		}
		o.Rand.ParetoH = f
		return nil
	}})

	// Database (src/db_driver.c and the drivers).
	strOpt("db-driver", "database driver {mysql, pgsql}", &o.Driver)
	strOpt("db-ps-mode", "prepared statements usage mode {auto, disable}", &o.PSMode)
	strOpt("dsn", "database address as a postgres:// or mysql:// URL, instead of the per-driver options", &o.DSN)
	listOpt("mysql-host", "MySQL server host", &o.MySQL.Hosts)
	add(optDef{name: "mysql-port", arg: "LIST", help: "MySQL server port", def: "3306", setter: func(v string) error {
		var ports []int
		for _, s := range splitList(v) {
			n, err := parseInt(s)
			if err != nil || n < 1 || n > 65535 {
				return fmt.Errorf("bad port %q", s)
			}
			ports = append(ports, int(n))
		}
		o.MySQL.Ports = ports
		return nil
	}})
	listOpt("mysql-socket", "MySQL socket", &o.MySQL.Sockets)
	strOpt("mysql-user", "MySQL user", &o.MySQL.User)
	strOpt("mysql-password", "MySQL password", &o.MySQL.Password)
	strOpt("mysql-db", "MySQL database name", &o.MySQL.DB)
	boolOpt("mysql-ssl", "use SSL connections, if the server offers them", &o.MySQL.SSL)
	boolOpt("mysql-compression", "use compression", &o.MySQL.Compression)
	listOpt("mysql-ignore-errors", "list of errors to ignore, or \"all\"", &o.MySQL.IgnoreErrors)
	strOpt("mysql-storage-engine", "storage engine, if MySQL is used", &o.MySQL.StorageEngine)
	strOpt("pgsql-host", "PostgreSQL server host", &o.PgSQL.Host)
	intOpt("pgsql-port", "PostgreSQL server port", &o.PgSQL.Port)
	strOpt("pgsql-user", "PostgreSQL user", &o.PgSQL.User)
	strOpt("pgsql-password", "PostgreSQL password", &o.PgSQL.Password)
	strOpt("pgsql-db", "PostgreSQL database name", &o.PgSQL.DB)

	// Workload options (src/lua/oltp_common.lua and the select_random_* scripts).
	intOpt("tables", "number of tables", &o.Tables)
	intOpt("table-size", "number of rows per table", &o.TableSize)
	intOpt("range-size", "range size for range SELECT queries", &o.RangeSize)
	intOpt("point-selects", "number of point SELECT queries per transaction", &o.PointSelects)
	intOpt("simple-ranges", "number of simple range SELECT queries per transaction", &o.SimpleRanges)
	intOpt("sum-ranges", "number of SELECT SUM() queries per transaction", &o.SumRanges)
	intOpt("order-ranges", "number of SELECT ORDER BY queries per transaction", &o.OrderRanges)
	intOpt("distinct-ranges", "number of SELECT DISTINCT queries per transaction", &o.DistinctRanges)
	intOpt("index-updates", "number of UPDATE index queries per transaction", &o.IndexUpdates)
	intOpt("non-index-updates", "number of UPDATE non-index queries per transaction", &o.NonIndexUpdates)
	intOpt("delete-inserts", "number of DELETE/INSERT combinations per transaction", &o.DeleteInserts)
	boolOpt("range-selects", "enable/disable all range SELECT queries", &o.RangeSelects)
	boolOpt("auto-inc", "use AUTO_INCREMENT (MySQL) or SERIAL (PostgreSQL) as primary key; off uses client-generated IDs", &o.AutoInc)
	boolOpt("skip-trx", "don't start explicit transactions and execute all queries in the AUTOCOMMIT mode", &o.SkipTrx)
	boolOpt("secondary", "use a secondary index in place of the PRIMARY KEY", &o.Secondary)
	boolOpt("create-secondary", "create a secondary index in addition to the PRIMARY KEY", &o.CreateSecondary)
	intOpt("random-points", "number of random points in the IN() clause (select_random_points)", &o.RandomPoints)
	intOpt("number-of-ranges", "number of random BETWEEN ranges per SELECT (select_random_ranges)", &o.NumberOfRanges)
	intOpt("delta", "size of BETWEEN ranges (select_random_ranges)", &o.Delta)
	return defs
}

func parseInt(v string) (int64, error) {
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil {
		return 0, errors.New("want an integer")
	}
	return n, nil
}

// parseSeconds takes whole or fractional seconds ("10", "0.5"), or a Go
// duration ("500ms").
func parseSeconds(v string) (time.Duration, error) {
	v = strings.TrimSpace(v)
	if f, err := strconv.ParseFloat(v, 64); err == nil {
		if math.IsNaN(f) || f < 0 || f > 1e9 {
			return 0, errors.New("want seconds >= 0")
		}
		return time.Duration(f * float64(time.Second)), nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, errors.New("want seconds >= 0")
	}
	return d, nil
}

func parseBool(v string) (value, ok bool) {
	switch strings.ToLower(v) {
	case "on", "true", "yes", "1":
		return true, true
	case "off", "false", "no", "0":
		return false, true
	}
	return false, false
}

func splitList(v string) []string {
	if v == "" {
		return nil
	}
	parts := strings.Split(v, ",")
	out := parts[:0]
	for _, p := range parts {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// writeUsage prints the command line and every option with its default.
func writeUsage(w io.Writer) {
	o := DefaultOptions()
	fmt.Fprintf(w, "Usage:\n  sluice bench [options]... WORKLOAD prepare|run|cleanup|help\n\n")
	fmt.Fprintf(w, "Workloads:\n")
	for _, n := range workloadNames() {
		fmt.Fprintf(w, "  %s\n", n)
	}
	fmt.Fprintf(w, "\nOptions ('-' and '_' are interchangeable; --opt=value or --opt value):\n")
	for _, d := range optionTable(&o) {
		spec := "--" + d.name
		if d.isBool {
			spec += "[=on|off]"
		} else {
			spec += "=" + d.arg
		}
		def := ""
		if d.def != "" || !d.isBool && d.arg != "" {
			def = " [" + d.def + "]"
		}
		fmt.Fprintf(w, "  %-32s %s%s\n", spec, d.help, def)
	}
}
