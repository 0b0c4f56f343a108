package pg

// Query ('Q'): one SQL string run with the simple protocol. It may hold
// several statements separated by semicolons; sluice records the whole
// string as one statement, ended by the server's ReadyForQuery.
//
//	Query: 'Q' int32 len, string sql
//
// Only the first MaxSQL+1 bytes are buffered. The statement begins when the
// message is complete or as soon as that many bytes have arrived, whichever
// is first.

// onQuery begins the statement of the current Query message. A text equal
// to the previous Query's reuses its string.
func (c *clientObserver) onQuery() {
	sql, _, _ := cstring(c.fr.buf)
	c.lastQuery = same(c.lastQuery, clip(sql, c.maxSQL))
	c.begin(c.lastQuery, kindSimple)
}
