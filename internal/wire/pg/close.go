package pg

// Close ('C' from the client): drops a prepared statement or a portal.
//
//	Close: 'C' int32 len, byte 'S' or 'P', string name

// onClose forgets the statement or portal named by the current Close
// message.
func (c *clientObserver) onClose() {
	if len(c.fr.buf) == 0 {
		return
	}
	name, _, ok := cstring(c.fr.buf[1:])
	if !ok {
		return
	}
	switch c.fr.buf[0] {
	case 'S':
		if len(name) == 0 {
			c.unnamedStmt = ""
		} else {
			delete(c.stmts, string(name))
		}
	case 'P':
		if len(name) == 0 {
			c.unnamedPortal = ""
		} else {
			delete(c.portals, string(name))
		}
	}
}
