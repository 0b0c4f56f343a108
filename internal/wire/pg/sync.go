package pg

// Sync ('S' from the client) closes an extended-protocol batch; the server
// answers it with ReadyForQuery. FunctionCall ('F') is answered the same
// way and records no statement.
//
//	Sync: 'S' int32 4
//
// A Sync and the Parse/Bind/Describe bytes still waiting belong to the
// last statement executed in the batch. A batch that executed nothing (a
// prepare round trip) leaves its bytes waiting for the next statement.

// onSync queues the ReadyForQuery the server owes and closes the batch.
func (c *clientObserver) onSync() {
	if c.lastExec != nil {
		c.lastExec.AddUp(c.pendingUp)
		c.pendingUp = 0
	}
	c.lastExec = nil
	c.t.push(entry{kind: kindSync})
}

// onFunctionCall queues the ReadyForQuery the server owes.
func (c *clientObserver) onFunctionCall() {
	c.t.push(entry{kind: kindSync})
}
