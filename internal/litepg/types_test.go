package litepg

import (
	"database/sql/driver"
	"fmt"
	"math"
	"testing"
	"time"
)

// outcome is got, or "error: CODE" with the SQLSTATE of err when err is
// not nil: what the table tests compare.
func outcome(got string, err error) string {
	if err != nil {
		return "error: " + toPGError(err).code
	}
	return got
}

func TestDeclTypeOID(t *testing.T) {
	for decl, want := range map[string]uint32{
		"":                 oidUnknown,
		"INTEGER":          oidInt8,
		"BIGINT":           oidInt8,
		"int4":             oidInt4,
		"SMALLINT":         oidInt2,
		"CHAR(120)":        oidBPChar,
		"VARCHAR(10)":      oidVarchar,
		"TEXT":             oidText,
		"DOUBLE PRECISION": oidFloat8,
		"NUMERIC(10,2)":    oidFloat8,
		"BOOLEAN":          oidBool,
		"BYTEA":            oidBytea,
		"TIMESTAMPTZ":      oidTimestamptz,
		"timestamp":        oidTimestamp,
		"DATE":             oidDate,
		"UUID":             oidText,
	} {
		if got := declTypeOID(decl); got != want {
			t.Errorf("%q: %d, want %d", decl, got, want)
		}
	}
}

func TestEncode(t *testing.T) {
	when := time.Date(2000, 1, 2, 3, 4, 5, 600000000, time.UTC)
	for _, tc := range []struct {
		v      driver.Value
		oid    uint32
		text   string // or "error: CODE"
		binary string // hex-free raw bytes as %q
	}{
		{int64(5), oidInt8, "5", "\x00\x00\x00\x00\x00\x00\x00\x05"},
		{int64(-2), oidInt2, "-2", "\xff\xfe"},
		{int64(1 << 40), oidInt4, "error: 22003", "error: 22003"},
		{"12", oidInt4, "12", "\x00\x00\x00\x0c"},
		{"x", oidInt8, "error: 22P02", "error: 22P02"},
		{2.5, oidInt8, "2", "\x00\x00\x00\x00\x00\x00\x00\x02"},
		{1.5, oidFloat8, "1.5", "?\xf8\x00\x00\x00\x00\x00\x00"},
		{math.Inf(-1), oidFloat8, "-Infinity", "\xff\xf0\x00\x00\x00\x00\x00\x00"},
		{int64(1), oidBool, "t", "\x01"},
		{"f", oidBool, "f", "\x00"},
		{[]byte{0xde, 0xad}, oidBytea, `\xdead`, "\xde\xad"},
		{`\x0102`, oidBytea, `\x0102`, "\x01\x02"},
		{"héllo", oidText, "héllo", "héllo"},
		{int64(7), oidText, "7", "7"},
		{when, oidTimestamptz, "2000-01-02 03:04:05.6+00", "\x00\x00\x00\x16\xb05\xdb\x00"},
		{"2000-01-02 03:04:05.6", oidTimestamp, "2000-01-02 03:04:05.6", "\x00\x00\x00\x16\xb05\xdb\x00"},
		{"2000-01-03", oidDate, "2000-01-03", "\x00\x00\x00\x02"},
		{"", oidVoid, "", ""},
	} {
		text, err := appendText(nil, tc.v, tc.oid)
		if got := outcome(string(text), err); got != tc.text {
			t.Errorf("text %v as %d: %q, want %q", tc.v, tc.oid, got, tc.text)
		}
		bin, err := appendBinary(nil, tc.v, tc.oid)
		if got := outcome(string(bin), err); got != tc.binary {
			t.Errorf("binary %v as %d: %q, want %q", tc.v, tc.oid, got, tc.binary)
		}
	}
}

func TestDecodeParam(t *testing.T) {
	for _, tc := range []struct {
		data   string
		oid    uint32
		format int16
		want   string // %T:%v, or "error: CODE"
	}{
		{"42", oidInt8, 0, "int64:42"},
		{" 42 ", oidInt4, 0, "int64:42"},
		{"99999999999", oidInt4, 0, "error: 22003"},
		{"4x", oidInt8, 0, "error: 22P02"},
		{"\x00\x00\x00\x00\x00\x00\x00\x2a", oidInt8, 1, "int64:42"},
		{"\x00\x2a", oidInt8, 1, "int64:42"},
		{"\x2a", oidInt8, 1, "error: 22P03"},
		{"1.25", oidFloat8, 0, "float64:1.25"},
		{"?\xf8\x00\x00\x00\x00\x00\x00", oidFloat8, 1, "float64:1.5"},
		{"yes", oidBool, 0, "int64:1"},
		{"\x00", oidBool, 1, "int64:0"},
		{`\x00ff`, oidBytea, 0, "[]uint8:[0 255]"},
		{`a\\b\001`, oidBytea, 0, `[]uint8:[97 92 98 1]`},
		{"text", oidText, 0, "string:text"},
		{"text", oidUnknown, 1, "string:text"},
		{"\xff", oidText, 1, "error: 22021"},
		{"\x00\x00\x00\x01", oidDate, 1, "string:2000-01-02"},
		{"\x00\x00\x00\x00\x00\x0f\x42\x40", oidTimestamptz, 1, "string:2000-01-01 00:00:01"},
		{"x", oidNumeric, 1, "error: 0A000"},
		{"x", oidText, 2, "error: 08P01"},
	} {
		v, err := decodeParam([]byte(tc.data), tc.oid, tc.format)
		if got := outcome(fmt.Sprintf("%T:%v", v, v), err); got != tc.want {
			t.Errorf("%q as %d/%d: %s, want %s", tc.data, tc.oid, tc.format, got, tc.want)
		}
	}
	if v, err := decodeParam(nil, oidInt8, 1); v != nil || err != nil {
		t.Errorf("NULL: %v, %v", v, err)
	}
}

func TestSQLiteErrorMapping(t *testing.T) {
	for _, tc := range []struct {
		code int
		raw  string
		want string
		msg  string
	}{
		{1, "SQL logic error: near \"SELEC\": syntax error (1)", "42601", `near "SELEC": syntax error`},
		{1, "SQL logic error: no such table: t (1)", "42P01", "no such table: t"},
		{5, "database is locked (5) (SQLITE_BUSY)", "40001", "could not serialize access due to concurrent update: database is locked"},
		{517, "database is locked (517)", "40001", "could not serialize access due to concurrent update: database is locked"},
		{2067, "constraint failed: UNIQUE constraint failed: t.id (2067)", "23505", "UNIQUE constraint failed: t.id"},
		{1299, "constraint failed: NOT NULL constraint failed: t.v (1299)", "23502", "NOT NULL constraint failed: t.v"},
		{9, "interrupted (9)", "57014", "interrupted"},
		{1, "SQL logic error: something new (1)", "42000", "something new"},
	} {
		e := sqliteError(tc.code, tc.raw)
		if e.code != tc.want || e.msg != tc.msg {
			t.Errorf("%d %q: %s %q, want %s %q", tc.code, tc.raw, e.code, e.msg, tc.want, tc.msg)
		}
	}
}

// FuzzDecodeParam decodes arbitrary parameter bytes as every type in
// both formats; it must never panic, and a value must re-encode.
func FuzzDecodeParam(f *testing.F) {
	f.Add([]byte("42"), uint8(0))
	f.Add([]byte("\x00\x00\x00\x00\x00\x00\x00\x2a"), uint8(1))
	f.Add([]byte(`\x00ff`), uint8(0))
	f.Add([]byte("2024-01-01 00:00:00"), uint8(0))
	oids := []uint32{oidBool, oidBytea, oidInt2, oidInt4, oidInt8, oidText, oidFloat4, oidFloat8,
		oidBPChar, oidVarchar, oidDate, oidTimestamp, oidTimestamptz, oidNumeric, oidUnknown, oidJSONB, oidOID}
	f.Fuzz(func(t *testing.T, data []byte, format uint8) {
		for _, oid := range oids {
			v, err := decodeParam(data, oid, int16(format%3))
			if err != nil {
				if toPGError(err).code == "" {
					t.Fatalf("error without SQLSTATE: %v", err)
				}
				continue
			}
			if v == nil {
				continue
			}
			for _, out := range oids {
				appendText(nil, v, reportable(out))
				appendBinary(nil, v, reportable(out))
			}
		}
	})
}
