package mysql

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/sluicelab/sluice/internal/session"
	"github.com/sluicelab/sluice/internal/wire"
)

// refusal is what the fake Admitter refuses with.
type refusal struct{}

func (refusal) Error() string    { return "57014: canceling statement due to statement queue timeout" }
func (refusal) SQLState() string { return "57014" }

// fakeAdmitter admits or refuses at once and counts the slots held. It
// is used by one goroutine.
type fakeAdmitter struct {
	refuse  map[string]bool // SQL refused
	asked   []string
	held    int
	maxHeld int
}

func (a *fakeAdmitter) Admit(_ context.Context, st *session.Statement) (func(), error) {
	a.asked = append(a.asked, st.SQL)
	if a.refuse[st.SQL] {
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

// admitRig is one session's observers under admission without a proxy.
type admitRig struct {
	t    testing.TB
	adm  *fakeAdmitter
	reg  *session.Registry
	up   *admitUp
	down *downObserver
	inj  *injector
	gate *wire.Gate

	forwarded, answered []byte
}

func newAdmitRig(t testing.TB, routes *gates, connID uint32) *admitRig {
	reg, _, u, d := harnessObservers(testCaps, 0, false)
	r := &admitRig{t: t, adm: &fakeAdmitter{refuse: map[string]bool{}}, reg: reg, down: d}
	r.gate = wire.NewGate(r.adm)
	r.inj = &injector{d: d}
	if routes == nil {
		routes = &gates{}
	}
	r.up = &admitUp{u: u, g: r.gate, inj: r.inj, route: routes}
	u.adm = r.up
	d.gate, d.inj = r.gate, r.inj
	routes.add(connID, r.gate)
	return r
}

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

func (r *admitRig) server(b []byte) {
	r.t.Helper()
	if err := r.down.Observe(b); err != nil {
		r.t.Fatalf("server observe: %v", err)
	}
	r.drain()
}

func (r *admitRig) drain() {
	for b := r.inj.Pending(); len(b) > 0; b = r.inj.Pending() {
		b = bytes.Clone(b)
		if err := r.down.Observe(b); err != nil {
			r.t.Fatalf("observe sluice's answer: %v", err)
		}
		r.answered = append(r.answered, b...)
	}
}

const inTrans, autocommit = 0x0001, 0x0002

func ok(status uint16) []byte { return pk(1, okPayload(0, status)) }

func execute(id uint32) []byte {
	return pk(0, []byte{comStmtExecute}, le32(id), []byte{0}, le32(1))
}

// interrupted is sluice's answer to a command refused as fakeAdmitter
// refuses: ERR 1317 with the refusal's message.
func interrupted(seq uint8) []byte {
	return errPacket(seq, erQueryInterrupt, "70100", "canceling statement due to statement queue timeout")
}

type admitStep struct {
	cli, srv []byte
	fwd      []byte
	answered []byte
	held     int
}

// TestAdmitSteps: which commands wait, what goes upstream, what sluice
// answers and when the slot goes back, with the client's bytes also cut
// at every offset.
func TestAdmitSteps(t *testing.T) {
	prepare := pk(0, []byte{comStmtPrepare}, []byte("SELECT ?"))
	prepareOK := bytes.Join([][]byte{pk(1, []byte{0x00}, le32(7), le16(0), le16(1), []byte{0}, le16(0)),
		pk(2, colDef("?")), pk(3, eofPayload(autocommit))}, nil)
	replStream, _ := binlogStream(1, 7)
	tests := []struct {
		name   string
		refuse []string
		steps  []admitStep
		asked  []string
	}{
		{"a query outside a transaction", nil, []admitStep{
			{cli: query("select 1"), fwd: query("select 1"), held: 1},
			{srv: ok(autocommit), held: 0},
		}, []string{"select 1"}},
		{"a transaction keeps its slot until its status ends", nil, []admitStep{
			{cli: query("begin"), fwd: query("begin"), srv: ok(autocommit | inTrans), held: 1},
			{cli: query("update"), fwd: query("update"), srv: ok(autocommit | inTrans), held: 1},
			{cli: query("bad"), fwd: query("bad"), srv: pk(1, errPayload(1064, "42000", "syntax")), held: 1},
			{cli: query("commit"), fwd: query("commit"), srv: ok(autocommit), held: 0},
		}, []string{"begin"}},
		{"pings and prepares do not wait", nil, []admitStep{
			{cli: pk(0, []byte{comPing}), fwd: pk(0, []byte{comPing}), srv: ok(autocommit)},
			{cli: prepare, fwd: prepare, srv: prepareOK},
			{cli: execute(7), fwd: execute(7), held: 1},
			{srv: ok(autocommit), held: 0},
		}, []string{"SELECT ?"}},
		{"pipelined commands take one slot", nil, []admitStep{
			{cli: append(query("a"), query("b")...), fwd: append(query("a"), query("b")...), held: 1},
			{srv: ok(autocommit), held: 1},
			{srv: ok(autocommit), held: 0},
		}, []string{"a"}},
		{"a refused query never goes upstream", []string{"x"}, []admitStep{
			{cli: query("x"), answered: interrupted(1)},
			{cli: query("y"), fwd: query("y"), srv: ok(autocommit)},
		}, []string{"x", "y"}},
		{"a replica is never held once it registers", nil, []admitStep{
			{cli: query("SET @a=1"), fwd: query("SET @a=1"), held: 1},
			{srv: ok(autocommit), held: 0},
			{cli: registerSlave(), fwd: registerSlave(), srv: ok(autocommit)},
			{cli: query("SET @b=1"), fwd: query("SET @b=1"), srv: ok(autocommit)},
			{cli: binlogDump(), fwd: binlogDump(), srv: replStream},
			{cli: query("SELECT 1"), fwd: query("SELECT 1")},
		}, []string{"SET @a=1"}},
		{"a refused registration keeps a client", nil, []admitStep{
			{cli: registerSlave(), fwd: registerSlave(), srv: pk(1, errPayload(1227, "42000", "Access denied"))},
			{cli: query("SELECT 1"), fwd: query("SELECT 1"), held: 1},
			{srv: ok(autocommit), held: 0},
		}, []string{"SELECT 1"}},
		{"a refused execute, then a pipelined query waits again", []string{"COM_STMT_EXECUTE 9"}, []admitStep{
			{cli: append(execute(9), query("y")...), fwd: query("y"), answered: interrupted(1), held: 1},
			{srv: ok(autocommit), held: 0},
		}, []string{"COM_STMT_EXECUTE 9", "y"}},
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
				r := newAdmitRig(t, nil, 1)
				for _, s := range tt.refuse {
					r.adm.refuse[s] = true
				}
				sent := 0
				for i, s := range tt.steps {
					var sizes []int
					if cut > sent && cut < sent+len(s.cli) {
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
					t.Fatalf("the session held %d slots", r.adm.maxHeld)
				}
				r.gate.Close()
				if r.adm.held != 0 {
					t.Fatalf("%d slots after Close", r.adm.held)
				}
			})
			if cut >= 0 && testing.Short() {
				break
			}
		}
	}
}

// TestKillQuery: KILL QUERY is never held, is answered by sluice when it
// ends the wait of a held command of the route, and goes to the server
// otherwise.
func TestKillQuery(t *testing.T) {
	for _, tt := range []struct {
		sql  string
		id   uint32
		kill bool
	}{
		{"KILL QUERY 42", 42, true},
		{"kill soft query 42;", 42, true},
		{"KILL HARD QUERY 42", 42, true},
		{"KILL 42", 0, false},
		{"KILL CONNECTION 42", 0, false},
		{"KILL QUERY ID 42", 0, false},
		{"KILL QUERY 42 43", 0, false},
		{"SELECT 'KILL QUERY 42'", 0, false},
	} {
		d := &pending{cmd: comQuery, st: &session.Statement{SQL: tt.sql}}
		id, ok := killQuery(d)
		if ok != tt.kill || id != tt.id {
			t.Errorf("killQuery(%q) = %d, %v; want %d, %v", tt.sql, id, ok, tt.id, tt.kill)
		}
	}

	routes := &gates{}
	killer := newAdmitRig(t, routes, 1)
	// No command of connection 42 is held: the KILL goes to the server.
	kill := query("KILL QUERY 42")
	if err := killer.client(kill); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(killer.forwarded, kill) || len(killer.adm.asked) != 0 {
		t.Fatalf("forwarded %q, asked %q; want the KILL upstream, not held", killer.forwarded, killer.adm.asked)
	}
	killer.server(ok(autocommit))
}

// FuzzAdmitLifecycle drives a MySQL session under admission with
// commands the fuzzer picks (queries, executes, pings, transactions),
// each admitted or refused, cut into chunks it picks; the bytes forwarded
// are exactly the admitted commands', sluice answers each refused one
// with ERR 1317, and the session holds at most one slot and none once
// idle. A COM_REGISTER_SLAVE (a ping op with bit 0x20), once the server
// has accepted it, makes every later command pass without waiting.
func FuzzAdmitLifecycle(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3}, []byte{0})
	f.Add([]byte{0x80, 0x11, 0x41, 0x82}, []byte{2, 5})
	f.Add([]byte{0x10, 0x50, 0x00, 0xc1}, []byte{1, 1, 1, 1})
	f.Add([]byte{0x00, 0x62, 0x80, 0x11, 0x41}, []byte{3})
	f.Fuzz(func(t *testing.T, ops, chunks []byte) {
		if len(ops) > 64 {
			ops = ops[:64]
		}
		r := newAdmitRig(t, nil, 1)
		var cli, wantFwd, wantAns []byte
		var answers [][]byte
		// replica: the server has answered a COM_REGISTER_SLAVE (with OK);
		// registered: one was sent.
		inTx, replica, registered := false, false, false
		for i, op := range ops {
			sql := fmt.Sprintf("s%d", i)
			var cmd []byte
			held := true
			switch op & 3 {
			case 0, 3:
				cmd = query(sql)
			case 1:
				cmd = execute(uint32(1000 + i))
				sql = fmt.Sprintf("COM_STMT_EXECUTE %d", 1000+i)
			case 2:
				cmd, held = pk(0, []byte{comPing}), false
				if op&0x20 != 0 {
					cmd, registered = registerSlave(), true
				}
			}
			if replica {
				held = false
			}
			status := uint16(autocommit)
			if op&0x10 != 0 {
				status |= inTrans
			}
			refused := held && op&0x80 != 0 && !inTx && len(answers) == 0
			r.adm.refuse[sql] = refused
			cli = append(cli, cmd...)
			if refused {
				wantAns = append(wantAns, interrupted(1)...)
			} else {
				wantFwd = append(wantFwd, cmd...)
				answers = append(answers, ok(status))
				inTx = status&inTrans != 0
			}
			if op&0x40 != 0 || i == len(ops)-1 {
				sizes := make([]int, len(chunks))
				for k, c := range chunks {
					sizes[k] = int(c)
				}
				if err := r.client(cli, sizes...); err != nil {
					t.Fatal(err)
				}
				cli = nil
				for _, a := range answers {
					r.server(a)
				}
				answers = nil
				replica = registered
			}
			if r.adm.maxHeld > 1 {
				t.Fatalf("the session held %d slots", r.adm.maxHeld)
			}
		}
		if !bytes.Equal(r.forwarded, wantFwd) {
			t.Fatalf("forwarded\n %q\nwant\n %q", r.forwarded, wantFwd)
		}
		if !bytes.Equal(r.answered, wantAns) {
			t.Fatalf("answered\n %q\nwant\n %q", r.answered, wantAns)
		}
		if !inTx && r.adm.held != 0 {
			t.Fatalf("idle session holds %d slots", r.adm.held)
		}
		r.gate.Close()
		if r.adm.held != 0 {
			t.Fatalf("%d slots after Close", r.adm.held)
		}
	})
}
