package pg

// Execute ('E'): runs a portal. Each Execute is one statement, whose SQL is
// the text of the prepared statement behind the portal. It ends at the
// server's CommandComplete, EmptyQueryResponse, PortalSuspended or
// ErrorResponse for it; if an earlier error in the same batch makes the
// server skip it, it ends at the batch's ReadyForQuery with that error.
//
//	Execute: 'E' int32 len, string portal, int32 max rows

// onExecute begins the statement of the current Execute message.
func (c *clientObserver) onExecute() {
	portal, _, ok := cstring(c.fr.buf)
	sql := ""
	if ok {
		sql = c.portalSQL(portal)
	}
	c.begin(sql, kindExtended)
}
