package pg

// Parse ('P'): creates a prepared statement, named or unnamed.
//
//	Parse: 'P' int32 len, string name, string sql, int16 n, int32[n] param types
//
// The observer keeps name -> SQL (clipped to MaxSQL) so the statements
// later executed through it carry its text. Parse itself begins no
// statement: its bytes wait for the next statement begun (normally the
// Execute that follows).

// onParse records the prepared statement of the current Parse message.
func (c *clientObserver) onParse() {
	name, rest, ok := cstring(c.fr.buf)
	if !ok {
		return // name longer than maxName: not tracked
	}
	sql, _, _ := cstring(rest)
	sql = clip(sql, c.maxSQL)
	if len(name) == 0 {
		c.unnamedStmt = same(c.unnamedStmt, sql)
		return
	}
	remember(&c.stmts, name, string(sql))
}
