package litepg

import (
	"bytes"
	"context"
	"database/sql/driver"
	"encoding/binary"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/sluicelab/sluice/internal/sqlstate"
	"github.com/sluicelab/sluice/internal/sqltext"
)

// binarySignature starts every binary COPY stream.
const binarySignature = "PGCOPY\n\377\r\n\000"

// maxCopyRecord bounds the bytes buffered for one COPY record.
const maxCopyRecord = 1 << 30

// runCopy runs COPY FROM STDIN or COPY TO STDOUT.
func (s *session) runCopy(ctx context.Context, pt *portal) error {
	if pt.p.st.copy.from {
		return s.copyIn(ctx, pt.p.st)
	}
	return s.copyOut(ctx, pt)
}

// copyOut streams a query's rows as COPY data, one CopyData message per
// row, flushing as the buffer fills: the result is never held whole.
func (s *session) copyOut(ctx context.Context, pt *portal) error {
	spec := pt.p.st.copy
	q := spec.query
	qp := &portal{p: &prepared{st: q}, args: pt.args}
	if err := s.openRows(ctx, qp, q.sql); err != nil {
		return err
	}
	defer s.closePortal(qp)
	rows := qp.rows
	dest := s.destFor(len(rows.Columns()))
	cols, first, err := s.rowColumns(q, rows, dest)
	if err != nil {
		return err
	}
	format, codes := spec.wireFormat(len(cols))
	s.send(&pgproto3.CopyOutResponse{OverallFormat: format, ColumnFormatCodes: codes})

	if spec.format == copyBinary {
		if err := s.pc.WriteMessage('d', func(b []byte) ([]byte, error) {
			return append(append(b, binarySignature...), 0, 0, 0, 0, 0, 0, 0, 0), nil
		}); err != nil {
			return err
		}
	} else if spec.header {
		if err := s.pc.WriteMessage('d', func(b []byte) ([]byte, error) {
			for i, c := range cols {
				if i > 0 {
					b = append(b, spec.delim)
				}
				b = appendCopyField(b, spec, c.name)
			}
			return append(b, '\n'), nil
		}); err != nil {
			return err
		}
	}
	var binaryFormats []int16 // every column binary
	if spec.format == copyBinary {
		binaryFormats = make([]int16, len(cols))
		for i := range binaryFormats {
			binaryFormats[i] = 1
		}
	}
	appendRow := func(b []byte) ([]byte, error) {
		if binaryFormats != nil {
			return appendFields(b, dest, cols, binaryFormats)
		}
		return s.appendCopyRow(b, spec, dest, cols)
	}
	var n int64
	for {
		if first != nil {
			first = nil
		} else if err := rows.Next(dest); err == io.EOF {
			break
		} else if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := s.pc.WriteMessage('d', appendRow); err != nil {
			return err
		}
		n++
	}
	if spec.format == copyBinary {
		if err := s.pc.WriteMessage('d', func(b []byte) ([]byte, error) { return append(b, 0xff, 0xff), nil }); err != nil {
			return err
		}
	}
	s.send(&pgproto3.CopyDone{})
	s.complete(commandTag("COPY", n))
	return nil
}

// wireFormat returns the overall format and the format codes of n
// columns that a CopyInResponse or CopyOutResponse announces for spec:
// 1 (binary) for BINARY, 0 (text) for text and CSV.
func (spec *copySpec) wireFormat(n int) (byte, []uint16) {
	format := byte(0)
	if spec.format == copyBinary {
		format = 1
	}
	codes := make([]uint16, n)
	for i := range codes {
		codes[i] = uint16(format)
	}
	return format, codes
}

// appendCopyRow appends one row in COPY's text or CSV format to b.
func (s *session) appendCopyRow(b []byte, spec *copySpec, row []driver.Value, cols []column) ([]byte, error) {
	var err error
	for i, v := range row {
		if i > 0 {
			b = append(b, spec.delim)
		}
		switch x := v.(type) {
		case nil:
			b = append(b, spec.null...)
		case string:
			if cols[i].oid == oidBytea || cols[i].oid == oidBool {
				if s.field, err = appendText(s.field[:0], v, cols[i].oid); err != nil {
					return nil, err
				}
				b = appendCopyField(b, spec, s.field)
				continue
			}
			b = appendCopyField(b, spec, x)
		default:
			if s.field, err = appendText(s.field[:0], v, cols[i].oid); err != nil {
				return nil, err
			}
			b = appendCopyField(b, spec, s.field)
		}
	}
	return append(b, '\n'), nil
}

// textEscapes maps each byte COPY's text format escapes to the letter
// after its backslash, 0 for the other bytes; read-only.
var textEscapes = [256]byte{'\\': '\\', '\n': 'n', '\r': 'r', '\t': 't', '\b': 'b', '\f': 'f', '\v': 'v'}

// appendCopyField appends one non-null value in the text or CSV format.
func appendCopyField[T string | []byte](dst []byte, spec *copySpec, v T) []byte {
	if spec.format == copyCSV {
		return appendCSVField(dst, spec, v)
	}
	start := 0
	for i := 0; i < len(v); i++ {
		c := v[i]
		e := textEscapes[c]
		switch {
		case e != 0:
		case c == spec.delim:
			e = c // the delimiter escapes as itself
		default:
			continue
		}
		dst = append(dst, v[start:i]...)
		dst = append(dst, '\\', e)
		start = i + 1
	}
	return append(dst, v[start:]...)
}

// appendCSVField appends one non-null value in CSV, quoting it when it
// holds the delimiter, the quote, a line break, or equals the null string.
func appendCSVField[T string | []byte](dst []byte, spec *copySpec, v T) []byte {
	need := len(v) == 0 && spec.null == "" || string(v) == spec.null
	for i := 0; i < len(v) && !need; i++ {
		c := v[i]
		need = c == spec.delim || c == spec.quote || c == '\n' || c == '\r' || c == spec.escape
	}
	if !need {
		return append(dst, v...)
	}
	dst = append(dst, spec.quote)
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c == spec.quote || c == spec.escape {
			dst = append(dst, spec.escape)
		}
		dst = append(dst, c)
	}
	return append(dst, spec.quote)
}

// copyIn runs COPY FROM STDIN: it announces CopyInResponse, decodes the
// CopyData stream and inserts each record. Outside a transaction block
// the whole COPY is one transaction. On an error it returns at once;
// the CopyData the client still sends is then discarded by the main loop.
func (s *session) copyIn(ctx context.Context, st *stmt) (err error) {
	spec := st.copy
	tcols := s.tableColumns(spec.table)
	if len(tcols) == 0 {
		return &pgError{code: sqlstate.UndefinedTable, msg: fmt.Sprintf("relation %q does not exist", spec.table)}
	}
	names := spec.columns
	if names == nil {
		for _, c := range tcols {
			names = append(names, c.name)
		}
	}
	oids := make([]uint32, len(names))
	quoted := make([]string, len(names))
	params := make([]string, len(names))
	for i, name := range names {
		found := false
		for _, c := range tcols {
			if c.name == strings.ToLower(name) {
				oids[i] = reportable(c.oid)
				if c.oid == oidUnknown {
					oids[i] = oidText
				}
				found = true
				break
			}
		}
		if !found {
			return &pgError{code: sqlstate.UndefinedColumn, msg: fmt.Sprintf("column %q of relation %q does not exist", name, spec.table)}
		}
		quoted[i] = quoteIdent(name)
		params[i] = "?" + strconv.Itoa(i+1)
	}
	insert := "INSERT INTO " + quoteIdent(spec.table) + " (" + strings.Join(quoted, ", ") + ") VALUES (" + strings.Join(params, ", ") + ")"

	// Own transaction in autocommit mode, the block's otherwise.
	if s.txStatus == 'I' {
		if err := s.srv.acquireWrite(ctx); err != nil {
			return err
		}
		defer s.srv.releaseWrite()
		if err := s.execSQL(ctx, "BEGIN IMMEDIATE"); err != nil {
			return err
		}
		defer func() {
			bg := context.Background()
			if err == nil {
				if err = s.execSQL(bg, "COMMIT"); err == nil {
					return
				}
			}
			s.execSQL(bg, "ROLLBACK")
		}()
	} else if _, err := s.beforeStatement(ctx, st); err != nil {
		return err
	}
	ss, own, err := s.acquireStmt(insert)
	if err != nil {
		return err
	}
	if own {
		defer ss.sq.Close()
	}
	exec := ss.sq.(driver.StmtExecContext)
	args := make([]driver.NamedValue, len(names))
	for i := range args {
		args[i].Ordinal = i + 1
	}
	var n int64
	emit := func(vals []driver.Value) error {
		for i, v := range vals {
			args[i].Value = v
		}
		if _, err := exec.ExecContext(ctx, args); err != nil {
			return err
		}
		n++
		return nil
	}

	format, codes := spec.wireFormat(len(names))
	s.send(&pgproto3.CopyInResponse{OverallFormat: format, ColumnFormatCodes: codes})
	if err := s.flush(); err != nil {
		return err
	}
	dec := &copyDecoder{spec: spec, oids: oids, names: names}
	for {
		msg, err := s.pc.Receive(s.baseCtx)
		if err != nil {
			return err
		}
		switch m := msg.(type) {
		case *pgproto3.CopyData:
			if err := dec.feed(m.Data, emit); err != nil {
				return err
			}
			if err := ctx.Err(); err != nil {
				return err
			}
		case *pgproto3.CopyDone:
			if err := dec.finish(emit); err != nil {
				return err
			}
			s.complete(commandTag("COPY", n))
			return nil
		case *pgproto3.CopyFail:
			return &pgError{code: sqlstate.QueryCanceled, msg: "COPY from stdin failed: " + m.Message}
		case *pgproto3.Flush, *pgproto3.Sync:
		default:
			return &pgError{code: sqlstate.ProtocolViolation, msg: fmt.Sprintf("unexpected message %T during COPY from stdin", msg)}
		}
	}
}

// copyDecoder decodes a COPY FROM stream in text, CSV or binary format
// into records of SQLite values. Records may span CopyData messages. It
// never panics on malformed input; errors carry SQLSTATE 22P04 or the
// type's input error.
type copyDecoder struct {
	spec  *copySpec
	oids  []uint32 // type of each column
	names []string // column names, for messages
	buf   []byte
	pos   int  // start of the unparsed data in buf
	line  int  // records seen, for messages
	began bool // header consumed
	ended bool // end marker (\. or binary trailer) seen
	vals  []driver.Value
	raw   [][]byte
	field []byte
}

// feed adds data and emits every complete record.
func (d *copyDecoder) feed(data []byte, emit func([]driver.Value) error) error {
	if d.ended {
		return nil
	}
	if d.pos > 0 && d.pos == len(d.buf) {
		d.buf, d.pos = d.buf[:0], 0
	} else if d.pos > 64<<10 && d.pos > len(d.buf)/2 {
		d.buf = append(d.buf[:0], d.buf[d.pos:]...)
		d.pos = 0
	}
	d.buf = append(d.buf, data...)
	if len(d.buf)-d.pos > maxCopyRecord {
		return &pgError{code: sqlstate.ProgramLimitExceeded, msg: "COPY record too large"}
	}
	return d.parse(false, emit)
}

// finish emits a last record without a line end and checks that the
// stream ended cleanly.
func (d *copyDecoder) finish(emit func([]driver.Value) error) error {
	if d.ended {
		return nil
	}
	if err := d.parse(true, emit); err != nil {
		return err
	}
	// A binary stream may end without its trailer, as PostgreSQL allows.
	if d.spec.format == copyBinary && !d.ended && (!d.began || d.pos != len(d.buf)) {
		return d.errorf("unexpected EOF in COPY data")
	}
	return nil
}

func (d *copyDecoder) errorf(format string, args ...any) *pgError {
	return &pgError{code: sqlstate.BadCopyFileFormat, msg: fmt.Sprintf(format, args...) + fmt.Sprintf(" (COPY line %d)", d.line)}
}

// parse decodes complete records; final treats the end of the buffer as
// the end of the last record.
func (d *copyDecoder) parse(final bool, emit func([]driver.Value) error) error {
	for !d.ended {
		var ok bool
		var err error
		switch d.spec.format {
		case copyBinary:
			ok, err = d.binaryRecord(emit)
		case copyCSV:
			ok, err = d.csvRecord(final, emit)
		default:
			ok, err = d.textRecord(final, emit)
		}
		if err != nil {
			return err
		}
		if !ok {
			return nil
		}
	}
	return nil
}

// record converts raw text fields into values and emits them.
func (d *copyDecoder) record(emit func([]driver.Value) error) error {
	d.line++
	if !d.began {
		d.began = true
		if d.spec.header {
			return nil
		}
	}
	if len(d.raw) > len(d.oids) {
		return d.errorf("extra data after last expected column")
	}
	if len(d.raw) < len(d.oids) {
		return d.errorf("missing data for column %q", d.names[len(d.raw)])
	}
	d.vals = d.vals[:0]
	for i, r := range d.raw {
		if r == nil {
			d.vals = append(d.vals, nil)
			continue
		}
		v, err := decodeTextParam(string(r), d.oids[i])
		if err != nil {
			return err
		}
		d.vals = append(d.vals, v)
	}
	return emit(d.vals)
}

// textRecord decodes one line of the text format.
func (d *copyDecoder) textRecord(final bool, emit func([]driver.Value) error) (bool, error) {
	rest := d.buf[d.pos:]
	nl := bytes.IndexByte(rest, '\n')
	var line []byte
	switch {
	case nl >= 0:
		line = rest[:nl]
		d.pos += nl + 1
	case final && len(rest) > 0:
		line = rest
		d.pos = len(d.buf)
	default:
		return false, nil
	}
	line = bytes.TrimSuffix(line, []byte{'\r'})
	if string(line) == `\.` {
		d.ended = true
		return false, nil
	}
	d.raw = d.raw[:0]
	d.field = d.field[:0]
	start := 0
	delim := d.spec.delim
	for i := 0; i <= len(line); i++ {
		if i < len(line) && line[i] == '\\' {
			if i+1 < len(line) {
				i++
			}
			continue
		}
		if i < len(line) && line[i] != delim {
			continue
		}
		raw := line[start:min(i, len(line))]
		if string(raw) == d.spec.null {
			d.raw = append(d.raw, nil)
		} else {
			at := len(d.field)
			d.field = unescapeCopyText(d.field, raw)
			d.raw = append(d.raw, d.field[at:len(d.field):len(d.field)])
		}
		start = i + 1
	}
	return true, d.record(emit)
}

// textUnescapes maps the letter after a backslash in COPY's text format
// to the control character it stands for, 0 for the other bytes;
// read-only.
var textUnescapes = [256]byte{'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t', 'v': '\v'}

// unescapeCopyText appends raw with the text format's backslash escapes
// decoded.
func unescapeCopyText(dst, raw []byte) []byte {
	if bytes.IndexByte(raw, '\\') < 0 {
		return append(dst, raw...)
	}
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if c != '\\' || i+1 >= len(raw) {
			dst = append(dst, c)
			continue
		}
		i++
		e := raw[i]
		if d := textUnescapes[e]; d != 0 {
			dst = append(dst, d)
			continue
		}
		switch e {
		case 'x':
			j := i + 1
			for j < len(raw) && j < i+3 && sqltext.IsHexDigit(raw[j]) {
				j++
			}
			if j == i+1 {
				dst = append(dst, 'x')
				break
			}
			v, _ := strconv.ParseUint(string(raw[i+1:j]), 16, 8)
			dst = append(dst, byte(v))
			i = j - 1
		default:
			if e >= '0' && e <= '7' {
				j := i
				for j < len(raw) && j < i+3 && raw[j] >= '0' && raw[j] <= '7' {
					j++
				}
				v, _ := strconv.ParseUint(string(raw[i:j]), 8, 16)
				dst = append(dst, byte(v))
				i = j - 1
				break
			}
			dst = append(dst, e)
		}
	}
	return dst
}

// csvRecord decodes one CSV record, which may span lines inside quotes.
func (d *copyDecoder) csvRecord(final bool, emit func([]driver.Value) error) (bool, error) {
	buf := d.buf[d.pos:]
	spec := d.spec
	// The end-of-data marker.
	if bytes.HasPrefix(buf, []byte(`\.`)) {
		rest := buf[2:]
		if bytes.HasPrefix(rest, []byte("\n")) || bytes.HasPrefix(rest, []byte("\r\n")) || final && (len(rest) == 0 || string(rest) == "\r") {
			d.ended = true
			return false, nil
		}
		if !final && (len(rest) == 0 || string(rest) == "\r") {
			return false, nil
		}
	}
	d.raw = d.raw[:0]
	d.field = d.field[:0]
	inQuotes, quoted := false, false
	fieldAt := 0
	endField := func() {
		f := d.field[fieldAt:len(d.field):len(d.field)]
		if !quoted && string(f) == spec.null {
			d.raw = append(d.raw, nil)
		} else {
			d.raw = append(d.raw, f)
		}
		fieldAt = len(d.field)
		quoted = false
	}
	i := 0
	for i < len(buf) {
		c := buf[i]
		if inQuotes {
			switch {
			case c == spec.escape && spec.escape != spec.quote && i+1 < len(buf) && (buf[i+1] == spec.quote || buf[i+1] == spec.escape):
				d.field = append(d.field, buf[i+1])
				i += 2
			case c == spec.escape && spec.escape != spec.quote && i+1 >= len(buf) && !final:
				return false, nil
			case c == spec.quote:
				if spec.escape == spec.quote && i+1 < len(buf) && buf[i+1] == spec.quote {
					d.field = append(d.field, spec.quote)
					i += 2
					continue
				}
				if spec.escape == spec.quote && i+1 >= len(buf) && !final {
					return false, nil
				}
				inQuotes = false
				i++
			default:
				d.field = append(d.field, c)
				i++
			}
			continue
		}
		switch {
		case c == spec.quote:
			inQuotes, quoted = true, true
			i++
		case c == spec.delim:
			endField()
			i++
		case c == '\n' || c == '\r':
			if c == '\r' && i+1 >= len(buf) && !final {
				return false, nil
			}
			i++
			if c == '\r' && i < len(buf) && buf[i] == '\n' {
				i++
			}
			endField()
			d.pos += i
			return true, d.record(emit)
		default:
			d.field = append(d.field, c)
			i++
		}
	}
	if !final || len(buf) == 0 {
		return false, nil
	}
	if inQuotes {
		return false, d.errorf("unterminated CSV quoted field")
	}
	endField()
	d.pos += i
	return true, d.record(emit)
}

// binaryRecord decodes the header or one tuple of the binary format.
func (d *copyDecoder) binaryRecord(emit func([]driver.Value) error) (bool, error) {
	buf := d.buf[d.pos:]
	if !d.began {
		if len(buf) < len(binarySignature)+8 {
			if len(buf) > 0 && !strings.HasPrefix(binarySignature, string(buf[:min(len(buf), len(binarySignature))])) {
				return false, d.errorf("COPY file signature not recognized")
			}
			return false, nil
		}
		if string(buf[:len(binarySignature)]) != binarySignature {
			return false, d.errorf("COPY file signature not recognized")
		}
		flags := binary.BigEndian.Uint32(buf[len(binarySignature):])
		if flags&(1<<16) != 0 {
			return false, d.errorf("COPY with OIDs is not supported")
		}
		ext := binary.BigEndian.Uint32(buf[len(binarySignature)+4:])
		if ext > maxCopyRecord {
			return false, d.errorf("invalid COPY file header (bad extension length)")
		}
		need := len(binarySignature) + 8 + int(ext)
		if len(buf) < need {
			return false, nil
		}
		d.pos += need
		d.began = true
		return true, nil
	}
	if len(buf) < 2 {
		return false, nil
	}
	count := int16(binary.BigEndian.Uint16(buf))
	if count == -1 {
		d.pos += 2
		d.ended = true
		return false, nil
	}
	if int(count) != len(d.oids) {
		return false, d.errorf("row field count is %d, expected %d", count, len(d.oids))
	}
	at := 2
	d.vals = d.vals[:0]
	// First make sure the whole tuple is buffered.
	for i := 0; i < int(count); i++ {
		if len(buf) < at+4 {
			return false, nil
		}
		n := int32(binary.BigEndian.Uint32(buf[at:]))
		at += 4
		if n == -1 {
			continue
		}
		if n < 0 || n > maxCopyRecord {
			return false, d.errorf("invalid field size")
		}
		if len(buf) < at+int(n) {
			return false, nil
		}
		at += int(n)
	}
	at = 2
	for i := 0; i < int(count); i++ {
		n := int32(binary.BigEndian.Uint32(buf[at:]))
		at += 4
		if n == -1 {
			d.vals = append(d.vals, nil)
			continue
		}
		v, err := decodeParam(buf[at:at+int(n)], d.oids[i], 1)
		if err != nil {
			return false, err
		}
		d.vals = append(d.vals, v)
		at += int(n)
	}
	d.pos += at
	d.line++
	return true, emit(d.vals)
}
