package bench

import (
	"context"
	"fmt"
	"strings"
)

// Value templates of sysbench's c and pad columns: groups of 11 random
// digits joined by dashes (10 groups, 119 characters; 5 groups, 59).
const (
	cTemplate   = "###########-###########-###########-###########-###########-###########-###########-###########-###########-###########"
	padTemplate = "###########-###########-###########-###########-###########"
)

// kind is one per-table statement of the OLTP workloads.
type kind int

const (
	kPoint kind = iota
	kSimple
	kSum
	kOrder
	kDistinct
	kIndexUpdate
	kNonIndexUpdate
	kDelete
	kInsert
	numKinds
)

// format returns the statement of k with %d for the table number,
// exactly as sysbench's oltp_common.lua has it.
func (k kind) format() (sql string, reads bool) {
	switch k {
	case kPoint:
		return "SELECT c FROM sbtest%d WHERE id=?", true
	case kSimple:
		return "SELECT c FROM sbtest%d WHERE id BETWEEN ? AND ?", true
	case kSum:
		return "SELECT SUM(k) FROM sbtest%d WHERE id BETWEEN ? AND ?", true
	case kOrder:
		return "SELECT c FROM sbtest%d WHERE id BETWEEN ? AND ? ORDER BY c", true
	case kDistinct:
		return "SELECT DISTINCT c FROM sbtest%d WHERE id BETWEEN ? AND ? ORDER BY c", true
	case kIndexUpdate:
		return "UPDATE sbtest%d SET k=k+1 WHERE id=?", false
	case kNonIndexUpdate:
		return "UPDATE sbtest%d SET c=? WHERE id=?", false
	case kDelete:
		return "DELETE FROM sbtest%d WHERE id=?", false
	case kInsert:
		return "INSERT INTO sbtest%d (id, k, c, pad) VALUES (?, ?, ?, ?)", false
	}
	return "", false
}

func (k kind) name() string {
	return [...]string{"point_selects", "simple_ranges", "sum_ranges", "order_ranges",
		"distinct_ranges", "index_updates", "non_index_updates", "deletes", "inserts"}[k]
}

// workload is one of sysbench's bundled OLTP scripts.
type workload struct {
	name string
	// kinds are the per-table statements the workload prepares.
	kinds []kind
	// trx: the transaction is wrapped in BEGIN/COMMIT unless --skip-trx.
	trx bool
	// event runs one transaction (sysbench's event()).
	event func(w *worker, ctx context.Context) error
	// done runs once when the worker stops (sysbench's thread_done).
	done func(w *worker, ctx context.Context) error
	// singleTable: prepare and cleanup refuse --tables > 1.
	singleTable bool
	// bulk: the tables are sbtest1..sbtest<threads> (id, k) only.
	bulk bool
}

// workloadNames lists the workloads in the order help prints them.
func workloadNames() []string {
	return []string{
		"oltp_read_write", "oltp_read_only", "oltp_write_only", "oltp_point_select",
		"oltp_update_index", "oltp_update_non_index", "oltp_insert", "oltp_delete",
		"select_random_points", "select_random_ranges", "bulk_insert",
	}
}

// lookupWorkload returns the workload called name.
func lookupWorkload(name string) (*workload, bool) {
	switch name {
	case "oltp_read_write":
		return &workload{name: name, trx: true,
			kinds: []kind{kPoint, kSimple, kSum, kOrder, kDistinct, kIndexUpdate, kNonIndexUpdate, kDelete, kInsert},
			event: (*worker).readWrite}, true
	case "oltp_read_only":
		return &workload{name: name, trx: true, kinds: []kind{kPoint, kSimple, kSum, kOrder, kDistinct}, event: (*worker).readOnly}, true
	case "oltp_write_only":
		return &workload{name: name, trx: true,
			kinds: []kind{kIndexUpdate, kNonIndexUpdate, kDelete, kInsert},
			event: (*worker).writeOnly}, true
	case "oltp_point_select":
		return &workload{name: name, kinds: []kind{kPoint}, event: (*worker).pointSelect}, true
	case "oltp_update_index":
		return &workload{name: name, kinds: []kind{kIndexUpdate}, event: (*worker).updateIndex}, true
	case "oltp_update_non_index":
		return &workload{name: name, kinds: []kind{kNonIndexUpdate}, event: (*worker).updateNonIndex}, true
	case "oltp_delete":
		return &workload{name: name, kinds: []kind{kDelete}, event: (*worker).deleteOne}, true
	case "oltp_insert":
		return &workload{name: name, event: (*worker).insertOne}, true
	case "select_random_points":
		return &workload{name: name, singleTable: true, event: (*worker).randomPoints}, true
	case "select_random_ranges":
		return &workload{name: name, singleTable: true, event: (*worker).randomRanges}, true
	case "bulk_insert":
		return &workload{name: name, bulk: true, event: (*worker).bulkInsert, done: (*worker).bulkFlush}, true
	}
	return nil, false
}

// prepareRows returns the rows prepare loads per table: --table-size,
// except oltp_insert without --auto-inc, which starts from empty tables so
// its client-generated ids cannot collide with loaded ones.
func (wl *workload) prepareRows(o *Options) int {
	if wl.name == "oltp_insert" && !o.AutoInc {
		return 0
	}
	return o.TableSize
}

// tables returns how many sbtestN tables the workload uses.
func (wl *workload) tables(o *Options) int {
	if wl.bulk {
		return o.Threads
	}
	return o.Tables
}

// stmtSet is every statement a run uses, shared by the workers.
type stmtSet struct {
	all           []*Statement // by ID
	begin, commit *Statement
	table         [][numKinds]*Statement // [table-1][kind]
	insertText    []*Statement           // oltp_insert: [table-1]
	select1       *Statement             // select_random_*
}

func (s *stmtSet) add(st *Statement) *Statement {
	st.ID = len(s.all)
	s.all = append(s.all, st)
	return st
}

// buildStatements returns the statements of wl under o. driver matters to
// oltp_insert, whose INSERT leaves out id on PostgreSQL with --auto-inc.
func buildStatements(wl *workload, o *Options) *stmtSet {
	s := &stmtSet{}
	if wl.trx && !o.SkipTrx {
		s.begin = s.add(&Statement{Name: "sb_begin", SQL: "BEGIN", Prepare: true})
		s.commit = s.add(&Statement{Name: "sb_commit", SQL: "COMMIT", Prepare: true})
	}
	s.table = make([][numKinds]*Statement, o.Tables)
	for t := 1; t <= o.Tables; t++ {
		for _, k := range wl.kinds {
			if !o.RangeSelects && k >= kSimple && k <= kDistinct {
				continue
			}
			f, reads := k.format()
			s.table[t-1][k] = s.add(&Statement{
				Name:    fmt.Sprintf("sb_%s_%d", k.name(), t),
				SQL:     fmt.Sprintf(f, t),
				Reads:   reads,
				Prepare: true,
			})
		}
	}
	switch wl.name {
	case "oltp_insert":
		for t := 1; t <= o.Tables; t++ {
			sql := fmt.Sprintf("INSERT INTO sbtest%d (id, k, c, pad) VALUES (?, ?, ?, ?)", t)
			if o.Driver == DriverPgSQL && o.AutoInc {
				sql = fmt.Sprintf("INSERT INTO sbtest%d (k, c, pad) VALUES (?, ?, ?)", t)
			}
			s.insertText = append(s.insertText, s.add(&Statement{Name: fmt.Sprintf("sb_insert_%d", t), SQL: sql}))
		}
	case "select_random_points":
		points := strings.Repeat("?, ", o.RandomPoints-1) + "?"
		s.select1 = s.add(&Statement{Name: "sb_random_points", Reads: true, Prepare: true, SQL: fmt.Sprintf(`
        SELECT id, k, c, pad
          FROM sbtest1
          WHERE k IN (%s)
        `, points)})
	case "select_random_ranges":
		ranges := strings.Repeat("k BETWEEN ? AND ? OR ", o.NumberOfRanges-1) + "k BETWEEN ? AND ?"
		s.select1 = s.add(&Statement{Name: "sb_random_ranges", Reads: true, Prepare: true, SQL: fmt.Sprintf(`
        SELECT count(k)
          FROM sbtest1
          WHERE %s`, ranges)})
	}
	return s
}

// The events. Each runs one sysbench event() on the worker's connection;
// an error aborts the event (the run loop restarts it if ignorable).

func (w *worker) readWrite(ctx context.Context) error {
	return w.trx(ctx, func() error {
		if err := w.pointSelects(ctx, w.o.PointSelects); err != nil {
			return err
		}
		if err := w.rangeSelects(ctx); err != nil {
			return err
		}
		return w.writes(ctx)
	})
}

func (w *worker) readOnly(ctx context.Context) error {
	return w.trx(ctx, func() error {
		if err := w.pointSelects(ctx, w.o.PointSelects); err != nil {
			return err
		}
		return w.rangeSelects(ctx)
	})
}

func (w *worker) writeOnly(ctx context.Context) error {
	return w.trx(ctx, func() error { return w.writes(ctx) })
}

// pointSelect runs one point select: oltp_point_select ignores
// --point-selects.
func (w *worker) pointSelect(ctx context.Context) error { return w.pointSelects(ctx, 1) }

func (w *worker) updateIndex(ctx context.Context) error { return w.indexUpdates(ctx) }

func (w *worker) updateNonIndex(ctx context.Context) error { return w.nonIndexUpdates(ctx) }

func (w *worker) deleteOne(ctx context.Context) error {
	t := w.tableNum()
	w.args[0] = IntArg(w.rowID())
	return w.exec(ctx, w.set.table[t-1][kDelete], w.args[:1])
}

func (w *worker) insertOne(ctx context.Context) error {
	t := w.tableNum()
	k := w.rowID()
	w.cbuf = w.rnd.AppendString(w.cbuf[:0], cTemplate)
	w.padbuf = w.rnd.AppendString(w.padbuf[:0], padTemplate)
	st := w.set.insertText[t-1]
	if w.o.Driver == DriverPgSQL && w.o.AutoInc {
		w.args[0], w.args[1], w.args[2] = IntArg(k), StrArg(w.cbuf), StrArg(w.padbuf)
		return w.exec(ctx, st, w.args[:3])
	}
	var id int64
	if !w.o.AutoInc {
		id = int64(w.unique.Next()) - 2147483648
	}
	w.args[0], w.args[1], w.args[2], w.args[3] = IntArg(id), IntArg(k), StrArg(w.cbuf), StrArg(w.padbuf)
	return w.exec(ctx, st, w.args[:4])
}

func (w *worker) randomPoints(ctx context.Context) error {
	args := w.wide[:w.o.RandomPoints]
	for i := range args {
		args[i] = IntArg(int64(w.rnd.Default(w.rmin, w.rmax)))
	}
	return w.exec(ctx, w.set.select1, args)
}

func (w *worker) randomRanges(ctx context.Context) error {
	args := w.wide[:2*w.o.NumberOfRanges]
	for i := 0; i < len(args); i += 2 {
		v := int64(w.rnd.Default(w.rmin, w.rmax))
		args[i], args[i+1] = IntArg(v), IntArg(v+int64(w.o.Delta))
	}
	return w.exec(ctx, w.set.select1, args)
}

// bulkPacket is the size of one bulk INSERT statement, as sysbench's
// BULK_PACKET_SIZE.
const bulkPacket = 512 * 1024

// bulkInsert adds one row to the worker's multi-row INSERT and sends the
// statement when the next row would not fit.
func (w *worker) bulkInsert(ctx context.Context) error {
	if w.bulkHead == 0 {
		w.bulk = fmt.Appendf(w.bulk[:0], "INSERT INTO sbtest%d VALUES", w.id+1)
		w.bulkHead = len(w.bulk)
	}
	w.bulkSize++
	row := fmt.Appendf(w.row[:0], "(%d,%d)", w.bulkSize, w.bulkSize)
	w.row = row
	sep := 0
	if len(w.bulk) > w.bulkHead {
		sep = 1
	}
	if len(w.bulk)+len(row)+1+sep > bulkPacket && sep == 1 {
		if err := w.bulkFlush(ctx); err != nil {
			return err
		}
		sep = 0
	}
	if sep == 1 {
		w.bulk = append(w.bulk, ',')
	}
	w.bulk = append(w.bulk, row...)
	return nil
}

// bulkFlush sends the pending rows of bulkInsert, if any.
func (w *worker) bulkFlush(ctx context.Context) error {
	if w.bulkHead == 0 || len(w.bulk) == w.bulkHead {
		return nil
	}
	st := textStatement("sb_bulk", string(w.bulk), false)
	w.bulk = w.bulk[:w.bulkHead]
	return w.exec(ctx, st, nil)
}

// Building blocks of the OLTP events, as oltp_common.lua's execute_*.

func (w *worker) trx(ctx context.Context, body func() error) error {
	if w.set.begin != nil {
		if err := w.exec(ctx, w.set.begin, nil); err != nil {
			return err
		}
	}
	if err := body(); err != nil {
		return err
	}
	if w.set.commit != nil {
		return w.exec(ctx, w.set.commit, nil)
	}
	return nil
}

func (w *worker) pointSelects(ctx context.Context, n int) error {
	st := w.set.table[w.tableNum()-1][kPoint]
	for i := 0; i < n; i++ {
		w.args[0] = IntArg(w.rowID())
		if err := w.exec(ctx, st, w.args[:1]); err != nil {
			return err
		}
	}
	return nil
}

func (w *worker) rangeSelects(ctx context.Context) error {
	if !w.o.RangeSelects {
		return nil
	}
	for _, r := range []struct {
		k kind
		n int
	}{{kSimple, w.o.SimpleRanges}, {kSum, w.o.SumRanges}, {kOrder, w.o.OrderRanges}, {kDistinct, w.o.DistinctRanges}} {
		st := w.set.table[w.tableNum()-1][r.k]
		for i := 0; i < r.n; i++ {
			id := w.rowID()
			w.args[0], w.args[1] = IntArg(id), IntArg(id+int64(w.o.RangeSize)-1)
			if err := w.exec(ctx, st, w.args[:2]); err != nil {
				return err
			}
		}
	}
	return nil
}

func (w *worker) writes(ctx context.Context) error {
	if err := w.indexUpdates(ctx); err != nil {
		return err
	}
	if err := w.nonIndexUpdates(ctx); err != nil {
		return err
	}
	return w.deleteInserts(ctx)
}

func (w *worker) indexUpdates(ctx context.Context) error {
	st := w.set.table[w.tableNum()-1][kIndexUpdate]
	for i := 0; i < w.o.IndexUpdates; i++ {
		w.args[0] = IntArg(w.rowID())
		if err := w.exec(ctx, st, w.args[:1]); err != nil {
			return err
		}
	}
	return nil
}

func (w *worker) nonIndexUpdates(ctx context.Context) error {
	st := w.set.table[w.tableNum()-1][kNonIndexUpdate]
	for i := 0; i < w.o.NonIndexUpdates; i++ {
		w.cbuf = w.rnd.AppendString(w.cbuf[:0], cTemplate)
		w.args[0], w.args[1] = StrArg(w.cbuf), IntArg(w.rowID())
		if err := w.exec(ctx, st, w.args[:2]); err != nil {
			return err
		}
	}
	return nil
}

func (w *worker) deleteInserts(ctx context.Context) error {
	t := w.tableNum()
	del, ins := w.set.table[t-1][kDelete], w.set.table[t-1][kInsert]
	for i := 0; i < w.o.DeleteInserts; i++ {
		id, k := w.rowID(), w.rowID()
		w.cbuf = w.rnd.AppendString(w.cbuf[:0], cTemplate)
		w.padbuf = w.rnd.AppendString(w.padbuf[:0], padTemplate)
		w.args[0] = IntArg(id)
		if err := w.exec(ctx, del, w.args[:1]); err != nil {
			return err
		}
		w.args[0], w.args[1], w.args[2], w.args[3] = IntArg(id), IntArg(k), StrArg(w.cbuf), StrArg(w.padbuf)
		if err := w.exec(ctx, ins, w.args[:4]); err != nil {
			return err
		}
	}
	return nil
}

// tableNum draws the table of the next statement group (sysbench's
// get_table_num: uniform over 1..tables).
func (w *worker) tableNum() int {
	return int(w.rnd.Uniform(1, uint32(w.o.Tables)))
}

// rowID draws a row id (sysbench's get_id: --rand-type over 1..table-size).
func (w *worker) rowID() int64 {
	return int64(w.rnd.Default(1, uint32(w.o.TableSize)))
}
