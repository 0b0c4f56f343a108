package litepg

import (
	"database/sql/driver"
	"encoding/binary"
	"encoding/hex"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sluicelab/sluice/internal/sqlstate"
)

// PostgreSQL type OIDs. The server reports only the types below; every
// one of them has a text and a binary encoding here.
const (
	oidUnknown     uint32 = 0 // no type known yet (never sent: reported as text)
	oidBool        uint32 = 16
	oidBytea       uint32 = 17
	oidName        uint32 = 19
	oidInt8        uint32 = 20
	oidInt2        uint32 = 21
	oidInt4        uint32 = 23
	oidText        uint32 = 25
	oidOID         uint32 = 26
	oidJSON        uint32 = 114
	oidFloat4      uint32 = 700
	oidFloat8      uint32 = 701
	oidUnknownLit  uint32 = 705
	oidBPChar      uint32 = 1042
	oidVarchar     uint32 = 1043
	oidDate        uint32 = 1082
	oidTime        uint32 = 1083
	oidTimestamp   uint32 = 1114
	oidTimestamptz uint32 = 1184
	oidInterval    uint32 = 1186
	oidNumeric     uint32 = 1700
	oidUUID        uint32 = 2950
	oidVoid        uint32 = 2278
	oidJSONB       uint32 = 3802
)

// typeSize returns the pg_type.typlen reported in a RowDescription.
func typeSize(oid uint32) int16 {
	switch oid {
	case oidBool:
		return 1
	case oidInt2:
		return 2
	case oidInt4, oidFloat4, oidDate:
		return 4
	case oidInt8, oidFloat8, oidTimestamp, oidTimestamptz:
		return 8
	case oidVoid:
		return 4
	}
	return -1
}

// typeName returns the PostgreSQL name of a reported type, for messages.
func typeName(oid uint32) string {
	switch oid {
	case oidBool:
		return "boolean"
	case oidBytea:
		return "bytea"
	case oidInt2:
		return "smallint"
	case oidInt4:
		return "integer"
	case oidInt8:
		return "bigint"
	case oidFloat4:
		return "real"
	case oidFloat8:
		return "double precision"
	case oidBPChar:
		return "character"
	case oidVarchar:
		return "character varying"
	case oidDate:
		return "date"
	case oidTimestamp:
		return "timestamp without time zone"
	case oidTimestamptz:
		return "timestamp with time zone"
	case oidVoid:
		return "void"
	}
	return "text"
}

// reportable maps any OID to one the server reports: types without an
// encoding of their own are reported as text.
func reportable(oid uint32) uint32 {
	switch oid {
	case oidBool, oidBytea, oidInt2, oidInt4, oidInt8, oidText, oidFloat4, oidFloat8,
		oidBPChar, oidVarchar, oidDate, oidTimestamp, oidTimestamptz, oidVoid:
		return oid
	case oidNumeric:
		return oidFloat8
	case oidOID:
		return oidInt8
	}
	return oidText
}

// declTypeOID maps an SQLite declared column type, as CREATE TABLE wrote
// it after translation, to the OID reported for that column. Integers
// are reported as int8 (SQLite integers are 64-bit) except columns
// declared SMALLINT/INT2 or INT4; NUMERIC, DECIMAL and REAL are reported
// as float8. An empty declared type gives oidUnknown.
func declTypeOID(decl string) uint32 {
	d := strings.ToUpper(strings.TrimSpace(decl))
	if i := strings.IndexByte(d, '('); i >= 0 {
		d = strings.TrimSpace(d[:i])
	}
	switch d {
	case "":
		return oidUnknown
	case "SMALLINT", "INT2":
		return oidInt2
	case "INT4":
		return oidInt4
	case "BOOL", "BOOLEAN":
		return oidBool
	case "CHAR", "CHARACTER", "BPCHAR", "NCHAR":
		return oidBPChar
	case "VARCHAR", "CHARACTER VARYING", "NVARCHAR", "VARYING CHARACTER", "NATIVE CHARACTER":
		return oidVarchar
	case "DATE":
		return oidDate
	case "TIMESTAMP", "DATETIME", "TIMESTAMP WITHOUT TIME ZONE":
		return oidTimestamp
	case "TIMESTAMPTZ", "TIMESTAMP WITH TIME ZONE":
		return oidTimestamptz
	case "BYTEA", "BLOB":
		return oidBytea
	}
	switch {
	case strings.Contains(d, "INT"):
		return oidInt8
	case strings.Contains(d, "CHAR"), strings.Contains(d, "CLOB"), strings.Contains(d, "TEXT"):
		return oidText
	case strings.Contains(d, "REAL"), strings.Contains(d, "FLOA"), strings.Contains(d, "DOUB"),
		strings.HasPrefix(d, "NUMERIC"), strings.HasPrefix(d, "DECIMAL"):
		return oidFloat8
	}
	return oidText
}

// paramOID is the parameter type inferred from a column of type oid:
// any integer column takes int8 parameters, so any Go integer fits.
func paramOID(oid uint32) uint32 {
	switch oid {
	case oidInt2, oidInt4, oidInt8:
		return oidInt8
	case oidUnknown:
		return oidText
	}
	return reportable(oid)
}

// pgEpoch is the origin of PostgreSQL's binary dates and timestamps.
var pgEpoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

const (
	dateLayout      = "2006-01-02"
	timestampLayout = "2006-01-02 15:04:05.999999"
)

// timeLayouts are the text forms accepted for dates and timestamps held
// as strings, tried in order.
var timeLayouts = []string{
	"2006-01-02 15:04:05.999999999Z07:00",
	"2006-01-02T15:04:05.999999999Z07:00",
	"2006-01-02 15:04:05.999999999Z07",
	"2006-01-02 15:04:05.999999999",
	"2006-01-02T15:04:05.999999999",
	"2006-01-02 15:04",
	"2006-01-02",
}

func parseTime(s string) (time.Time, bool) {
	s = strings.TrimSpace(s)
	for _, l := range timeLayouts {
		if t, err := time.Parse(l, s); err == nil {
			return t, true
		}
	}
	return time.Time{}, false
}

// outOfRange is the error of a value that does not fit the reported type.
func outOfRange(oid uint32) *pgError {
	return &pgError{code: sqlstate.NumericValueOutOfRange, msg: typeName(oid) + " out of range"}
}

func badInput(oid uint32, s string) *pgError {
	return &pgError{code: sqlstate.InvalidTextRepresentation, msg: "invalid input syntax for type " + typeName(oid) + ": " + strconv.Quote(clip(s))}
}

// toInt converts an SQLite value to an integer for a column of type oid.
// Reals are rounded as PostgreSQL's float-to-integer cast does.
func toInt(v driver.Value, oid uint32) (int64, error) {
	switch x := v.(type) {
	case int64:
		return x, nil
	case float64:
		r := math.RoundToEven(x)
		if math.IsNaN(r) || r < -9.223372036854775808e18 || r >= 9.223372036854775808e18 {
			return 0, outOfRange(oid)
		}
		return int64(r), nil
	}
	return otherToNumber(v, oid, parseIntText)
}

// otherToNumber converts a boolean (1 or 0) or a text value (by parse)
// to a number for a column of type oid; other values are invalid input.
func otherToNumber[N int64 | float64](v driver.Value, oid uint32, parse func(string, uint32) (N, error)) (N, error) {
	switch x := v.(type) {
	case bool:
		if x {
			return 1, nil
		}
		return 0, nil
	case string:
		return parse(x, oid)
	case []byte:
		return parse(string(x), oid)
	}
	return 0, badInput(oid, "")
}

func parseIntText(s string, oid uint32) (int64, error) {
	t := strings.TrimSpace(s)
	if n, err := strconv.ParseInt(t, 10, 64); err == nil {
		return n, nil
	} else if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
		return 0, outOfRange(oid)
	}
	if f, err := strconv.ParseFloat(t, 64); err == nil && !strings.ContainsAny(t, "nNiI") {
		return toInt(f, oid)
	}
	return 0, badInput(oid, s)
}

// toIntOf converts v as toInt does and checks that it fits the integer
// type oid.
func toIntOf(v driver.Value, oid uint32) (int64, error) {
	n, err := toInt(v, oid)
	if err != nil {
		return 0, err
	}
	return n, checkIntRange(n, oid)
}

// checkIntRange reports whether n fits the integer type oid.
func checkIntRange(n int64, oid uint32) error {
	switch oid {
	case oidInt2:
		if n < math.MinInt16 || n > math.MaxInt16 {
			return outOfRange(oid)
		}
	case oidInt4:
		if n < math.MinInt32 || n > math.MaxInt32 {
			return outOfRange(oid)
		}
	}
	return nil
}

// toFloat converts an SQLite value to a float.
func toFloat(v driver.Value, oid uint32) (float64, error) {
	switch x := v.(type) {
	case float64:
		return x, nil
	case int64:
		return float64(x), nil
	}
	return otherToNumber(v, oid, parseFloatText)
}

func parseFloatText(s string, oid uint32) (float64, error) {
	t := strings.TrimSpace(s)
	switch strings.ToLower(t) {
	case "infinity", "+infinity", "inf", "+inf":
		return math.Inf(1), nil
	case "-infinity", "-inf":
		return math.Inf(-1), nil
	case "nan":
		return math.NaN(), nil
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil {
		if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
			return 0, outOfRange(oid)
		}
		return 0, badInput(oid, s)
	}
	return f, nil
}

// toBool converts an SQLite value to a boolean.
func toBool(v driver.Value) (bool, error) {
	switch x := v.(type) {
	case int64:
		return x != 0, nil
	case float64:
		return x != 0, nil
	case bool:
		return x, nil
	case string:
		return parseBool(x)
	case []byte:
		return parseBool(string(x))
	}
	return false, badInput(oidBool, "")
}

// parseBool accepts PostgreSQL's boolean input forms.
func parseBool(s string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "t", "true", "y", "yes", "on", "1":
		return true, nil
	case "f", "false", "n", "no", "off", "0":
		return false, nil
	}
	return false, badInput(oidBool, s)
}

// toTime converts an SQLite value to a time for a date or timestamp
// column. Integers are Unix seconds.
func toTime(v driver.Value, oid uint32) (time.Time, error) {
	switch x := v.(type) {
	case time.Time:
		return x.UTC(), nil
	case string:
		if t, ok := parseTime(x); ok {
			return t.UTC(), nil
		}
		return time.Time{}, &pgError{code: sqlstate.InvalidDatetimeFormat, msg: "invalid input syntax for type " + typeName(oid) + ": " + strconv.Quote(clip(x))}
	case []byte:
		return toTime(string(x), oid)
	case int64:
		return time.Unix(x, 0).UTC(), nil
	case float64:
		sec, frac := math.Modf(x)
		return time.Unix(int64(sec), int64(frac*1e9)).UTC(), nil
	}
	return time.Time{}, badInput(oid, "")
}

// appendFloatText renders f as PostgreSQL prints a float8.
func appendFloatText(buf []byte, f float64, bits int) []byte {
	switch {
	case math.IsNaN(f):
		return append(buf, "NaN"...)
	case math.IsInf(f, 1):
		return append(buf, "Infinity"...)
	case math.IsInf(f, -1):
		return append(buf, "-Infinity"...)
	}
	return strconv.AppendFloat(buf, f, 'g', -1, bits)
}

// appendText appends the text-format encoding of v as type oid to buf.
// v is an SQLite value (int64, float64, string, []byte, time.Time, bool)
// and must not be nil.
func appendText(buf []byte, v driver.Value, oid uint32) ([]byte, error) {
	switch oid {
	case oidInt2, oidInt4, oidInt8:
		n, err := toIntOf(v, oid)
		if err != nil {
			return buf, err
		}
		return strconv.AppendInt(buf, n, 10), nil
	case oidFloat4, oidFloat8:
		f, err := toFloat(v, oid)
		if err != nil {
			return buf, err
		}
		bits := 64
		if oid == oidFloat4 {
			bits = 32
		}
		return appendFloatText(buf, f, bits), nil
	case oidBool:
		b, err := toBool(v)
		if err != nil {
			return buf, err
		}
		if b {
			return append(buf, 't'), nil
		}
		return append(buf, 'f'), nil
	case oidBytea:
		var raw []byte
		switch x := v.(type) {
		case []byte:
			raw = x
		case string:
			raw = byteaFromText(x)
		default:
			var err error
			raw, err = appendText(nil, v, oidText)
			if err != nil {
				return buf, err
			}
		}
		buf = append(buf, '\\', 'x')
		return hex.AppendEncode(buf, raw), nil
	case oidDate, oidTimestamp, oidTimestamptz:
		if s, ok := v.(string); ok {
			if _, parsed := parseTime(s); !parsed {
				return append(buf, s...), nil // shown as stored
			}
		}
		t, err := toTime(v, oid)
		if err != nil {
			return buf, err
		}
		switch oid {
		case oidDate:
			return t.AppendFormat(buf, dateLayout), nil
		case oidTimestamptz:
			return append(t.AppendFormat(buf, timestampLayout), "+00"...), nil
		}
		return t.AppendFormat(buf, timestampLayout), nil
	case oidVoid:
		return buf, nil
	}
	switch x := v.(type) {
	case string:
		return append(buf, x...), nil
	case []byte:
		return append(buf, x...), nil
	case int64:
		return strconv.AppendInt(buf, x, 10), nil
	case float64:
		return appendFloatText(buf, x, 64), nil
	case bool:
		if x {
			return append(buf, "true"...), nil
		}
		return append(buf, "false"...), nil
	case time.Time:
		return x.UTC().AppendFormat(buf, timestampLayout), nil
	}
	return buf, &pgError{code: sqlstate.InternalError, msg: "unexpected SQLite value"}
}

// appendBinary appends the binary-format encoding of v as type oid.
func appendBinary(buf []byte, v driver.Value, oid uint32) ([]byte, error) {
	switch oid {
	case oidInt2, oidInt4, oidInt8:
		n, err := toIntOf(v, oid)
		if err != nil {
			return buf, err
		}
		switch oid {
		case oidInt2:
			return binary.BigEndian.AppendUint16(buf, uint16(n)), nil
		case oidInt4:
			return binary.BigEndian.AppendUint32(buf, uint32(n)), nil
		}
		return binary.BigEndian.AppendUint64(buf, uint64(n)), nil
	case oidFloat4:
		f, err := toFloat(v, oid)
		if err != nil {
			return buf, err
		}
		return binary.BigEndian.AppendUint32(buf, math.Float32bits(float32(f))), nil
	case oidFloat8:
		f, err := toFloat(v, oid)
		if err != nil {
			return buf, err
		}
		return binary.BigEndian.AppendUint64(buf, math.Float64bits(f)), nil
	case oidBool:
		b, err := toBool(v)
		if err != nil {
			return buf, err
		}
		if b {
			return append(buf, 1), nil
		}
		return append(buf, 0), nil
	case oidBytea:
		switch x := v.(type) {
		case []byte:
			return append(buf, x...), nil
		case string:
			return append(buf, byteaFromText(x)...), nil
		}
		return appendText(buf, v, oidText)
	case oidDate:
		t, err := toTime(v, oid)
		if err != nil {
			return buf, err
		}
		days := int64(math.Floor(t.Sub(pgEpoch).Hours() / 24))
		return binary.BigEndian.AppendUint32(buf, uint32(int32(days))), nil
	case oidTimestamp, oidTimestamptz:
		t, err := toTime(v, oid)
		if err != nil {
			return buf, err
		}
		us := t.Sub(pgEpoch).Microseconds()
		return binary.BigEndian.AppendUint64(buf, uint64(us)), nil
	case oidVoid:
		return buf, nil
	}
	return appendText(buf, v, oid)
}

// decodeParam decodes a Bind parameter value of type oid in the given
// format (0 text, 1 binary) into an SQLite value. nil data is NULL.
func decodeParam(data []byte, oid uint32, format int16) (driver.Value, error) {
	if data == nil {
		return nil, nil
	}
	if format == 0 {
		return decodeTextParam(string(data), oid)
	}
	if format != 1 {
		return nil, &pgError{code: sqlstate.ProtocolViolation, msg: "unsupported format code: " + strconv.Itoa(int(format))}
	}
	switch oid {
	case oidInt2, oidInt4, oidInt8, oidOID:
		switch len(data) {
		case 2:
			return int64(int16(binary.BigEndian.Uint16(data))), nil
		case 4:
			if oid == oidOID {
				return int64(binary.BigEndian.Uint32(data)), nil
			}
			return int64(int32(binary.BigEndian.Uint32(data))), nil
		case 8:
			return int64(binary.BigEndian.Uint64(data)), nil
		}
		return nil, &pgError{code: sqlstate.InvalidBinaryRepresent, msg: "incorrect binary data format in bind parameter"}
	case oidFloat4:
		if len(data) != 4 {
			return nil, &pgError{code: sqlstate.InvalidBinaryRepresent, msg: "incorrect binary data format in bind parameter"}
		}
		return float64(math.Float32frombits(binary.BigEndian.Uint32(data))), nil
	case oidFloat8:
		if len(data) != 8 {
			return nil, &pgError{code: sqlstate.InvalidBinaryRepresent, msg: "incorrect binary data format in bind parameter"}
		}
		return math.Float64frombits(binary.BigEndian.Uint64(data)), nil
	case oidBool:
		if len(data) != 1 {
			return nil, &pgError{code: sqlstate.InvalidBinaryRepresent, msg: "incorrect binary data format in bind parameter"}
		}
		if data[0] != 0 {
			return int64(1), nil
		}
		return int64(0), nil
	case oidBytea:
		return append([]byte{}, data...), nil
	case oidDate:
		if len(data) != 4 {
			return nil, &pgError{code: sqlstate.InvalidBinaryRepresent, msg: "incorrect binary data format in bind parameter"}
		}
		days := int32(binary.BigEndian.Uint32(data))
		return pgEpoch.AddDate(0, 0, int(days)).Format(dateLayout), nil
	case oidTimestamp, oidTimestamptz:
		if len(data) != 8 {
			return nil, &pgError{code: sqlstate.InvalidBinaryRepresent, msg: "incorrect binary data format in bind parameter"}
		}
		us := int64(binary.BigEndian.Uint64(data))
		return pgEpoch.Add(time.Duration(us) * time.Microsecond).Format(timestampLayout), nil
	case oidText, oidVarchar, oidBPChar, oidName, oidUnknown, oidUnknownLit, oidJSON:
		if !utf8.Valid(data) {
			return nil, &pgError{code: sqlstate.CharacterNotInRepertoire, msg: "invalid byte sequence for encoding \"UTF8\""}
		}
		return string(data), nil
	case oidJSONB:
		if len(data) > 0 && data[0] == 1 && utf8.Valid(data[1:]) {
			return string(data[1:]), nil
		}
	}
	return nil, unsupportedf("binary format for parameters of type OID %d is not supported", oid)
}

// decodeTextParam decodes a text-format parameter value.
func decodeTextParam(s string, oid uint32) (driver.Value, error) {
	switch oid {
	case oidInt2, oidInt4, oidInt8, oidOID:
		n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		if err != nil {
			if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
				return nil, outOfRange(oid)
			}
			return nil, badInput(oid, s)
		}
		if err := checkIntRange(n, oid); err != nil {
			return nil, err
		}
		return n, nil
	case oidFloat4, oidFloat8, oidNumeric:
		return parseFloatText(s, oid)
	case oidBool:
		b, err := parseBool(s)
		if err != nil {
			return nil, err
		}
		if b {
			return int64(1), nil
		}
		return int64(0), nil
	case oidBytea:
		return decodeByteaText(s)
	}
	if !utf8.ValidString(s) {
		return nil, &pgError{code: sqlstate.CharacterNotInRepertoire, msg: "invalid byte sequence for encoding \"UTF8\""}
	}
	return s, nil
}

// decodeByteaText decodes bytea input in hex (\x...) or escape format.
func decodeByteaText(s string) ([]byte, error) {
	if strings.HasPrefix(s, `\x`) {
		b, err := hex.DecodeString(s[2:])
		if err != nil {
			return nil, badInput(oidBytea, s)
		}
		return b, nil
	}
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' {
			out = append(out, c)
			continue
		}
		if i+1 < len(s) && s[i+1] == '\\' {
			out = append(out, '\\')
			i++
			continue
		}
		if i+3 < len(s) && isOctal(s[i+1]) && isOctal(s[i+2]) && isOctal(s[i+3]) {
			n, _ := strconv.ParseUint(s[i+1:i+4], 8, 16)
			if n > 255 {
				return nil, badInput(oidBytea, s)
			}
			out = append(out, byte(n))
			i += 3
			continue
		}
		return nil, badInput(oidBytea, s)
	}
	return out, nil
}

// byteaFromText returns the bytes of a string held in a bytea column: a
// value written as text in hex input syntax (\x...) is decoded, any
// other string is taken as its bytes.
func byteaFromText(s string) []byte {
	if strings.HasPrefix(s, `\x`) {
		if b, err := hex.DecodeString(s[2:]); err == nil {
			return b
		}
	}
	return []byte(s)
}

func isOctal(c byte) bool { return c >= '0' && c <= '7' }

// runtimeOID is the type reported for a column whose type is known only
// from a value: the simple protocol looks at the first row.
func runtimeOID(v driver.Value) uint32 {
	switch v.(type) {
	case int64:
		return oidInt8
	case float64:
		return oidFloat8
	case []byte:
		return oidBytea
	case time.Time:
		return oidTimestamp
	case bool:
		return oidBool
	}
	return oidText
}
