package mysql

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/sluicelab/sluice/internal/session"
	"github.com/sluicelab/sluice/internal/wire"
	"github.com/sluicelab/sluice/internal/wire/wiretest"
)

// admitRig is one session's observers under admission without a proxy.
type admitRig struct {
	*wiretest.AdmitRig
	up   *admitUp
	down *downObserver
	inj  *injector
}

func newAdmitRig(t testing.TB, routes *gates, connID uint32) *admitRig {
	_, _, u, d := harnessObservers(testCaps, 0, false)
	return newAdmitRigOn(t, routes, connID, u, d)
}

// newAdmitRigOn is newAdmitRig over observers the test made.
func newAdmitRigOn(t testing.TB, routes *gates, connID uint32, u *upObserver, d *downObserver) *admitRig {
	adm := &wiretest.Admitter{}
	gate := wire.NewGate(adm)
	inj := &injector{d: d}
	if routes == nil {
		routes = &gates{}
	}
	up := &admitUp{Admitting: wire.Admitting{Gate: gate}, u: u, inj: inj, route: routes}
	u.adm = up
	d.gate, d.inj = gate, inj
	routes.add(connID, gate)
	return &admitRig{
		AdmitRig: &wiretest.AdmitRig{T: t, Adm: adm, Gate: gate, Up: up, Down: d, Inj: inj},
		up:       up, down: d, inj: inj,
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

// TestAdmitSteps: which commands wait, what goes upstream, what sluice
// answers and when the slot goes back, with the client's bytes also cut
// at every offset.
func TestAdmitSteps(t *testing.T) {
	prepare := pk(0, []byte{comStmtPrepare}, []byte("SELECT ?"))
	prepareOK := bytes.Join([][]byte{pk(1, []byte{0x00}, le32(7), le16(0), le16(1), []byte{0}, le16(0)),
		pk(2, colDef("?")), pk(3, eofPayload(autocommit))}, nil)
	replStream, _ := binlogStream(1, 7)
	tests := []wiretest.AdmitCase{
		{Name: "a query outside a transaction", Steps: []wiretest.AdmitStep{
			{Cli: query("select 1"), Fwd: query("select 1"), Held: 1},
			{Srv: ok(autocommit), Held: 0},
		}, Asked: []string{"select 1"}},
		{Name: "a transaction keeps its slot until its status ends", Steps: []wiretest.AdmitStep{
			{Cli: query("begin"), Fwd: query("begin"), Srv: ok(autocommit | inTrans), Held: 1},
			{Cli: query("update"), Fwd: query("update"), Srv: ok(autocommit | inTrans), Held: 1},
			{Cli: query("bad"), Fwd: query("bad"), Srv: pk(1, errPayload(1064, "42000", "syntax")), Held: 1},
			{Cli: query("commit"), Fwd: query("commit"), Srv: ok(autocommit), Held: 0},
		}, Asked: []string{"begin"}},
		{Name: "pings and prepares do not wait", Steps: []wiretest.AdmitStep{
			{Cli: pk(0, []byte{comPing}), Fwd: pk(0, []byte{comPing}), Srv: ok(autocommit)},
			{Cli: prepare, Fwd: prepare, Srv: prepareOK},
			{Cli: execute(7), Fwd: execute(7), Held: 1},
			{Srv: ok(autocommit), Held: 0},
		}, Asked: []string{"SELECT ?"}},
		{Name: "pipelined commands take one slot", Steps: []wiretest.AdmitStep{
			{Cli: append(query("a"), query("b")...), Fwd: append(query("a"), query("b")...), Held: 1},
			{Srv: ok(autocommit), Held: 1},
			{Srv: ok(autocommit), Held: 0},
		}, Asked: []string{"a"}},
		{Name: "a refused query never goes upstream", Refuse: []string{"x"}, Steps: []wiretest.AdmitStep{
			{Cli: query("x"), Answered: interrupted(1)},
			{Cli: query("y"), Fwd: query("y"), Srv: ok(autocommit)},
		}, Asked: []string{"x", "y"}},
		{Name: "a replica is never held once it registers", Steps: []wiretest.AdmitStep{
			{Cli: query("SET @a=1"), Fwd: query("SET @a=1"), Held: 1},
			{Srv: ok(autocommit), Held: 0},
			{Cli: registerSlave(), Fwd: registerSlave(), Srv: ok(autocommit)},
			{Cli: query("SET @b=1"), Fwd: query("SET @b=1"), Srv: ok(autocommit)},
			{Cli: binlogDump(), Fwd: binlogDump(), Srv: replStream},
			{Cli: query("SELECT 1"), Fwd: query("SELECT 1")},
		}, Asked: []string{"SET @a=1"}},
		{Name: "a refused registration keeps a client", Steps: []wiretest.AdmitStep{
			{Cli: registerSlave(), Fwd: registerSlave(), Srv: pk(1, errPayload(1227, "42000", "Access denied"))},
			{Cli: query("SELECT 1"), Fwd: query("SELECT 1"), Held: 1},
			{Srv: ok(autocommit), Held: 0},
		}, Asked: []string{"SELECT 1"}},
		{Name: "a refused execute, then a pipelined query waits again", Refuse: []string{"COM_STMT_EXECUTE 9"}, Steps: []wiretest.AdmitStep{
			{Cli: append(execute(9), query("y")...), Fwd: query("y"), Answered: interrupted(1), Held: 1},
			{Srv: ok(autocommit), Held: 0},
		}, Asked: []string{"COM_STMT_EXECUTE 9", "y"}},
	}
	wiretest.RunAdmitCases(t, tests, func(t *testing.T) *wiretest.AdmitRig { return newAdmitRig(t, nil, 1).AdmitRig })
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
	if err := killer.Client(kill); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(killer.Forwarded, kill) || len(killer.Adm.Asked) != 0 {
		t.Fatalf("forwarded %q, asked %q; want the KILL upstream, not held", killer.Forwarded, killer.Adm.Asked)
	}
	killer.Server(ok(autocommit))
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
		refuse := map[string]bool{}
		r.Adm.Refuse = func(st *session.Statement) bool { return refuse[st.SQL] }
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
			refuse[sql] = refused
			cli = append(cli, cmd...)
			if refused {
				wantAns = append(wantAns, interrupted(1)...)
			} else {
				wantFwd = append(wantFwd, cmd...)
				answers = append(answers, ok(status))
				inTx = status&inTrans != 0
			}
			if op&0x40 != 0 || i == len(ops)-1 {
				if err := r.Client(cli, wiretest.Sizes(chunks)...); err != nil {
					t.Fatal(err)
				}
				cli = nil
				for _, a := range answers {
					r.Server(a)
				}
				answers = nil
				replica = registered
			}
			if r.Adm.MaxHeld > 1 {
				t.Fatalf("the session held %d slots", r.Adm.MaxHeld)
			}
		}
		r.Finish(wantFwd, wantAns, !inTx)
	})
}
