package pg

import "github.com/sluicelab/sluice/internal/session"

// CommandComplete ('C' from the server): one SQL command finished.
//
//	CommandComplete: 'C' int32 len, string tag
//
// The tag ends in the row count for the commands that report one:
// "SELECT 5", "INSERT 0 5", "UPDATE 5", "DELETE 5", "MERGE 5", "FETCH 5",
// "MOVE 5", "COPY 5". An Execute's statement ends here with that count; a
// simple Query's statement adds it to its total and waits for
// ReadyForQuery.

// maxTag is how much of a command tag is buffered. Real tags are short; a
// longer one reports no row count.
const maxTag = 64

// onCommandComplete ends or updates the front statement.
func (s *serverObserver) onCommandComplete() {
	rows := int64(-1)
	if !s.fr.truncated() {
		rows = tagRows(s.fr.buf)
	}
	if s.endExtended(session.OK, rows, "") {
		return
	}
	if s.curOK && s.cur.kind == kindSimple && rows >= 0 {
		s.rows = max(s.rows, 0) + rows
	}
}

// tagRows returns the row count at the end of a NUL-terminated command tag,
// or -1 when the tag carries none. It never allocates.
func tagRows(b []byte) int64 {
	tag, _, ok := cstring(b)
	if !ok {
		return -1
	}
	i := len(tag)
	for i > 0 && tag[i-1] >= '0' && tag[i-1] <= '9' {
		i--
	}
	digits := tag[i:]
	if len(digits) == 0 || len(digits) > 18 || i == 0 || tag[i-1] != ' ' {
		return -1
	}
	var n int64
	for _, d := range digits {
		n = n*10 + int64(d-'0')
	}
	return n
}
