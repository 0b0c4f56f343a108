package pg

import (
	"github.com/sluicelab/sluice/internal/session"
	"github.com/sluicelab/sluice/internal/whatif"
	"github.com/sluicelab/sluice/internal/wire"
)

// Round trips (Options.WhatIf): the client observer reports each request
// message (Query, Parse, Bind, Describe, Execute, Close, Flush, Sync,
// FunctionCall) when it is complete, Query, Execute and FunctionCall as
// running a statement; the server observer the first
// server bytes after one (only while whatif.Conn.Awaiting, so the clock
// is read once per round trip) and each ReadyForQuery after startup,
// idle when no request is left in flight, a transaction open on status
// 'T' or 'E'. Replication sessions are not followed.

// watch makes a client session's round trips count in the front end's
// what-if table, closing its whatif.Conn when the session ends.
func (f *Frontend) watch(wc *wire.Conn, kind session.Kind, up *clientObserver, down *serverObserver) {
	if f.whatIf == nil || kind != session.KindClient || wc.Session.Coordinator() != nil {
		// A shard connection's round trips are the coordinator's, inside
		// its statement; counted on their own they would make an
		// application per coordinator backend.
		return
	}
	sess := wc.Session
	if wc.Sockets == nil {
		wc.Sockets = wire.NewSockets(wc.Client, wc.Upstream)
	}
	key := whatif.Key{Protocol: "postgres", User: sess.User(), Database: sess.Database(), Application: sess.Application()}
	wi := f.whatIf.Open(key, f.clk.Now(), wc.Sockets.RTT)
	up.wi, down.wi = wi, wi
	prev := wc.Close
	wc.Close = func() {
		wi.Close(f.clk.Now())
		if prev != nil {
			prev()
		}
	}
}

// isRequest reports whether a client message of type t is (part of) a
// request the server answers.
func isRequest(t byte) bool {
	switch t {
	case 'Q', 'P', 'B', 'E', 'D', 'C', 'H', 'S', 'F':
		return true
	}
	return false
}
