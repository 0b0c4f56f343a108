package mysql

import (
	"time"

	"github.com/sluicelab/sluice/internal/session"
	"github.com/sluicelab/sluice/internal/whatif"
	"github.com/sluicelab/sluice/internal/wire"
)

// Round trips (Options.WhatIf): the client observer reports each
// command that gets an answer when its last packet is read (not
// COM_QUIT, COM_STMT_CLOSE or COM_STMT_SEND_LONG_DATA, nor a
// COM_CHANGE_USER, which is authentication), COM_QUERY, COM_STMT_EXECUTE,
// COM_STMT_FETCH and COM_STMT_BULK_EXECUTE as running a statement; the server observer the
// first server bytes after one (only while whatif.Conn.Awaiting) and the
// end of each command's answer, idle when no command is left waiting,
// a transaction open while the status flags of the last OK or EOF have
// SERVER_STATUS_IN_TRANS. Binlog dump sessions (a replica) are not
// followed: their whatif.Conn closes when the dump begins.

// openWhatIf opens the session's whatif.Conn, sampling the RTT of the
// client and upstream sockets.
func openWhatIf(t *whatif.Table, sess *session.Session, now time.Time, socks *wire.Sockets) *whatif.Conn {
	if t == nil || sess.Kind() != session.KindClient {
		return nil
	}
	key := whatif.Key{Protocol: "mysql", User: sess.User(), Database: sess.Database(), Application: sess.Application()}
	return t.Open(key, now, socks.RTT)
}

// idle reports whether no command awaits an answer.
func (c *conn) idle() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.head == len(c.queue)
}

// runsStatement reports whether command cmd runs a statement (rather
// than preparing one, pinging or asking for session state).
func runsStatement(cmd byte) bool {
	switch cmd {
	case comQuery, comStmtExecute, comStmtFetch, comStmtBulkExecute:
		return true
	}
	return false
}
