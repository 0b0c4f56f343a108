package pg

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/session"
	"github.com/sluicelab/sluice/internal/testenv"
	"github.com/sluicelab/sluice/internal/wire"
	"github.com/sluicelab/sluice/internal/wire/wiretest"
)

// admitRig is one session's observers under admission, without a proxy,
// with the protocol's own parts besides the rig's.
type admitRig struct {
	*wiretest.AdmitRig
	reg  *session.Registry
	up   *admitUp
	down *serverObserver
}

// newAdmitRig builds a rig whose Admitter refuses the statements refuse
// says are refused (nil: none).
func newAdmitRig(t testing.TB, refuse func(st *session.Statement) bool) *admitRig {
	clk := clock.NewFake(time.Unix(1000, 0))
	reg := session.NewRegistry(session.Options{KeepStatements: 1 << 16})
	sess := reg.Open(session.Info{Route: "test", Protocol: "postgres"}, clk.Now())
	adm := &wiretest.Admitter{Refuse: refuse}
	up, down := gated(sess, clk, adm)
	r := &admitRig{
		AdmitRig: &wiretest.AdmitRig{T: t, Adm: adm, Gate: up.Gate, Up: up, Down: down, Inj: up.inj},
		reg:      reg, up: up, down: down,
	}
	r.Server(startupDown)
	return r
}

// gated builds a session's observers with an admission gate over adm,
// wired as the front end wires them.
func gated(sess *session.Session, clk clock.Clock, adm wire.Admitter) (*admitUp, *serverObserver) {
	upObs, downObs := New(Options{Clock: clk}).observers(sess, func([]byte) {})
	g := wire.NewGate(adm)
	inj := &injector{s: downObs}
	up := &admitUp{Admitting: wire.Admitting{Gate: g}, obs: upObs, inj: inj}
	upObs.adm = up
	downObs.gate, downObs.inj = g, inj
	return up, downObs
}

func q(sql string) []byte { return enc(&pgproto3.Query{String: sql}) }

func batch(sql string) []byte {
	return enc(&pgproto3.Parse{Query: sql}, &pgproto3.Bind{}, &pgproto3.Describe{ObjectType: 'P'}, &pgproto3.Execute{}, &pgproto3.Sync{})
}

func rfq(status byte) []byte { return enc(&pgproto3.ReadyForQuery{TxStatus: status}) }

func answer(status byte) []byte { return append(enc(complete("SELECT 1")), rfq(status)...) }

func batchAnswer(status byte) []byte {
	return append(enc(&pgproto3.ParseComplete{}, &pgproto3.BindComplete{}, &pgproto3.NoData{}, complete("SELECT 1")), rfq(status)...)
}

// cancelled is what sluice answers for a refused statement.
var cancelled = append(errorResponse(severityError, "57014", "canceling statement due to statement queue timeout"), readyIdle...)

// TestAdmitSteps: which request waits, what goes upstream, what sluice
// answers and when the slot goes back, in step tables; every table also
// runs with the client's bytes cut at every offset.
func TestAdmitSteps(t *testing.T) {
	tests := []wiretest.AdmitCase{
		{Name: "a query outside a transaction", Steps: []wiretest.AdmitStep{
			{Cli: q("select 1"), Fwd: q("select 1"), Held: 1},
			{Srv: answer('I'), Held: 0},
		}, Asked: []string{"select 1"}},
		{Name: "a transaction holds one slot from BEGIN to COMMIT", Steps: []wiretest.AdmitStep{
			{Cli: q("begin"), Fwd: q("begin"), Held: 1},
			{Srv: answer('T'), Held: 1},
			{Cli: q("update"), Fwd: q("update"), Srv: answer('T'), Held: 1},
			{Cli: q("commit"), Fwd: q("commit"), Srv: answer('I'), Held: 0},
			{Cli: q("select 2"), Fwd: q("select 2"), Srv: answer('I'), Held: 0},
		}, Asked: []string{"begin", "select 2"}},
		{Name: "a failed transaction keeps its slot", Steps: []wiretest.AdmitStep{
			{Cli: q("begin"), Fwd: q("begin"), Srv: answer('T'), Held: 1},
			{Cli: q("bad"), Fwd: q("bad"), Srv: append(enc(pgErr("42601")), rfq('E')...), Held: 1},
			{Cli: q("rollback"), Fwd: q("rollback"), Srv: answer('I'), Held: 0},
		}, Asked: []string{"begin"}},
		{Name: "pipelined queries take one slot", Steps: []wiretest.AdmitStep{
			{Cli: append(q("a"), q("b")...), Fwd: append(q("a"), q("b")...), Held: 1},
			{Srv: answer('I'), Held: 1},
			{Srv: answer('I'), Held: 0},
		}, Asked: []string{"a"}},
		{Name: "an extended batch", Steps: []wiretest.AdmitStep{
			{Cli: batch("select 1"), Fwd: batch("select 1"), Held: 1},
			{Srv: batchAnswer('I'), Held: 0},
		}, Asked: []string{"select 1"}},
		{Name: "a prepare round trip does not wait", Steps: []wiretest.AdmitStep{
			{Cli: enc(&pgproto3.Parse{Name: "s", Query: "p"}, &pgproto3.Describe{ObjectType: 'S', Name: "s"}, &pgproto3.Sync{}),
				Fwd: enc(&pgproto3.Parse{Name: "s", Query: "p"}, &pgproto3.Describe{ObjectType: 'S', Name: "s"}, &pgproto3.Sync{}),
				Srv: append(enc(&pgproto3.ParseComplete{}, &pgproto3.ParameterDescription{}, &pgproto3.NoData{}), rfq('I')...)},
		}},
		{Name: "a flushed describe goes on; the batch's execute waits", Steps: []wiretest.AdmitStep{
			{Cli: enc(&pgproto3.Parse{Query: "d"}, &pgproto3.Describe{ObjectType: 'S'}, &pgproto3.Flush{}),
				Fwd: enc(&pgproto3.Parse{Query: "d"}, &pgproto3.Describe{ObjectType: 'S'}, &pgproto3.Flush{}),
				Srv: enc(&pgproto3.ParseComplete{}, &pgproto3.ParameterDescription{}, &pgproto3.NoData{})},
			{Cli: enc(&pgproto3.Bind{}, &pgproto3.Execute{}, &pgproto3.Sync{}), Fwd: enc(&pgproto3.Bind{}, &pgproto3.Execute{}, &pgproto3.Sync{}), Held: 1},
			{Srv: append(enc(&pgproto3.BindComplete{}, complete("SELECT 1")), rfq('I')...), Held: 0},
		}, Asked: []string{"d"}},
		{Name: "a refused query never goes upstream", Refuse: []string{"x"}, Steps: []wiretest.AdmitStep{
			{Cli: q("x"), Answered: cancelled},
			{Cli: q("y"), Fwd: q("y"), Srv: answer('I')},
		}, Asked: []string{"x", "y"}},
		{Name: "a refused batch is discarded through its Sync; the next request waits again", Refuse: []string{"x"}, Steps: []wiretest.AdmitStep{
			{Cli: append(batch("x"), q("y")...), Fwd: q("y"), Answered: cancelled, Held: 1},
			{Srv: answer('I'), Held: 0},
		}, Asked: []string{"x", "y"}},
		{Name: "the refusal waits for the server's earlier answers", Refuse: []string{"x"}, Steps: []wiretest.AdmitStep{
			{Cli: enc(&pgproto3.Parse{Name: "s", Query: "p"}, &pgproto3.Sync{}), Fwd: enc(&pgproto3.Parse{Name: "s", Query: "p"}, &pgproto3.Sync{})},
			{Cli: q("x")},
			{Srv: append(enc(&pgproto3.ParseComplete{}), rfq('I')...), Answered: cancelled},
		}, Asked: []string{"x"}},
		{Name: "a COPY goes on inside its admitted statement", Steps: []wiretest.AdmitStep{
			{Cli: q("copy t from stdin"), Fwd: q("copy t from stdin"), Srv: enc(&pgproto3.CopyInResponse{}), Held: 1},
			{Cli: enc(&pgproto3.CopyData{Data: []byte("1\n")}, &pgproto3.CopyDone{}), Fwd: enc(&pgproto3.CopyData{Data: []byte("1\n")}, &pgproto3.CopyDone{}), Held: 1},
			{Srv: answer('I'), Held: 0},
		}, Asked: []string{"copy t from stdin"}},
	}
	wiretest.RunAdmitCases(t, tests, func(t *testing.T) *wiretest.AdmitRig { return newAdmitRig(t, nil).AdmitRig })
}

// TestAdmitRefusedRecords: a refused statement is recorded as cancelled
// with 57014, and the statements of the discarded batch with it.
func TestAdmitRefusedRecords(t *testing.T) {
	r := newAdmitRig(t, func(*session.Statement) bool { return true })
	two := enc(&pgproto3.Parse{Query: "x"}, &pgproto3.Bind{}, &pgproto3.Execute{}, &pgproto3.Bind{}, &pgproto3.Execute{}, &pgproto3.Sync{})
	if err := r.Client(two); err != nil {
		t.Fatal(err)
	}
	if len(r.Forwarded) != 0 {
		t.Fatalf("forwarded %q", r.Forwarded)
	}
	sts := r.reg.Recent()
	if len(sts) != 2 || len(r.reg.Active()) != 0 {
		t.Fatalf("%d ended, %d running; want 2 ended", len(sts), len(r.reg.Active()))
	}
	for _, st := range sts {
		if s := st.Snapshot(); s.Outcome != session.Cancelled || s.Code != "57014" {
			t.Fatalf("statement %q: %v %s", s.SQL, s.Outcome, s.Code)
		}
	}
}

// TestAdmitWaitEndsWithSession: a wait whose context ends returns the
// context's error and forwards nothing.
func TestAdmitWaitEndsWithSession(t *testing.T) {
	up := blocked(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	var out []byte
	go func() {
		var err error
		out, err = up.Rewrite(ctx, q("select 1"))
		done <- err
	}()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) || len(out) != 0 {
		t.Fatalf("Rewrite = %q, %v; want nothing and context.Canceled", out, err)
	}
}

// blocked returns the client observer of a session past its startup
// whose Admitter admits nothing.
func blocked(t *testing.T) *admitUp {
	clk := clock.NewFake(time.Unix(1000, 0))
	sess := session.NewRegistry(session.Options{}).Open(session.Info{Protocol: "postgres"}, clk.Now())
	up, downObs := gated(sess, clk, blockingAdmitter{})
	if err := downObs.Observe(startupDown); err != nil {
		t.Fatal(err)
	}
	return up
}

// blockingAdmitter admits nothing until ctx ends.
type blockingAdmitter struct{}

func (blockingAdmitter) Admit(ctx context.Context, _ *session.Statement) (func(), error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestAdmitGateCancel: the session's Canceler ends a wait in progress
// (as a client's CancelRequest does), and the client reads 57014 "due to
// user request".
func TestAdmitGateCancel(t *testing.T) {
	up := blocked(t)
	done := make(chan []byte, 1)
	go func() {
		out, err := up.Rewrite(context.Background(), q("select 1"))
		if err != nil {
			t.Error(err)
		}
		done <- out
	}()
	c := up.Gate.Canceler(nil)
	testenv.Eventually(t, 10*time.Second, "a cancel of the wait, once it has begun", func() bool {
		return c.Cancel(context.Background()) == nil
	})
	if out := <-done; len(out) != 0 {
		t.Fatalf("forwarded %q", out)
	}
	want := append(errorResponse(severityError, "57014", "canceling statement due to user request"), readyIdle...)
	if got := up.inj.Pending(); !bytes.Equal(got, want) {
		t.Fatalf("answered %q, want %q", got, want)
	}
}

// FuzzAdmitLifecycle drives a session under admission with requests the
// fuzzer picks (queries, batches, prepare round trips, transactions),
// each admitted or refused, cut into chunks the fuzzer picks, and the
// server's answers; the bytes forwarded are exactly the admitted
// requests', sluice answers each refused one, and the session never
// holds more than one slot nor keeps one once idle.
func FuzzAdmitLifecycle(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3}, []byte{0})
	f.Add([]byte{4, 0x10, 0x21, 5, 0x33}, []byte{3, 7})
	f.Add([]byte{0x80, 0x81, 0x02, 0x83}, []byte{1, 1, 1})
	f.Fuzz(func(t *testing.T, ops, chunks []byte) {
		if len(ops) > 64 {
			ops = ops[:64]
		}
		refuse := map[string]bool{}
		r := newAdmitRig(t, func(st *session.Statement) bool { return refuse[st.SQL] })
		var cli, wantFwd, wantAns []byte
		inTx := false
		type pendingAnswer struct{ srv []byte }
		var answers []pendingAnswer
		for i, op := range ops {
			sql := fmt.Sprintf("s%d", i)
			refused := op&0x80 != 0 && !inTx && len(answers) == 0
			if refused {
				refuse[sql], refuse[sql+"b"] = true, true
			}
			status := byte('I')
			switch op >> 4 & 3 {
			case 1:
				status = 'T'
			case 2:
				status = 'E'
			}
			var req, srv []byte
			switch op & 3 {
			case 0:
				req, srv = q(sql), answer(status)
			case 1:
				req, srv = batch(sql), batchAnswer(status)
			case 2:
				p := enc(&pgproto3.Parse{Name: sql, Query: sql}, &pgproto3.Sync{})
				req, srv = p, append(enc(&pgproto3.ParseComplete{}), rfq(status)...)
				refused = false
				delete(refuse, sql)
			case 3:
				req, srv = append(q(sql), q(sql+"b")...), append(answer(status), answer(status)...)
			}
			cli = append(cli, req...)
			if refused {
				wantAns = append(wantAns, cancelled...)
				if op&3 == 3 {
					wantAns = append(wantAns, cancelled...) // the pipelined one waits, and is refused, too
				}
				continue
			}
			wantFwd = append(wantFwd, req...)
			answers = append(answers, pendingAnswer{srv})
			inTx = status != 'I'
			if op&0x40 != 0 || i == len(ops)-1 {
				// The client waits: send what it has, then the answers.
				if err := r.Client(cli, wiretest.Sizes(chunks)...); err != nil {
					t.Fatal(err)
				}
				cli = nil
				for _, a := range answers {
					r.Server(a.srv)
				}
				answers = nil
			}
			if r.Adm.MaxHeld > 1 {
				t.Fatalf("the session held %d slots at once", r.Adm.MaxHeld)
			}
		}
		if len(cli) > 0 {
			if err := r.Client(cli); err != nil {
				t.Fatal(err)
			}
		}
		r.Finish(wantFwd, wantAns, !inTx && len(answers) == 0)
	})
}

// freeAdmitter admits at once without a slot, as the workload manager
// does for a pool without a limit.
type freeAdmitter struct{}

func noRelease() {}

func (freeAdmitter) Admit(context.Context, *session.Statement) (func(), error) { return noRelease, nil }

// BenchmarkAdmitObserve is the cost per prepared statement (Bind,
// Execute, Sync and its answer) of the observers without admission and
// with admission to a pool without a limit.
func BenchmarkAdmitObserve(b *testing.B) {
	cli := enc(&pgproto3.Bind{PreparedStatement: "P0_1", Parameters: [][]byte{[]byte("48213")}}, &pgproto3.Execute{}, &pgproto3.Sync{})
	srv := enc(&pgproto3.BindComplete{}, dataRow("-2913"), complete("SELECT 1"), ready)
	for _, admit := range []bool{false, true} {
		b.Run(fmt.Sprintf("admission=%v", admit), func(b *testing.B) {
			r := newAdmitRig(b, nil)
			r.Gate = wire.NewGate(freeAdmitter{})
			r.up.Gate, r.down.gate = r.Gate, r.Gate
			if !admit {
				r.down.gate, r.down.inj = nil, nil
			}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if admit {
					if _, err := r.up.Rewrite(ctx, cli); err != nil {
						b.Fatal(err)
					}
				} else if err := r.up.obs.Observe(cli); err != nil {
					b.Fatal(err)
				}
				if err := r.down.Observe(srv); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
