package pg

// ReadyForQuery ('Z'): the server is idle again.
//
//	ReadyForQuery: 'Z' int32 5, byte status
//
// The first one ends the startup phase (authentication, ParameterStatus,
// BackendKeyData), whose bytes belong to no statement. Each later one
// answers the oldest Query, Sync or FunctionCall in flight: a Query's
// statement ends here with its summed row count and its error, if any; the
// Executes of a Sync's batch that got no answer of their own were skipped
// after an error and end here with that error.

// onReadyForQuery ends the oldest Query, or the batch up to the oldest
// Sync.
func (s *serverObserver) onReadyForQuery() {
	now := s.clk.Now()
	for {
		e, ok := s.t.pop()
		if !ok {
			break
		}
		if e.kind == kindSync {
			break
		}
		if e.kind == kindSimple {
			e.st.End(now, outcomeOf(s.code), s.rows, s.code)
			break
		}
		e.st.End(now, outcomeOf(s.batchErr), -1, s.batchErr)
	}
	s.curOK, s.prev, s.batchErr = false, nil, ""
	s.rows, s.code, s.dataRows = -1, "", 0
	// 'T' (in a transaction) and 'E' (in a failed one) keep the slot.
	open := len(s.fr.buf) == 1 && s.fr.buf[0] != 'I'
	s.gate.Answered(open)
	if s.wi != nil {
		s.wi.Done(now, s.t.queued() == 0, open)
	}
}
