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
)

// refusal is what the fake Admitter refuses with: a 57014 with a message
// of its own, as the workload manager's errors are.
type refusal struct{}

func (refusal) Error() string    { return "57014: canceling statement due to statement queue timeout" }
func (refusal) SQLState() string { return "57014" }

// fakeAdmitter admits or refuses at once, as decide says, and counts the
// slots held. It is used by one goroutine.
type fakeAdmitter struct {
	decide  func(st *session.Statement) bool // true admits; nil admits all
	asked   []string                         // SQL of each statement asked for
	held    int                              // slots held now
	maxHeld int
}

func (a *fakeAdmitter) Admit(_ context.Context, st *session.Statement) (func(), error) {
	a.asked = append(a.asked, st.SQL)
	if a.decide != nil && !a.decide(st) {
		return nil, refusal{}
	}
	a.held++
	a.maxHeld = max(a.maxHeld, a.held)
	done := false
	return func() {
		if !done {
			done = true
			a.held--
		}
	}, nil
}

// admitRig is one session's observers under admission, without a proxy:
// client bytes go through Rewrite, server bytes through Observe, and
// sluice's own answers are taken with Pending.
type admitRig struct {
	t    testing.TB
	adm  *fakeAdmitter
	reg  *session.Registry
	up   *admitUp
	down *serverObserver
	inj  *injector
	gate *wire.Gate

	forwarded []byte // what went upstream
	answered  []byte // what sluice answered itself
}

func newAdmitRig(t testing.TB, decide func(st *session.Statement) bool) *admitRig {
	clk := clock.NewFake(time.Unix(1000, 0))
	r := &admitRig{t: t, adm: &fakeAdmitter{decide: decide}, reg: session.NewRegistry(session.Options{KeepStatements: 1 << 16})}
	sess := r.reg.Open(session.Info{Route: "test", Protocol: "postgres"}, clk.Now())
	r.up, r.down = gated(sess, clk, r.adm)
	r.gate, r.inj = r.up.g, r.up.inj
	r.server(startupDown)
	return r
}

// gated builds a session's observers with an admission gate over adm,
// wired as the front end wires them.
func gated(sess *session.Session, clk clock.Clock, adm wire.Admitter) (*admitUp, *serverObserver) {
	upObs, downObs := New(Options{Clock: clk}).observers(sess, func([]byte) {})
	g := wire.NewGate(adm)
	inj := &injector{s: downObs}
	up := &admitUp{obs: upObs, g: g, inj: inj}
	upObs.adm = up
	downObs.gate, downObs.inj = g, inj
	return up, downObs
}

// client sends b in chunks of the given sizes (0 or past the end: the rest).
func (r *admitRig) client(b []byte, sizes ...int) error {
	for len(b) > 0 {
		n := len(b)
		if len(sizes) > 0 {
			if sizes[0] > 0 && sizes[0] < n {
				n = sizes[0]
			}
			sizes = sizes[1:]
		}
		out, err := r.up.Rewrite(context.Background(), b[:n])
		if err != nil {
			return err
		}
		r.forwarded = append(r.forwarded, out...)
		b = b[n:]
		r.drain()
	}
	return nil
}

// server delivers the server's bytes, then what sluice answers.
func (r *admitRig) server(b []byte) {
	r.t.Helper()
	if err := r.down.Observe(b); err != nil {
		r.t.Fatalf("server observe: %v", err)
	}
	r.drain()
}

// drain takes sluice's answers as the down pump does: observed, then
// sent.
func (r *admitRig) drain() {
	for b := r.inj.Pending(); len(b) > 0; b = r.inj.Pending() {
		b = bytes.Clone(b)
		if err := r.down.Observe(b); err != nil {
			r.t.Fatalf("observe sluice's answer: %v", err)
		}
		r.answered = append(r.answered, b...)
	}
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

// step is one exchange of an admission scenario.
type step struct {
	cli, srv []byte // client bytes sent, then server bytes answered
	fwd      []byte // client bytes expected upstream after cli
	answered []byte // sluice's answers expected after srv (nil: none)
	held     int    // slots held after the step
}

// TestAdmitSteps: which request waits, what goes upstream, what sluice
// answers and when the slot goes back, in step tables; every table also
// runs with the client's bytes cut at every offset.
func TestAdmitSteps(t *testing.T) {
	refuseX := func(st *session.Statement) bool { return st.SQL != "x" }
	tests := []struct {
		name   string
		decide func(*session.Statement) bool
		steps  []step
		asked  []string
	}{
		{"a query outside a transaction", nil, []step{
			{cli: q("select 1"), fwd: q("select 1"), held: 1},
			{srv: answer('I'), held: 0},
		}, []string{"select 1"}},
		{"a transaction holds one slot from BEGIN to COMMIT", nil, []step{
			{cli: q("begin"), fwd: q("begin"), held: 1},
			{srv: answer('T'), held: 1},
			{cli: q("update"), fwd: q("update"), srv: answer('T'), held: 1},
			{cli: q("commit"), fwd: q("commit"), srv: answer('I'), held: 0},
			{cli: q("select 2"), fwd: q("select 2"), srv: answer('I'), held: 0},
		}, []string{"begin", "select 2"}},
		{"a failed transaction keeps its slot", nil, []step{
			{cli: q("begin"), fwd: q("begin"), srv: answer('T'), held: 1},
			{cli: q("bad"), fwd: q("bad"), srv: append(enc(pgErr("42601")), rfq('E')...), held: 1},
			{cli: q("rollback"), fwd: q("rollback"), srv: answer('I'), held: 0},
		}, []string{"begin"}},
		{"pipelined queries take one slot", nil, []step{
			{cli: append(q("a"), q("b")...), fwd: append(q("a"), q("b")...), held: 1},
			{srv: answer('I'), held: 1},
			{srv: answer('I'), held: 0},
		}, []string{"a"}},
		{"an extended batch", nil, []step{
			{cli: batch("select 1"), fwd: batch("select 1"), held: 1},
			{srv: batchAnswer('I'), held: 0},
		}, []string{"select 1"}},
		{"a prepare round trip does not wait", nil, []step{
			{cli: enc(&pgproto3.Parse{Name: "s", Query: "p"}, &pgproto3.Describe{ObjectType: 'S', Name: "s"}, &pgproto3.Sync{}),
				fwd: enc(&pgproto3.Parse{Name: "s", Query: "p"}, &pgproto3.Describe{ObjectType: 'S', Name: "s"}, &pgproto3.Sync{}),
				srv: append(enc(&pgproto3.ParseComplete{}, &pgproto3.ParameterDescription{}, &pgproto3.NoData{}), rfq('I')...)},
		}, nil},
		{"a flushed describe goes on; the batch's execute waits", nil, []step{
			{cli: enc(&pgproto3.Parse{Query: "d"}, &pgproto3.Describe{ObjectType: 'S'}, &pgproto3.Flush{}),
				fwd: enc(&pgproto3.Parse{Query: "d"}, &pgproto3.Describe{ObjectType: 'S'}, &pgproto3.Flush{}),
				srv: enc(&pgproto3.ParseComplete{}, &pgproto3.ParameterDescription{}, &pgproto3.NoData{})},
			{cli: enc(&pgproto3.Bind{}, &pgproto3.Execute{}, &pgproto3.Sync{}), fwd: enc(&pgproto3.Bind{}, &pgproto3.Execute{}, &pgproto3.Sync{}), held: 1},
			{srv: append(enc(&pgproto3.BindComplete{}, complete("SELECT 1")), rfq('I')...), held: 0},
		}, []string{"d"}},
		{"a refused query never goes upstream", refuseX, []step{
			{cli: q("x"), answered: cancelled},
			{cli: q("y"), fwd: q("y"), srv: answer('I')},
		}, []string{"x", "y"}},
		{"a refused batch is discarded through its Sync; the next request waits again", refuseX, []step{
			{cli: append(batch("x"), q("y")...), fwd: q("y"), answered: cancelled, held: 1},
			{srv: answer('I'), held: 0},
		}, []string{"x", "y"}},
		{"the refusal waits for the server's earlier answers", refuseX, []step{
			{cli: enc(&pgproto3.Parse{Name: "s", Query: "p"}, &pgproto3.Sync{}), fwd: enc(&pgproto3.Parse{Name: "s", Query: "p"}, &pgproto3.Sync{})},
			{cli: q("x")},
			{srv: append(enc(&pgproto3.ParseComplete{}), rfq('I')...), answered: cancelled},
		}, []string{"x"}},
		{"a COPY goes on inside its admitted statement", nil, []step{
			{cli: q("copy t from stdin"), fwd: q("copy t from stdin"), srv: enc(&pgproto3.CopyInResponse{}), held: 1},
			{cli: enc(&pgproto3.CopyData{Data: []byte("1\n")}, &pgproto3.CopyDone{}), fwd: enc(&pgproto3.CopyData{Data: []byte("1\n")}, &pgproto3.CopyDone{}), held: 1},
			{srv: answer('I'), held: 0},
		}, []string{"copy t from stdin"}},
	}
	for _, tt := range tests {
		var whole []byte
		for _, s := range tt.steps {
			whole = append(whole, s.cli...)
		}
		for cut := -1; cut < len(whole); cut++ {
			name := tt.name
			if cut >= 0 {
				name = fmt.Sprintf("%s/cut%d", tt.name, cut)
			}
			t.Run(name, func(t *testing.T) {
				r := newAdmitRig(t, tt.decide)
				sent := 0
				for i, s := range tt.steps {
					var sizes []int
					if cut >= sent && cut < sent+len(s.cli) && cut > sent {
						sizes = []int{cut - sent}
					}
					sent += len(s.cli)
					r.forwarded, r.answered = nil, nil
					if err := r.client(s.cli, sizes...); err != nil {
						t.Fatalf("step %d: %v", i, err)
					}
					if !bytes.Equal(r.forwarded, s.fwd) {
						t.Fatalf("step %d: forwarded %q, want %q", i, r.forwarded, s.fwd)
					}
					r.server(s.srv)
					if !bytes.Equal(r.answered, s.answered) {
						t.Fatalf("step %d: sluice answered %q, want %q", i, r.answered, s.answered)
					}
					if r.adm.held != s.held {
						t.Fatalf("step %d: %d slots held, want %d", i, r.adm.held, s.held)
					}
				}
				if fmt.Sprint(r.adm.asked) != fmt.Sprint(tt.asked) {
					t.Fatalf("admission asked for %q, want %q", r.adm.asked, tt.asked)
				}
				if r.adm.maxHeld > 1 {
					t.Fatalf("the session held %d slots at once", r.adm.maxHeld)
				}
				r.gate.Close()
				if r.adm.held != 0 {
					t.Fatalf("%d slots held after Close", r.adm.held)
				}
			})
			if cut >= 0 && testing.Short() {
				break
			}
		}
	}
}

// TestAdmitRefusedRecords: a refused statement is recorded as cancelled
// with 57014, and the statements of the discarded batch with it.
func TestAdmitRefusedRecords(t *testing.T) {
	r := newAdmitRig(t, func(st *session.Statement) bool { return false })
	two := enc(&pgproto3.Parse{Query: "x"}, &pgproto3.Bind{}, &pgproto3.Execute{}, &pgproto3.Bind{}, &pgproto3.Execute{}, &pgproto3.Sync{})
	if err := r.client(two); err != nil {
		t.Fatal(err)
	}
	if len(r.forwarded) != 0 {
		t.Fatalf("forwarded %q", r.forwarded)
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
	clk := clock.NewFake(time.Unix(1000, 0))
	reg := session.NewRegistry(session.Options{})
	sess := reg.Open(session.Info{Protocol: "postgres"}, clk.Now())
	up, downObs := gated(sess, clk, blockingAdmitter{})
	if err := downObs.Observe(startupDown); err != nil {
		t.Fatal(err)
	}
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
	clk := clock.NewFake(time.Unix(1000, 0))
	reg := session.NewRegistry(session.Options{})
	sess := reg.Open(session.Info{Protocol: "postgres"}, clk.Now())
	up, downObs := gated(sess, clk, blockingAdmitter{})
	if err := downObs.Observe(startupDown); err != nil {
		t.Fatal(err)
	}
	done := make(chan []byte, 1)
	go func() {
		out, err := up.Rewrite(context.Background(), q("select 1"))
		if err != nil {
			t.Error(err)
		}
		done <- out
	}()
	c := up.g.Canceler(nil)
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
		r := newAdmitRig(t, func(st *session.Statement) bool { return !refuse[st.SQL] })
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
				sizes := make([]int, len(chunks))
				for k, c := range chunks {
					sizes[k] = int(c)
				}
				if err := r.client(cli, sizes...); err != nil {
					t.Fatal(err)
				}
				cli = nil
				for _, a := range answers {
					r.server(a.srv)
				}
				answers = nil
			}
			if r.adm.maxHeld > 1 {
				t.Fatalf("the session held %d slots at once", r.adm.maxHeld)
			}
		}
		if len(cli) > 0 {
			if err := r.client(cli); err != nil {
				t.Fatal(err)
			}
		}
		if !bytes.Equal(r.forwarded, wantFwd) {
			t.Fatalf("forwarded\n %q\nwant\n %q", r.forwarded, wantFwd)
		}
		if !bytes.Equal(r.answered, wantAns) {
			t.Fatalf("answered\n %q\nwant\n %q", r.answered, wantAns)
		}
		if !inTx && len(answers) == 0 && r.adm.held != 0 {
			t.Fatalf("idle session holds %d slots", r.adm.held)
		}
		r.gate.Close()
		if r.adm.held != 0 {
			t.Fatalf("%d slots after Close", r.adm.held)
		}
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
			r.gate = wire.NewGate(freeAdmitter{})
			r.up.g, r.down.gate = r.gate, r.gate
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
