package litepg

import (
	"bytes"
	"context"
	"database/sql/driver"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

func TestCopyFromBinary(t *testing.T) {
	_, url := startServer(t, Options{})
	ctx := context.Background()
	c := connect(t, url, pgx.QueryExecModeCacheStatement)
	mustExec(t, c, sbCreate)
	rows := [][]any{{1, 10, "c1", "p1"}, {2, nil, "c2", "p2"}, {3, 30, "tab\there", ""}}
	// k has a default, so NULL violates NOT NULL only when given.
	if _, err := c.CopyFrom(ctx, pgx.Identifier{"sbtest1"}, []string{"id", "k", "c", "pad"}, pgx.CopyFromRows(rows)); pgCode(err) != "23502" {
		t.Fatalf("NULL into NOT NULL: %v", err)
	}
	rows[1][1] = 20
	n, err := c.CopyFrom(ctx, pgx.Identifier{"sbtest1"}, []string{"id", "k", "c", "pad"}, pgx.CopyFromRows(rows))
	if err != nil || n != 3 {
		t.Fatalf("copy: %d, %v", n, err)
	}
	var k int
	var s string
	if err := c.QueryRow(ctx, "SELECT k, c FROM sbtest1 WHERE id = 3").Scan(&k, &s); err != nil || k != 30 || s != "tab\there" {
		t.Fatalf("row 3: %d %q %v", k, s, err)
	}
	var count int
	if err := c.QueryRow(ctx, "SELECT count(*) FROM sbtest1").Scan(&count); err != nil || count != 3 {
		t.Fatalf("count: %d %v", count, err)
	}
	// Typed columns through binary COPY.
	mustExec(t, c, "CREATE TABLE typed (a SMALLINT, b INT4, c BIGINT, d DOUBLE PRECISION, e BOOLEAN, f VARCHAR(10), g BYTEA, h TEXT)")
	n, err = c.CopyFrom(ctx, pgx.Identifier{"typed"}, []string{"a", "b", "c", "d", "e", "f", "g", "h"},
		pgx.CopyFromRows([][]any{{int16(1), int32(2), int64(3), 4.5, true, "six", []byte{7}, nil}}))
	if err != nil || n != 1 {
		t.Fatalf("typed copy: %d, %v", n, err)
	}
	var (
		a  int16
		b  int32
		cc int64
		d  float64
		e  bool
		f  string
		g  []byte
		h  *string
	)
	if err := c.QueryRow(ctx, "SELECT a, b, c, d, e, f, g, h FROM typed").Scan(&a, &b, &cc, &d, &e, &f, &g, &h); err != nil ||
		a != 1 || b != 2 || cc != 3 || d != 4.5 || !e || f != "six" || !bytes.Equal(g, []byte{7}) || h != nil {
		t.Fatalf("typed row: %v %v %v %v %v %q %v %v: %v", a, b, cc, d, e, f, g, h, err)
	}
}

func TestCopyFromText(t *testing.T) {
	_, url := startServer(t, Options{})
	ctx := context.Background()
	c := connect(t, url, pgx.QueryExecModeSimpleProtocol)
	mustExec(t, c, sbCreate)
	pc := c.PgConn()
	data := "1\t10\tplain\tp\n2\t20\twith\\ttab\\nnewline\\\\slash\t\\N\n3\t30\toctal\\101\\x42\tp\r\n4\t40\tlast\tp"
	tag, err := pc.CopyFrom(ctx, strings.NewReader(data), "COPY sbtest1 (id,k,c,pad) FROM STDIN")
	if err == nil && tag.String() != "COPY 4" {
		t.Fatalf("tag %q", tag)
	}
	if pgCode(err) != "23502" {
		t.Fatalf("NULL pad: %v", err)
	}
	data = strings.Replace(data, `\N`, "p", 1)
	tag, err = pc.CopyFrom(ctx, strings.NewReader(data+"\n\\.\nignored after the end marker\n"), "COPY sbtest1 (id,k,c,pad) FROM STDIN")
	if err != nil || tag.String() != "COPY 4" {
		t.Fatalf("copy: %v, %v", tag, err)
	}
	want := map[int]string{1: "plain", 2: "with\ttab\nnewline\\slash", 3: "octalAB", 4: "last"}
	for id, w := range want {
		var s string
		if err := c.QueryRow(ctx, fmt.Sprintf("SELECT c FROM sbtest1 WHERE id = %d", id)).Scan(&s); err != nil || s != w {
			t.Fatalf("id %d: %q, %v; want %q", id, s, err, w)
		}
	}
	// A bad row fails the whole COPY, which then leaves nothing behind.
	_, err = pc.CopyFrom(ctx, strings.NewReader("5\t50\tc\tp\n6\tnot-a-number\tc\tp\n"), "COPY sbtest1 (id,k,c,pad) FROM STDIN")
	if pgCode(err) != "22P02" {
		t.Fatalf("bad integer: %v", err)
	}
	_, err = pc.CopyFrom(ctx, strings.NewReader("7\t70\tc\n"), "COPY sbtest1 (id,k,c,pad) FROM STDIN")
	if pgCode(err) != "22P04" {
		t.Fatalf("missing column: %v", err)
	}
	var n int
	if err := c.QueryRow(ctx, "SELECT count(*) FROM sbtest1").Scan(&n); err != nil || n != 4 {
		t.Fatalf("count after failed copies: %d, %v", n, err)
	}
	// CSV with a header, quotes and an embedded line break.
	mustExec(t, c, "CREATE TABLE csv (id INTEGER, note TEXT)")
	csv := "id,note\n1,\"a, \"\"quoted\"\"\nline\"\n2,\n3,\"\"\n"
	tag, err = pc.CopyFrom(ctx, strings.NewReader(csv), "COPY csv FROM STDIN WITH (FORMAT csv, HEADER true)")
	if err != nil || tag.String() != "COPY 3" {
		t.Fatalf("csv: %v, %v", tag, err)
	}
	var note *string
	if err := c.QueryRow(ctx, "SELECT note FROM csv WHERE id = 1").Scan(&note); err != nil || note == nil || *note != "a, \"quoted\"\nline" {
		t.Fatalf("csv quoted: %v, %v", note, err)
	}
	if err := c.QueryRow(ctx, "SELECT note FROM csv WHERE id = 2").Scan(&note); err != nil || note != nil {
		t.Fatalf("csv unquoted empty is NULL: %v, %v", note, err)
	}
	if err := c.QueryRow(ctx, "SELECT note FROM csv WHERE id = 3").Scan(&note); err != nil || note == nil || *note != "" {
		t.Fatalf("csv quoted empty is empty: %v, %v", note, err)
	}
	// Inside a transaction block COPY is part of the block.
	mustExec(t, c, "BEGIN")
	if _, err := pc.CopyFrom(ctx, strings.NewReader("9\tnine\n"), "COPY csv FROM STDIN"); err != nil {
		t.Fatal(err)
	}
	mustExec(t, c, "ROLLBACK")
	if err := c.QueryRow(ctx, "SELECT count(*) FROM csv").Scan(&n); err != nil || n != 3 {
		t.Fatalf("rolled back copy: %d, %v", n, err)
	}
	// Errors naming the target.
	for _, tc := range []struct{ sql, code string }{
		{"COPY nowhere FROM STDIN", "42P01"},
		{"COPY csv (nope) FROM STDIN", "42703"},
		{"COPY csv FROM '/etc/passwd'", "0A000"},
		{"COPY csv TO '/tmp/x'", "0A000"},
	} {
		if _, err := pc.CopyFrom(ctx, strings.NewReader(""), tc.sql); pgCode(err) != tc.code {
			t.Fatalf("%s: %v, want %s", tc.sql, err, tc.code)
		}
	}
}

// countingWriter counts bytes and lines written to it.
type countingWriter struct{ bytes, lines int64 }

func (w *countingWriter) Write(p []byte) (int, error) {
	w.bytes += int64(len(p))
	w.lines += int64(bytes.Count(p, []byte{'\n'}))
	return len(p), nil
}

func TestCopyTo(t *testing.T) {
	_, url := startServer(t, Options{})
	ctx := context.Background()
	c := connect(t, url, pgx.QueryExecModeSimpleProtocol)
	pc := c.PgConn()
	var w countingWriter
	tag, err := pc.CopyTo(ctx, &w, "COPY (SELECT repeat('b', 7000) FROM generate_series(1, 2000)) TO STDOUT")
	if err != nil || tag.String() != "COPY 2000" || w.bytes != 2000*7001 || w.lines != 2000 {
		t.Fatalf("bulk copy: %v %v, %d bytes %d lines", tag, err, w.bytes, w.lines)
	}
	mustExec(t, c, "CREATE TABLE t (id INTEGER, v TEXT, b BOOLEAN)")
	mustExec(t, c, "INSERT INTO t VALUES (1, 'a\tb', true), (2, NULL, false), (3, 'x,\"y\"', NULL)")
	for _, tc := range []struct{ sql, want string }{
		{"COPY t TO STDOUT", "1\ta\\tb\tt\n2\t\\N\tf\n3\tx,\"y\"\t\\N\n"},
		{"COPY t (v, id) TO STDOUT WITH (FORMAT csv, HEADER)", "v,id\na\tb,1\n,2\n\"x,\"\"y\"\"\",3\n"},
		{"COPY (SELECT id FROM t WHERE id > 1) TO STDOUT WITH (DELIMITER '|', NULL 'nil')", "2\n3\n"},
		{"COPY (SELECT v FROM t ORDER BY id) TO STDOUT (NULL 'nil')", "a\\tb\nnil\nx,\"y\"\n"},
	} {
		var buf bytes.Buffer
		if _, err := pc.CopyTo(ctx, &buf, tc.sql); err != nil || buf.String() != tc.want {
			t.Fatalf("%s: %q, %v; want %q", tc.sql, buf.String(), err, tc.want)
		}
	}
	var buf bytes.Buffer
	if _, err := pc.CopyTo(ctx, &buf, "COPY (SELECT 1::int4, NULL::text) TO STDOUT (FORMAT binary)"); err != nil {
		t.Fatal(err)
	}
	want := binarySignature + "\x00\x00\x00\x00\x00\x00\x00\x00" + "\x00\x02\x00\x00\x00\x04\x00\x00\x00\x01\xff\xff\xff\xff" + "\xff\xff"
	if buf.String() != want {
		t.Fatalf("binary copy out: %q", buf.String())
	}
	// A binary COPY OUT feeds a binary COPY IN.
	mustExec(t, c, "CREATE TABLE t2 (id INTEGER, v TEXT, b BOOLEAN)")
	buf.Reset()
	if _, err := pc.CopyTo(ctx, &buf, "COPY t TO STDOUT (FORMAT binary)"); err != nil {
		t.Fatal(err)
	}
	if tag, err := pc.CopyFrom(ctx, &buf, "COPY t2 FROM STDIN (FORMAT binary)"); err != nil || tag.String() != "COPY 3" {
		t.Fatalf("binary round trip: %v, %v", tag, err)
	}
	var same int
	if err := c.QueryRow(ctx, "SELECT count(*) FROM t JOIN t2 ON t.id = t2.id AND t.v IS t2.v AND t.b IS t2.b").Scan(&same); err != nil || same != 3 {
		t.Fatalf("binary round trip rows: %d, %v", same, err)
	}
}

func TestCopyOutCancel(t *testing.T) {
	_, url := startServer(t, Options{})
	ctx := context.Background()
	c := connect(t, url, pgx.QueryExecModeSimpleProtocol)
	pc := c.PgConn()
	w := &cancelingWriter{cancel: func() { pc.CancelRequest(ctx) }}
	_, err := pc.CopyTo(ctx, w, "COPY (SELECT repeat('b', 1000) FROM generate_series(1, 100000000)) TO STDOUT")
	if pgCode(err) != "57014" {
		t.Fatalf("canceled copy: %v after %d bytes", err, w.n)
	}
	var one int
	if err := c.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil {
		t.Fatal(err)
	}
}

// cancelingWriter sends a cancel request once data arrives.
type cancelingWriter struct {
	cancel func()
	n      int
}

func (w *cancelingWriter) Write(p []byte) (int, error) {
	if w.n == 0 {
		go w.cancel()
	}
	w.n += len(p)
	return len(p), nil
}

func TestCopyDecoder(t *testing.T) {
	text := &copySpec{from: true, format: copyText, delim: '\t', null: `\N`}
	csv := &copySpec{from: true, format: copyCSV, delim: ',', quote: '"', escape: '"', null: ""}
	bin := &copySpec{from: true, format: copyBinary}
	for _, tc := range []struct {
		name   string
		spec   *copySpec
		chunks []string
		want   string // records rendered with %v, or "error: CODE"
	}{
		{"text", text, []string{"1\ta\n", "2\t\\N\n"}, "[[1 a] [2 <nil>]]"},
		{"text split", text, []string{"1\t", "a", "b\n2\tc"}, "[[1 ab] [2 c]]"},
		{"text crlf and marker", text, []string{"1\ta\r\n\\.\n3\tz\n"}, "[[1 a]]"},
		{"text escaped delimiter", text, []string{"1\ta\\\tb\n"}, "[[1 a\tb]]"},
		{"text trailing backslash", text, []string{"1\ta\\"}, "[[1 a\\]]"},
		{"text too many", text, []string{"1\ta\tb\n"}, "error: 22P04"},
		{"text too few", text, []string{"1\n"}, "error: 22P04"},
		{"text bad int", text, []string{"x\ta\n"}, "error: 22P02"},
		{"csv", csv, []string{"1,\"a\n", "b\"\n2,\n"}, "[[1 a\nb] [2 <nil>]]"},
		{"csv doubled quote split", csv, []string{"1,\"a\"", "\"b\"\n"}, "[[1 a\"b]]"},
		{"csv unterminated", csv, []string{"1,\"a"}, "error: 22P04"},
		{"csv marker", csv, []string{"1,a\n\\.\n"}, "[[1 a]]"},
		{"binary", bin, []string{binarySignature + "\x00\x00\x00\x00\x00\x00\x00\x00",
			"\x00\x02\x00\x00\x00\x08\x00\x00\x00\x00\x00\x00\x00\x05", "\x00\x00\x00\x01z\xff\xff"}, "[[5 z]]"},
		{"binary without trailer", bin, []string{binarySignature + "\x00\x00\x00\x00\x00\x00\x00\x00" +
			"\x00\x02\x00\x00\x00\x04\x00\x00\x00\x05\xff\xff\xff\xff"}, "[[5 <nil>]]"},
		{"binary bad signature", bin, []string{"PGCOPY\n\377\r\n\001xxxxxxxx"}, "error: 22P04"},
		{"binary short", bin, []string{binarySignature + "\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00"}, "error: 22P04"},
		{"binary field count", bin, []string{binarySignature + "\x00\x00\x00\x00\x00\x00\x00\x00\x00\x03"}, "error: 22P04"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &copyDecoder{spec: tc.spec, oids: []uint32{oidInt8, oidText}, names: []string{"a", "b"}}
			var got [][]driver.Value
			emit := func(v []driver.Value) error {
				got = append(got, append([]driver.Value{}, v...))
				return nil
			}
			var err error
			for _, ch := range tc.chunks {
				if err = d.feed([]byte(ch), emit); err != nil {
					break
				}
			}
			if err == nil {
				err = d.finish(emit)
			}
			if res := outcome(fmt.Sprintf("%v", got), err); res != tc.want {
				t.Fatalf("got %s, want %s", res, tc.want)
			}
		})
	}
}

// FuzzCopyDecoder feeds arbitrary bytes, split at an arbitrary point, to
// the COPY decoders; they must never panic.
func FuzzCopyDecoder(f *testing.F) {
	f.Add([]byte("1\ta\n2\t\\N\n"), uint8(0), uint16(3))
	f.Add([]byte("1,\"a\"\"b\"\n2,\n"), uint8(1), uint16(4))
	f.Add([]byte(binarySignature+"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00\x00\x00\x08\x00\x00\x00\x00\x00\x00\x00\x05\x00\x00\x00\x01z\xff\xff"), uint8(2), uint16(20))
	f.Add([]byte("\\.\n"), uint8(0), uint16(1))
	f.Fuzz(func(t *testing.T, data []byte, format uint8, split uint16) {
		specs := []*copySpec{
			{from: true, format: copyText, delim: '\t', null: `\N`},
			{from: true, format: copyCSV, delim: ',', quote: '"', escape: '"', null: "", header: true},
			{from: true, format: copyBinary},
		}
		spec := specs[int(format)%len(specs)]
		d := &copyDecoder{spec: spec, oids: []uint32{oidInt8, oidText, oidBool}, names: []string{"a", "b", "c"}}
		emit := func([]driver.Value) error { return nil }
		cut := int(split) % (len(data) + 1)
		if err := d.feed(data[:cut], emit); err != nil {
			return
		}
		if err := d.feed(data[cut:], emit); err != nil {
			return
		}
		d.finish(emit)
	})
}

// BenchmarkCopyOut streams the lab's bulk query through COPY TO STDOUT.
func BenchmarkCopyOut(b *testing.B) {
	_, url := startServer(b, Options{})
	c := connect(b, url, pgx.QueryExecModeSimpleProtocol)
	const rows = 10000
	b.SetBytes(rows * 7001)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		var w countingWriter
		if _, err := c.PgConn().CopyTo(context.Background(), &w,
			fmt.Sprintf("COPY (SELECT repeat('b', 7000) FROM generate_series(1, %d)) TO STDOUT", rows)); err != nil {
			b.Fatal(err)
		}
	}
}
