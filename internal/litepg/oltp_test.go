package litepg

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// The sysbench oltp_read_write statement mix on PostgreSQL, with
// sysbench 1.0's defaults: 10 point selects, one each of the four range
// queries (range size 100), two updates and a delete/insert pair per
// transaction.
const (
	oltpTableSize = 10000
	oltpRangeSize = 100
	oltpThreads   = 10
)

const (
	oltpPoint    = "SELECT c FROM sbtest1 WHERE id=$1"
	oltpSimple   = "SELECT c FROM sbtest1 WHERE id BETWEEN $1 AND $2"
	oltpSum      = "SELECT SUM(k) FROM sbtest1 WHERE id BETWEEN $1 AND $2"
	oltpOrder    = "SELECT c FROM sbtest1 WHERE id BETWEEN $1 AND $2 ORDER BY c"
	oltpDistinct = "SELECT DISTINCT c FROM sbtest1 WHERE id BETWEEN $1 AND $2 ORDER BY c"
	oltpIndexUpd = "UPDATE sbtest1 SET k=k+1 WHERE id=$1"
	oltpNonIdx   = "UPDATE sbtest1 SET c=$1 WHERE id=$2"
	oltpDelete   = "DELETE FROM sbtest1 WHERE id=$1"
	oltpInsert   = "INSERT INTO sbtest1 (id, k, c, pad) VALUES ($1, $2, $3, $4)"
)

// sbString renders sysbench's random digit template: groups of digits
// separated by '-'.
func sbString(r *rand.Rand, groups int) string {
	var b strings.Builder
	for g := 0; g < groups; g++ {
		if g > 0 {
			b.WriteByte('-')
		}
		for i := 0; i < 11; i++ {
			b.WriteByte(byte('0' + r.IntN(10)))
		}
	}
	return b.String()
}

// oltpPrepare creates and fills sbtest1 as sysbench's prepare command
// does on PostgreSQL.
func oltpPrepare(tb testing.TB, c *pgx.Conn) {
	tb.Helper()
	ctx := context.Background()
	for _, q := range []string{
		"DROP TABLE IF EXISTS sbtest1",
		"CREATE TABLE sbtest1(id SERIAL, k INTEGER DEFAULT '0' NOT NULL, c CHAR(120) DEFAULT '' NOT NULL, pad CHAR(60) DEFAULT '' NOT NULL, PRIMARY KEY (id))",
	} {
		if _, err := c.Exec(ctx, q); err != nil {
			tb.Fatalf("%s: %v", q, err)
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	rows := make([][]any, oltpTableSize)
	for i := range rows {
		rows[i] = []any{i + 1, r.IntN(oltpTableSize) + 1, sbString(r, 10), sbString(r, 5)}
	}
	n, err := c.CopyFrom(ctx, pgx.Identifier{"sbtest1"}, []string{"id", "k", "c", "pad"}, pgx.CopyFromRows(rows))
	if err != nil || n != oltpTableSize {
		tb.Fatalf("copy: %d rows, %v", n, err)
	}
	if _, err := c.Exec(ctx, "CREATE INDEX k_1 ON sbtest1(k)"); err != nil {
		tb.Fatal(err)
	}
}

// oltpTx runs one oltp_read_write transaction.
func oltpTx(ctx context.Context, c *pgx.Conn, r *rand.Rand) error {
	tx, err := c.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	id := func() int { return r.IntN(oltpTableSize) + 1 }
	var s string
	for i := 0; i < 10; i++ {
		if err := tx.QueryRow(ctx, oltpPoint, id()).Scan(&s); err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
	}
	for _, q := range []string{oltpSimple, oltpSum, oltpOrder, oltpDistinct} {
		lo := id()
		rows, err := tx.Query(ctx, q, lo, lo+oltpRangeSize-1)
		if err != nil {
			return err
		}
		for rows.Next() {
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
	}
	if _, err := tx.Exec(ctx, oltpIndexUpd, id()); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, oltpNonIdx, sbString(r, 10), id()); err != nil {
		return err
	}
	del := id()
	if _, err := tx.Exec(ctx, oltpDelete, del); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, oltpInsert, del, id(), sbString(r, 10), sbString(r, 5)); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// isRetryable reports the errors sysbench ignores and retries.
func isRetryable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40001" || pe.Code == "40P01" || pe.Code == "23505")
}

// runOLTP runs n transactions on threads connections and returns the
// number of retried transactions.
func runOLTP(tb testing.TB, url string, threads, n int) (retries int64) {
	var next atomic.Int64
	var retried atomic.Int64
	var wg sync.WaitGroup
	errc := make(chan error, threads)
	for t := 0; t < threads; t++ {
		c := connect(tb, url, pgx.QueryExecModeCacheStatement)
		wg.Add(1)
		go func(seed uint64) {
			defer wg.Done()
			r := rand.New(rand.NewPCG(seed, 7))
			ctx := context.Background()
			for next.Add(1) <= int64(n) {
				for {
					err := oltpTx(ctx, c, r)
					if err == nil {
						break
					}
					if !isRetryable(err) {
						errc <- err
						return
					}
					retried.Add(1)
				}
			}
		}(uint64(t))
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		tb.Fatalf("oltp: %v", err)
	}
	return retried.Load()
}

// BenchmarkOLTPReadWrite runs sysbench's oltp_read_write mix through the
// protocol with pgx (cached prepared statements) on 10 connections
// against a 10k-row table, and reports transactions per second.
//
//	go test -run '^$' -bench OLTPReadWrite -benchtime 3000x ./internal/litepg/
func BenchmarkOLTPReadWrite(b *testing.B) {
	for _, m := range []struct {
		name string
		mode TxMode
	}{{"adaptive", TxAdaptive}, {"deferred", TxDeferred}, {"immediate", TxImmediate}} {
		b.Run(m.name, func(b *testing.B) {
			_, url := startServer(b, Options{TxMode: m.mode})
			oltpPrepare(b, connect(b, url, pgx.QueryExecModeCacheStatement))
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			retries := runOLTP(b, url, oltpThreads, b.N)
			elapsed := time.Since(start)
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "tps")
			b.ReportMetric(float64(retries)/float64(b.N), "retries/tx")
		})
	}
}

func TestOLTPMixRuns(t *testing.T) {
	_, url := startServer(t, Options{})
	oltpPrepare(t, connect(t, url, pgx.QueryExecModeCacheStatement))
	runOLTP(t, url, 4, 40)
	c := connect(t, url, pgx.QueryExecModeCacheStatement)
	var n int
	if err := c.QueryRow(context.Background(), "SELECT count(*) FROM sbtest1").Scan(&n); err != nil || n != oltpTableSize {
		t.Fatalf("count after mix: %d, %v", n, err)
	}
	_ = fmt.Sprint()
}
