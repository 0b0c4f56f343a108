package metrics_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicelab/sluice/internal/httpapi/metrics"
	"github.com/sluicelab/sluice/internal/session"
	"github.com/sluicelab/sluice/internal/wlm/wlmtest"
)

// TestAdmissionMetrics holds a statement for 2 s in a pool of
// active_statements 1 and reads the gauges and the block-time
// histogram while it waits and after.
func TestAdmissionMetrics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := wlmtest.New(t, "CREATE RESOURCE POOL p WITH (active_statements=1); CREATE RESOURCE POOL free; CREATE USER u RESOURCE POOL 'p'")
		f := &fixture{Env: e, m: newMetrics(t, e, nil)}
		ctx := context.Background()
		begin := func() *session.Statement {
			s := e.Registry.Open(session.Info{Route: "rt", Protocol: "postgres"}, e.Clock.Now())
			s.SetIdentity("u", "db", "")
			s.SetPool("p")
			return s.Begin("select 1", e.Clock.Now())
		}
		release1, err := e.Manager.Admission().Admit(ctx, begin())
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan func(), 1)
		go func() {
			r, err := e.Manager.Admission().Admit(ctx, begin())
			if err != nil {
				t.Error(err)
			}
			done <- r
		}()
		synctest.Wait()
		e.Clock.Advance(2 * time.Second)

		fams := f.gather(t)
		checkSamples(t, fams, []sample{
			{"sluice_pool_active_statements", []string{"pool", "p"}, 1},
			{"sluice_pool_active_statements", []string{"pool", "free"}, 0},
			{"sluice_pool_admission_running", []string{"pool", "p"}, 1},
			{"sluice_pool_admission_waiting", []string{"pool", "p"}, 1},
			{"sluice_statements_running", []string{"route", "rt", "user", "other", "pool", "p"}, 1},
		})
		if _, ok := value(fams, "sluice_pool_block_seconds", "pool", "p"); ok {
			t.Error("block-time histogram before any wait ended")
		}
		if _, ok := value(fams, "sluice_pool_admission_running", "pool", "free"); ok {
			t.Error("admission gauges for a pool without a limit")
		}

		release1()
		synctest.Wait()
		release2 := <-done
		fams = f.gather(t)
		h := fams["sluice_pool_block_seconds"]
		if h == nil || len(h.Metric) != 1 {
			t.Fatalf("sluice_pool_block_seconds = %v", h)
		}
		hist := h.Metric[0].Histogram
		if hist.GetSampleCount() != 1 || hist.GetSampleSum() != 2 {
			t.Errorf("block-time histogram: count %d sum %v, want 1 and 2", hist.GetSampleCount(), hist.GetSampleSum())
		}
		for _, b := range hist.Bucket {
			want := uint64(0)
			if b.GetUpperBound() >= 2 {
				want = 1
			}
			if b.GetCumulativeCount() != want {
				t.Errorf("bucket le=%v: %d, want %d", b.GetUpperBound(), b.GetCumulativeCount(), want)
			}
		}
		if got, _ := value(fams, "sluice_pool_admission_waiting", "pool", "p"); got != 0 {
			t.Errorf("waiting after admission = %v", got)
		}
		release2()
	})
}

// TestIdleInTransactionMetrics: a session idle in a transaction on a
// slot of p for 7 s shows in the idle gauges of p; a pool with a limit
// and no such session shows 0.
func TestIdleInTransactionMetrics(t *testing.T) {
	e := wlmtest.New(t, "CREATE RESOURCE POOL p WITH (active_statements=1); CREATE RESOURCE POOL q WITH (active_statements=2)")
	f := &fixture{Env: e, m: newMetrics(t, e, func(o *metrics.Options) { o.Clock = e.Clock })}
	s := e.Registry.Open(session.Info{Route: "rt", Protocol: "postgres"}, e.Clock.Now())
	s.TakeSlot("p", e.Clock.Now())
	s.SetIdleInTransaction(e.Clock.Now())
	e.Clock.Advance(7 * time.Second)
	checkSamples(t, f.gather(t), []sample{
		{"sluice_pool_idle_in_transaction_sessions", []string{"pool", "p"}, 1},
		{"sluice_pool_idle_in_transaction_max_seconds", []string{"pool", "p"}, 7},
		{"sluice_pool_idle_in_transaction_sessions", []string{"pool", "q"}, 0},
		{"sluice_pool_idle_in_transaction_max_seconds", []string{"pool", "q"}, 0},
	})
}
