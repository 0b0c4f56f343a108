package pg

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/sluicelab/sluice/internal/session"
)

// sessionOf finds the relay session of a pgx connection by its cancel key,
// which passes through unchanged.
func sessionOf(t testing.TB, r *relay, c *pgconn.PgConn) *session.Session {
	t.Helper()
	key := binary.BigEndian.AppendUint32(nil, c.PID())
	key = append(key, c.SecretKey()...)
	s := r.Reg.ByCancelKey(string(key))
	if s == nil {
		t.Fatalf("no session registered cancel key %x", key)
	}
	return s
}

// statementsOf returns the statements of one session begun after the
// first `skip` of them.
func statementsOf(r *relay, s *session.Session, skip int) []session.Snapshot {
	var out []session.Snapshot
	for _, st := range r.statements() {
		if st.SessionID == s.ID {
			out = append(out, st)
		}
	}
	if skip > len(out) {
		return nil
	}
	return out[skip:]
}

// within reports whether got is within frac of want.
func within(got, want int64, frac float64) bool {
	return math.Abs(float64(got-want)) <= frac*float64(want)
}

func checkBytes(t *testing.T, sts []session.Snapshot, wrote, read int64) {
	t.Helper()
	var up, down int64
	for _, st := range sts {
		up += st.BytesUp
		down += st.BytesDown
	}
	t.Logf("client wrote %d bytes, statements hold %d; client read %d, statements hold %d", wrote, up, read, down)
	if !within(up, wrote, 0.03) || !within(down, read, 0.03) {
		t.Errorf("statement bytes %d up / %d down, client saw %d / %d", up, down, wrote, read)
	}
}

func TestPgxQueryModes(t *testing.T) {
	db, r := relayToDB(t)
	ctx := context.Background()
	modes := []pgx.QueryExecMode{
		pgx.QueryExecModeSimpleProtocol,
		pgx.QueryExecModeExec,
		pgx.QueryExecModeCacheStatement,
		pgx.QueryExecModeCacheDescribe,
		pgx.QueryExecModeDescribeExec,
	}
	const (
		insert = "INSERT INTO wirepg_modes VALUES ($1, $2)"
		add    = "SELECT $1::int + 1"
		scan   = "SELECT id, v FROM wirepg_modes WHERE id < $1 ORDER BY id"
		div    = "SELECT 1 / $1::int"
	)
	for _, mode := range modes {
		t.Run(mode.String(), func(t *testing.T) {
			var cnt counters
			cfg, err := pgx.ParseConfig(r.url(db, ""))
			if err != nil {
				t.Fatal(err)
			}
			cfg.DialFunc = dialCounting(&cnt)
			cfg.DefaultQueryExecMode = mode
			conn, err := pgx.ConnectConfig(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(ctx)
			sess := sessionOf(t, r, conn.PgConn())
			if sess.User() != db.user || sess.Database() != db.database {
				t.Errorf("identity %q/%q", sess.User(), sess.Database())
			}
			read0, wrote0 := cnt.read.Load(), cnt.written.Load()

			if _, err := conn.Exec(ctx, "CREATE TEMP TABLE wirepg_modes (id int, v text)"); err != nil {
				t.Fatal(err)
			}
			for i := range 20 {
				if _, err := conn.Exec(ctx, insert, i, strings.Repeat("v", i*10)); err != nil {
					t.Fatal(err)
				}
			}
			for i := range 20 {
				var n int
				if err := conn.QueryRow(ctx, add, i).Scan(&n); err != nil || n != i+1 {
					t.Fatalf("%s: %d, %v", add, n, err)
				}
			}
			for range 5 {
				rows, _ := conn.Query(ctx, scan, 10)
				n := 0
				for rows.Next() {
					n++
				}
				if err := rows.Err(); err != nil || n != 10 {
					t.Fatalf("%s: %d rows, %v", scan, n, err)
				}
			}
			var pgErr *pgconn.PgError
			if _, err := conn.Exec(ctx, div, 0); !errors.As(err, &pgErr) || pgErr.Code != "22012" {
				t.Fatalf("division by zero: %v", err)
			}
			read1, wrote1 := cnt.read.Load(), cnt.written.Load()

			sts := statementsOf(r, sess, 0)
			if len(sts) != 47 {
				t.Fatalf("%d statements, want 47", len(sts))
			}
			bySQL := map[string]int{}
			for _, st := range sts {
				bySQL[st.SQL]++
				if st.Outcome == session.Running {
					t.Errorf("statement %q still running", st.SQL)
				}
			}
			if mode != pgx.QueryExecModeSimpleProtocol {
				// Extended protocol: the SQL is the prepared text.
				for sql, want := range map[string]int{insert: 20, add: 20, scan: 5, div: 1} {
					if bySQL[sql] != want {
						t.Errorf("%d statements with SQL %q, want %d (have %v)", bySQL[sql], sql, want, bySQL)
					}
				}
			}
			for _, st := range sts {
				switch {
				case strings.HasPrefix(st.SQL, "SELECT id, v"):
					if st.Rows != 10 || st.Outcome != session.OK {
						t.Errorf("scan: %+v", st)
					}
				case strings.HasPrefix(st.SQL, "INSERT"):
					if st.Rows != 1 || st.Outcome != session.OK {
						t.Errorf("insert: %+v", st)
					}
				case strings.HasPrefix(st.SQL, "SELECT 1 /"):
					if st.Outcome != session.Failed || st.Code != "22012" {
						t.Errorf("division: %+v", st)
					}
				}
			}
			checkBytes(t, sts, wrote1-wrote0, read1-read0)
		})
	}
	r.checkOpenErrors(t)
}

func TestPgxBatchAndPipeline(t *testing.T) {
	db, r := relayToDB(t)
	ctx := context.Background()
	var cnt counters
	cfg, err := pgx.ParseConfig(r.url(db, ""))
	if err != nil {
		t.Fatal(err)
	}
	cfg.DialFunc = dialCounting(&cnt)
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	sess := sessionOf(t, r, conn.PgConn())
	read0, wrote0 := cnt.read.Load(), cnt.written.Load()

	// A pgx batch: one round trip, many Executes, one Sync.
	const sel = "SELECT g, repeat('x', $1::int) FROM generate_series(1, $2::int) g"
	b := &pgx.Batch{}
	for i := 1; i <= 10; i++ {
		b.Queue(sel, i, i)
	}
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		t.Fatal(err)
	}
	sts := statementsOf(r, sess, 0)
	if len(sts) != 10 {
		t.Fatalf("batch: %d statements, want 10", len(sts))
	}
	for i, st := range sts {
		if st.SQL != sel || st.Rows != int64(i+1) || st.Outcome != session.OK {
			t.Errorf("batch statement %d: %+v", i, st)
		}
	}

	// A pipeline with an error in its first batch: the rest of that
	// batch is skipped by the server, the next batch runs.
	pc := conn.PgConn()
	p := pc.StartPipeline(ctx)
	p.SendPrepare("wirepg_ps", "SELECT $1::int * 2", nil)
	for i := range 3 {
		p.SendQueryPrepared("wirepg_ps", [][]byte{fmt.Appendf(nil, "%d", i)}, nil, nil)
	}
	p.SendQueryParams("SELECT 1 / $1::int", [][]byte{[]byte("0")}, nil, nil, nil)
	p.SendQueryParams("SELECT 'skipped'", nil, nil, nil, nil)
	p.SendPipelineSync()
	p.SendQueryPrepared("wirepg_ps", [][]byte{[]byte("21")}, nil, nil)
	if err := p.Sync(); err != nil {
		t.Fatal(err)
	}
	var pgErrs int
	for {
		res, err := p.GetResults()
		if err != nil {
			var pe *pgconn.PgError
			if !errors.As(err, &pe) {
				t.Fatal(err)
			}
			pgErrs++
			continue
		}
		if res == nil {
			break
		}
		if rr, ok := res.(*pgconn.ResultReader); ok {
			rr.Close()
		}
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	read1, wrote1 := cnt.read.Load(), cnt.written.Load()
	sts = statementsOf(r, sess, 10)
	want := []struct {
		sql  string
		o    session.Outcome
		code string
	}{
		{"SELECT $1::int * 2", session.OK, ""},
		{"SELECT $1::int * 2", session.OK, ""},
		{"SELECT $1::int * 2", session.OK, ""},
		{"SELECT 1 / $1::int", session.Failed, "22012"},
		{"SELECT 'skipped'", session.Failed, "22012"},
		{"SELECT $1::int * 2", session.OK, ""},
	}
	if len(sts) != len(want) {
		t.Fatalf("pipeline: %d statements, want %d: %+v", len(sts), len(want), sts)
	}
	for i, w := range want {
		if sts[i].SQL != w.sql || sts[i].Outcome != w.o || sts[i].Code != w.code {
			t.Errorf("pipeline statement %d: %+v, want %+v", i, sts[i], w)
		}
	}
	checkBytes(t, statementsOf(r, sess, 0), wrote1-wrote0, read1-read0)
}
