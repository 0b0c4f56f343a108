package pg

// Bind ('B'): creates a portal from a prepared statement and parameter
// values.
//
//	Bind: 'B' int32 len, string portal, string statement, parameters...
//
// Only the two names are buffered; parameter values (which may be large)
// are skipped. The portal inherits the statement's SQL. Named portals are
// tracked up to maxPrepared at a time; past that the map starts afresh.

// onBind records the portal of the current Bind message.
func (c *clientObserver) onBind() {
	portal, rest, ok := cstring(c.fr.buf)
	if !ok {
		return
	}
	stmt, _, ok := cstring(rest)
	sql := ""
	if ok {
		sql = c.preparedSQL(stmt)
	}
	if len(portal) == 0 {
		c.unnamedPortal = sql
		return
	}
	if len(c.portals) >= maxPrepared {
		// Named portals die with their transaction and clients do not
		// always close them: start over rather than stop tracking.
		clear(c.portals)
	}
	remember(&c.portals, portal, sql)
}
