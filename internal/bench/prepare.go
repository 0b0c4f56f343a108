package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicelab/sluice/internal/bench/sbrand"
	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/rawconn"
)

// newDialer returns the Dialer of o's driver for a run.
func newDialer(o *Options) (Dialer, error) {
	if o.Driver == DriverPgSQL {
		return newPgDialer(o, runDialFunc(o))
	}
	return newMySQLDialer(o, runDialFunc(o))
}

// adminConn is a connection for prepare and cleanup.
type adminConn interface {
	exec(ctx context.Context, query string) error
	// load inserts rows from..to (ids) of table t, calling progress with
	// the number of rows written as batches complete.
	load(ctx context.Context, t int, g *rowGen, from, to int, progress func(int)) error
	close() error
}

// openAdmin opens connection n for prepare or cleanup. It waits on the
// network poller whatever o.IOModel says: the I/O model is the run's.
func openAdmin(ctx context.Context, o *Options, n int) (adminConn, error) {
	if o.Driver == DriverPgSQL {
		d, err := newPgDialer(o, rawconn.Dial)
		if err != nil {
			return nil, err
		}
		return d.admin(ctx)
	}
	d, err := newMySQLDialer(o, rawconn.Dial)
	if err != nil {
		return nil, err
	}
	return d.admin(ctx, n)
}

// rowGen generates the k, c and pad values of loaded rows, as sysbench's
// create_table does: k from --rand-type over 1..table-size, c and pad from
// their digit templates. Not safe for concurrent use.
type rowGen struct {
	rnd    *sbrand.Rand
	size   uint32
	c, pad []byte
}

func newRowGen(seed uint64, o *Options) *rowGen {
	return &rowGen{rnd: sbrand.New(seed, o.Rand), size: uint32(o.TableSize)}
}

// next returns the values of the next row; c and pad are overwritten by
// the following call.
func (g *rowGen) next() (k uint32, c, pad []byte) {
	c = g.rnd.AppendString(g.c[:0], cTemplate)
	pad = g.rnd.AppendString(g.pad[:0], padTemplate)
	g.c, g.pad = c, pad
	return g.rnd.Default(1, g.size), c, pad
}

// k draws the next row's k alone; the caller draws c and pad from g.rnd.
func (g *rowGen) k() uint32 { return g.rnd.Default(1, g.size) }

// appendValues appends the next row as SQL values: k,'c','pad'.
func (g *rowGen) appendValues(buf []byte) []byte {
	k, c, pad := g.next()
	buf = strconv.AppendUint(buf, uint64(k), 10)
	buf = append(buf, ",'"...)
	buf = append(buf, c...)
	buf = append(buf, "','"...)
	buf = append(buf, pad...)
	return append(buf, '\'')
}

// createTableSQL returns sysbench's CREATE TABLE for table t. On
// PostgreSQL the primary key is added after loading (see
// addPrimaryKeySQL); the resulting table is the same.
func createTableSQL(o *Options, wl *workload, t int) string {
	if wl.bulk {
		return fmt.Sprintf("CREATE TABLE IF NOT EXISTS sbtest%d (\n  id INTEGER NOT NULL,\n  k INTEGER DEFAULT '0' NOT NULL,\n  PRIMARY KEY (id))", t)
	}
	if o.Driver == DriverPgSQL {
		id := "SERIAL"
		if !o.AutoInc {
			id = "INTEGER NOT NULL"
		}
		return fmt.Sprintf("CREATE TABLE sbtest%d(\n  id %s,\n  k INTEGER DEFAULT '0' NOT NULL,\n  c CHAR(120) DEFAULT '' NOT NULL,\n  pad CHAR(60) DEFAULT '' NOT NULL\n)", t, id)
	}
	id := "INTEGER NOT NULL"
	if o.AutoInc {
		id = "INTEGER NOT NULL AUTO_INCREMENT"
	}
	key := "PRIMARY KEY"
	if o.Secondary {
		key = "KEY xid"
	}
	return fmt.Sprintf("CREATE TABLE sbtest%d(\n  id %s,\n  k INTEGER DEFAULT '0' NOT NULL,\n  c CHAR(120) DEFAULT '' NOT NULL,\n  pad CHAR(60) DEFAULT '' NOT NULL,\n  %s (id)\n) /*! ENGINE = %s */ ",
		t, id, key, o.MySQL.StorageEngine)
}

// pgKeySQL returns the PostgreSQL statements that index id after loading:
// the primary key, or with --secondary a plain index, and the serial
// sequence moved past the loaded ids.
func pgKeySQL(o *Options, t, rows int) []string {
	var out []string
	if o.Secondary {
		out = append(out, fmt.Sprintf("CREATE INDEX xid_%d ON sbtest%d(id)", t, t))
	} else {
		out = append(out, fmt.Sprintf("ALTER TABLE sbtest%d ADD PRIMARY KEY (id)", t))
	}
	if o.AutoInc && rows > 0 {
		out = append(out, fmt.Sprintf("SELECT setval(pg_get_serial_sequence('sbtest%d', 'id'), %d)", t, rows))
	}
	return out
}

// Prepare creates and loads the workload's tables, one goroutine and
// connection per table, up to max(--threads, GOMAXPROCS) tables at a time.
// MySQL loads each table in key order with multi-row INSERTs of 2000 rows,
// prepared once and executed with binary parameters (text INSERTs of
// about 1 MB under --db-ps-mode=disable): InnoDB appends to its clustered
// index fastest from one session. PostgreSQL loads a table from several
// connections at once when there are fewer tables than loaders, each
// COPYing its own key range into the heap, and builds the primary key and
// the secondary index after loading. Progress lines (sysbench's messages,
// then loaded rows and rows/s every 2 s) go to progress. Existing tables
// are an error, except for bulk_insert, whose tables are created if
// missing.
func Prepare(ctx context.Context, o Options, progress io.Writer) error {
	wl, err := o.tablesWorkload()
	if err != nil {
		return err
	}
	clk := o.clock()
	var mu sync.Mutex // serialises writes to progress
	say := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(progress, format, args...)
	}
	tables, rows := wl.tables(&o), wl.prepareRows(&o)
	if wl.bulk {
		rows = 0
	}
	par := max(o.Threads, runtime.NumCPU())
	chunks := 1
	if o.Driver == DriverPgSQL {
		chunks = max(1, min(par/tables, rows/50000))
	}
	seed := uint64(o.RandSeed)
	if seed == 0 {
		seed = uint64(clk.Now().UnixNano())
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var loaded atomic.Int64
	start := clk.Now()
	total := int64(tables) * int64(rows)
	progDone := make(chan struct{})
	var progWG sync.WaitGroup
	if rows > 0 && o.Verbosity >= 3 {
		progWG.Go(func() { reportLoad(ctx, clk, start, &loaded, total, progDone, say) })
	}

	sem := make(chan struct{}, par)
	errs := make([]error, tables)
	var wg sync.WaitGroup
	for t := 1; t <= tables; t++ {
		wg.Go(func() {
			select {
			case sem <- struct{}{}:
				defer func() { <-sem }()
			case <-ctx.Done():
				errs[t-1] = ctx.Err()
				return
			}
			if err := prepareTable(ctx, &o, wl, t, rows, chunks, seed, &loaded, say); err != nil {
				errs[t-1] = err
				cancel()
			}
		})
	}
	wg.Wait()
	close(progDone)
	progWG.Wait()
	for _, err := range errs {
		if err != nil && !errors.Is(err, context.Canceled) {
			return err
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if rows > 0 && o.Verbosity >= 3 {
		el := clk.Now().Sub(start)
		say("Loaded %d rows into %d table(s) in %.2fs (%.0f rows/s)\n", total, tables, el.Seconds(), perSec(uint64(total), el))
	}
	return nil
}

// reportLoad prints the loading progress every 2 s until done closes.
func reportLoad(ctx context.Context, clk clock.Clock, start time.Time, loaded *atomic.Int64, total int64, done <-chan struct{}, say func(string, ...any)) {
	const every = 2 * time.Second
	prevT, prevN := start, int64(0)
	next := start.Add(every)
	for {
		if !waitUntil(ctx, clk, next, done) {
			return
		}
		now, n := clk.Now(), loaded.Load()
		say("[ %.0fs ] loaded %d of %d rows (%.0f rows/s)\n", now.Sub(start).Seconds(), n, total, perSec(uint64(n-prevN), now.Sub(prevT)))
		prevT, prevN = now, n
		next = next.Add(every)
	}
}

// prepareTable creates, loads and indexes table t.
func prepareTable(ctx context.Context, o *Options, wl *workload, t, rows, chunks int, seed uint64, loaded *atomic.Int64, say func(string, ...any)) error {
	a, err := openAdmin(ctx, o, t-1)
	if err != nil {
		return err
	}
	defer a.close()
	say("Creating table 'sbtest%d'...\n", t)
	if err := a.exec(ctx, createTableSQL(o, wl, t)); err != nil {
		return err
	}
	if wl.bulk {
		return nil
	}
	if rows > 0 {
		say("Inserting %d records into 'sbtest%d'\n", rows, t)
		errs := make([]error, chunks)
		var wg sync.WaitGroup
		per := rows / chunks
		for i := 0; i < chunks; i++ {
			from, to := 1+i*per, (i+1)*per
			if i == chunks-1 {
				to = rows
			}
			wg.Go(func() {
				conn := a
				if i > 0 {
					c, err := openAdmin(ctx, o, t-1+i)
					if err != nil {
						errs[i] = err
						return
					}
					defer c.close()
					conn = c
				}
				g := newRowGen(seed+uint64(t)<<20+uint64(i), o)
				errs[i] = conn.load(ctx, t, g, from, to, func(n int) { loaded.Add(int64(n)) })
			})
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				return err
			}
		}
	}
	if o.Driver == DriverPgSQL {
		for _, q := range pgKeySQL(o, t, rows) {
			if err := a.exec(ctx, q); err != nil {
				return err
			}
		}
	}
	if o.CreateSecondary {
		say("Creating a secondary index on 'sbtest%d'...\n", t)
		if err := a.exec(ctx, fmt.Sprintf("CREATE INDEX k_%d ON sbtest%d(k)", t, t)); err != nil {
			return err
		}
	}
	return nil
}

// tablesWorkload validates o for a command on the workload's tables and
// returns the workload.
func (o *Options) tablesWorkload() (*workload, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	wl, ok := lookupWorkload(o.Workload)
	if !ok {
		return nil, usageErrorf("no workload given")
	}
	if wl.singleTable && o.Tables != 1 {
		return nil, usageErrorf("%s does not support --tables > 1", wl.name)
	}
	return wl, nil
}

// Cleanup drops the workload's tables (DROP TABLE IF EXISTS).
func Cleanup(ctx context.Context, o Options) error {
	return cleanup(ctx, &o, io.Discard)
}

// cleanup is Cleanup printing sysbench's "Dropping table" lines to out.
func cleanup(ctx context.Context, o *Options, out io.Writer) error {
	wl, err := o.tablesWorkload()
	if err != nil {
		return err
	}
	a, err := openAdmin(ctx, o, 0)
	if err != nil {
		return err
	}
	defer a.close()
	for t := 1; t <= wl.tables(o); t++ {
		fmt.Fprintf(out, "Dropping table 'sbtest%d'...\n", t)
		if err := a.exec(ctx, fmt.Sprintf("DROP TABLE IF EXISTS sbtest%d", t)); err != nil {
			return err
		}
	}
	return nil
}
