package pg

// COPY. The server opens a copy with CopyInResponse ('G'), CopyOutResponse
// ('H') or CopyBothResponse ('W', replication streams); the data then flows
// as CopyData ('d') and ends with CopyDone ('c') or, from the client,
// CopyFail ('f'); the statement then ends as usual (CommandComplete or
// ErrorResponse, and ReadyForQuery for a Query).
//
//	Copy*Response: 'G'|'H'|'W' int32 len, int8 format, int16 n, int16[n] formats
//
// Every copy message belongs to the statement that started the copy.
// Server ones go to the statement in flight like any response. Client ones
// go to the statement the server opened a copy for with CopyInResponse or
// CopyBothResponse (a client may send CopyData only after receiving one,
// and the server observer sees it first); before any, to the last statement
// the client began. A replication connection's START_REPLICATION is a
// Query whose copy lasts as long as the stream, so the whole stream is one
// long statement. Nothing of a Copy*Response needs decoding.

// onCopyResponse notes which statement owns the client's copy data.
func (s *serverObserver) onCopyResponse() {
	if s.fr.typ != 'H' && s.tgt == toStatement {
		s.t.copyOwner.Store(s.st)
	}
}
