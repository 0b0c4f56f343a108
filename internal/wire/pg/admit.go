package pg

import (
	"context"
	"time"

	"github.com/sluicelab/sluice/internal/session"
	"github.com/sluicelab/sluice/internal/wire"
)

// Admission: with Options.Admit set, the client observer of a session is
// also a wire.Rewriter that holds the first request of each transaction
// until the Admitter lets its statement run.
//
// A request is a Query, or an extended batch from its first message
// (Parse, Bind, Describe, Execute, Close, Flush) to its Sync. At the
// first byte of a request the session's Gate says whether it must wait:
// the session holds no slot and the server's last ReadyForQuery was 'I'.
// If so, the request's bytes are held back (not forwarded) until its
// statement begins (the Query, or the batch's first Execute) and the
// Gate admits it; the client pump blocks meanwhile, so it stops reading
// the client (backpressure) while the server pump goes on. A batch that
// reaches its Sync without an Execute (a prepare round trip), or whose
// held bytes pass 1 MiB before one, goes on without waiting (wire.Walk).
//
// A refused statement (the client's CancelRequest, the console's cancel,
// a blocktime abort rule, queue_timeout) never reaches the server: its
// request is discarded, up to the end of the Query or through the
// batch's Sync, and sluice answers as the server would, ErrorResponse
// (SQLSTATE 57014 with the refusal's message) and ReadyForQuery 'I',
// through the down pump (the injector) once the server has answered
// every earlier request. The tracker sees those answers as the server's,
// so the records stay in step.

// admitUp is the client observer of a session under admission. It is
// used by the client pump only.
type admitUp struct {
	wire.Admitting
	obs *clientObserver
	inj *injector

	open       bool               // mirror of the gate's in-a-request state (Gate.Start)
	dropSimple bool               // WalkDrop: the refused request is a Query (drop to its end); else through Sync
	begun      *session.Statement // set by clientObserver.begin, taken by the walk
	begunKind  entryKind
}

// ReplayAt implements wire.Replayer: the client observer it drives
// stamps what it sees at at.
func (a *admitUp) ReplayAt(at time.Time) { a.obs.ReplayAt(at) }

// Rewrite implements wire.Rewriter: it observes p and returns the bytes
// to forward now, blocking while a request waits for admission.
func (a *admitUp) Rewrite(ctx context.Context, p []byte) ([]byte, error) {
	if out, done, err := a.Begin(p); done {
		return out, err
	}
	c, f := a.obs, &a.obs.fr
	for i := 0; i < len(p); {
		if f.hn == 0 && a.Walk.Mode() != wire.WalkDrop {
			if earns, open, ok := requestStart(p[i], a.open); ok {
				a.open = open
				if a.Gate.Start(earns, open) && a.Walk.Mode() == wire.WalkPass {
					a.Walk.Set(i, wire.WalkHold)
				}
			}
		}
		if f.inHeader() {
			i += f.fillHeader(p[i:])
			if f.inHeader() {
				break
			}
			if err := c.header(); err != nil {
				return nil, a.Fail(err)
			}
			c.count(headerLen)
		} else {
			n := f.payload(p[i:])
			i += n
			c.count(n)
			c.payloadRead()
		}
		typ, done := f.typ, f.complete()
		if done {
			c.message()
			f.next()
		}
		if st := a.begun; st != nil {
			a.begun = nil
			if a.Walk.Mode() == wire.WalkHold {
				err := a.Gate.Wait(ctx, st)
				switch {
				case err == nil:
					a.Walk.Set(i, wire.WalkPass)
				case wire.Ending(ctx, err):
					// The session is ending: nobody to answer.
					return nil, a.Fail(err)
				default:
					a.Walk.Set(i, wire.WalkDrop)
					a.dropSimple = a.begunKind == kindSimple
					code, msg := wire.Refused(err)
					a.inj.add(errorResponse(severityError, code, msg), st)
				}
			}
		}
		if !done {
			continue
		}
		switch {
		case a.Walk.Mode() == wire.WalkHold && (typ == 'S' || typ == 'H' || typ == 'F' || typ == 'X'):
			// The batch ended, or the client flushed it and waits for the
			// answers, without a statement: nothing to admit yet (the
			// batch's next message, with no slot, is held again).
			a.Walk.Set(i, wire.WalkPass)
		case a.Walk.Mode() == wire.WalkDrop && (typ == 'S' || a.dropSimple && typ == 'Q'):
			a.Walk.Set(i, wire.WalkPass)
			a.open = false
			// The ReadyForQuery sluice sends answers the discarded Sync
			// (a discarded Query was counted when it began).
			a.Gate.Start(typ == 'S', false)
			a.inj.add(readyIdle, nil)
		}
	}
	return a.Walk.Result(), nil
}

// requestStart classifies a client message by its type byte: ok when it
// is part of a request, earns when it earns a ReadyForQuery of its own
// (Query, Sync, FunctionCall), open whether the client is in the middle
// of an extended batch after it (open before it: was).
func requestStart(typ byte, was bool) (earns, open, ok bool) {
	switch typ {
	case 'Q', 'F':
		return true, was, true
	case 'S':
		return true, false, true
	case 'P', 'B', 'E', 'D', 'C', 'H':
		return false, true, true
	}
	return false, was, false
}

// farewell reports whether b, all a client sent before its end of
// stream, is one Terminate message: the client has gone (wire.Gate.SetFarewell).
func farewell(b []byte) bool {
	return len(b) == 5 && b[0] == 'X' && b[1] == 0 && b[2] == 0 && b[3] == 0 && b[4] == 4
}

// readyIdle is ReadyForQuery 'I'.
var readyIdle = []byte{'Z', 0, 0, 0, 5, 'I'}

// injector holds the answers sluice gives in the server's place, until
// the server stream is between messages and has answered every request
// before the refused one. It implements wire.Injector. add is called by
// the client pump; Pending and check by the server pump.
type injector struct {
	wire.Answers
	s *serverObserver
}

// add queues b and wakes the server pump.
func (j *injector) add(b []byte, after *session.Statement) { j.Add(b, after) }

// ready reports whether an answer queued after st may go now: the
// server stream is between messages and st (when not nil) is the
// oldest request in flight.
func (j *injector) ready(st *session.Statement) bool {
	if j.s.fr.hn != 0 {
		return false
	}
	if st != nil {
		e, ok := j.s.t.front()
		return ok && e.st == st
	}
	return true
}

// check wakes the server pump when an answer has become ready; called
// by the server observer after each chunk.
func (j *injector) check() { j.Check(j.ready) }

// Pending implements wire.Injector. It returns every answer whose turn
// has come: the next one's check sees the tracker before the server
// observer has seen what was just taken, so an answer waiting for a
// later request stops there and goes on the next wake-up.
func (j *injector) Pending() []byte { return j.Next(j.ready, true) }
