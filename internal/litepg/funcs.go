package litepg

import (
	"crypto/md5"
	"database/sql/driver"
	"encoding/hex"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/sluicelab/sluice/internal/clock"
	sqlite "modernc.org/sqlite"
)

// maxStringLen is the longest string the functions below build, as in
// PostgreSQL (1 GB less one byte).
const maxStringLen = 1<<30 - 1

// registerFunctions installs PostgreSQL functions that SQLite lacks on
// the server's own driver, so they reach only this server's connections.
func (s *Server) registerFunctions() error {
	register := func(deterministic bool) func(string, int32, func([]driver.Value) (driver.Value, error)) error {
		return func(name string, n int32, f func([]driver.Value) (driver.Value, error)) error {
			return s.drv.RegisterFunction(name, &sqlite.FunctionImpl{NArgs: n, Deterministic: deterministic,
				Scalar: func(_ *sqlite.FunctionContext, args []driver.Value) (driver.Value, error) { return f(args) }})
		}
	}
	det, vol := register(true), register(false)
	regs := []error{
		det("repeat", 2, fnRepeat),
		det("litepg_bool", 1, fnBool),
		det("litepg_bytea", 1, fnBytea),
		det("md5", 1, fnMD5),
		det("left", 2, fnLeft),
		det("right", 2, fnRight),
		det("lpad", -1, fnPad(true)),
		det("rpad", -1, fnPad(false)),
		det("strpos", 2, fnStrpos),
		det("btrim", -1, fnBtrim),
		det("chr", 1, fnChr),
		det("ascii", 1, fnASCII),
		det("split_part", 3, fnSplitPart),
		det("reverse", 1, fnReverse),
		det("initcap", 1, fnInitcap),
		det("char_length", 1, fnCharLength),
		det("character_length", 1, fnCharLength),
		det("version", 0, func([]driver.Value) (driver.Value, error) { return s.version, nil }),
		det("pg_get_serial_sequence", 2, fnSerialSequence),
		vol("setval", -1, fnSetval),
		vol("now", 0, s.fnNow),
		vol("clock_timestamp", 0, s.fnNow),
		vol("statement_timestamp", 0, s.fnNow),
		vol("transaction_timestamp", 0, s.fnNow),
		vol("random", 0, func([]driver.Value) (driver.Value, error) { return rand.Float64(), nil }),
		vol("litepg_sleep", -1, s.fnSleep),
	}
	for _, err := range regs {
		if err != nil {
			return fmt.Errorf("litepg: register SQL function: %w", err)
		}
	}
	return nil
}

// fnSerialSequence names a serial column's sequence as PostgreSQL would
// (table_column_seq). litepg has no sequences: a serial column is
// SQLite's rowid.
func fnSerialSequence(args []driver.Value) (driver.Value, error) {
	t, ok1 := textArg(args[0])
	c, ok2 := textArg(args[1])
	if !ok1 || !ok2 {
		return nil, nil
	}
	return t + "_" + c + "_seq", nil
}

// fnSetval accepts setval(sequence, value [, is_called]) and returns value
// without doing anything: a serial column is SQLite's AUTOINCREMENT rowid,
// which already continues after the highest id inserted, including ids a
// COPY gave explicitly.
func fnSetval(args []driver.Value) (driver.Value, error) {
	if len(args) < 2 || len(args) > 3 {
		return nil, fmt.Errorf("function setval takes 2 or 3 arguments")
	}
	return args[1], nil
}

// textArg renders an SQL argument as text; ok is false for NULL.
func textArg(v driver.Value) (string, bool) {
	switch x := v.(type) {
	case nil:
		return "", false
	case string:
		return x, true
	case []byte:
		return string(x), true
	case int64:
		return strconv.FormatInt(x, 10), true
	case float64:
		return string(appendFloatText(nil, x, 64)), true
	case bool:
		return strconv.FormatBool(x), true
	case time.Time:
		return x.UTC().Format(timestampLayout), true
	}
	return fmt.Sprint(v), true
}

// optTextArg renders the optional argument args[i] as text, def when
// the call has no such argument; ok is false for NULL.
func optTextArg(args []driver.Value, i int, def string) (string, bool) {
	if i >= len(args) {
		return def, true
	}
	return textArg(args[i])
}

// intArg converts an SQL argument to an integer; ok is false for NULL.
func intArg(v driver.Value) (int64, bool, error) {
	if v == nil {
		return 0, false, nil
	}
	n, err := toInt(v, oidInt8)
	return n, err == nil, err
}

func fnRepeat(args []driver.Value) (driver.Value, error) {
	s, ok := textArg(args[0])
	n, ok2, err := intArg(args[1])
	if err != nil || !ok || !ok2 {
		return nil, err
	}
	if n <= 0 || s == "" {
		return "", nil
	}
	if n > maxStringLen/int64(len(s)) {
		return nil, fmt.Errorf("requested length too large")
	}
	return strings.Repeat(s, int(n)), nil
}

func fnBool(args []driver.Value) (driver.Value, error) {
	if args[0] == nil {
		return nil, nil
	}
	b, err := toBool(args[0])
	if err != nil {
		return nil, err
	}
	if b {
		return int64(1), nil
	}
	return int64(0), nil
}

// fnBytea converts text in bytea input syntax (\x hex or escapes) to a
// blob; blobs pass unchanged.
func fnBytea(args []driver.Value) (driver.Value, error) {
	switch x := args[0].(type) {
	case nil:
		return nil, nil
	case []byte:
		return x, nil
	}
	s, _ := textArg(args[0])
	return decodeByteaText(s)
}

func fnMD5(args []driver.Value) (driver.Value, error) {
	s, ok := textArg(args[0])
	if !ok {
		return nil, nil
	}
	sum := md5.Sum([]byte(s))
	return hex.EncodeToString(sum[:]), nil
}

// runePrefix returns the first n runes of s (n < 0: all but the last -n).
func runePrefix(s string, n int64) string {
	count := int64(utf8.RuneCountInString(s))
	if n < 0 {
		n = max(count+n, 0)
	}
	if n >= count {
		return s
	}
	i := 0
	for k := int64(0); k < n; k++ {
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
	}
	return s[:i]
}

func fnLeft(args []driver.Value) (driver.Value, error) {
	s, ok := textArg(args[0])
	n, ok2, err := intArg(args[1])
	if err != nil || !ok || !ok2 {
		return nil, err
	}
	return runePrefix(s, n), nil
}

func fnRight(args []driver.Value) (driver.Value, error) {
	s, ok := textArg(args[0])
	n, ok2, err := intArg(args[1])
	if err != nil || !ok || !ok2 {
		return nil, err
	}
	count := int64(utf8.RuneCountInString(s))
	if n < 0 {
		n = max(count+n, 0)
	}
	if n >= count {
		return s, nil
	}
	skip := runePrefix(s, count-n)
	return s[len(skip):], nil
}

func fnPad(left bool) func([]driver.Value) (driver.Value, error) {
	return func(args []driver.Value) (driver.Value, error) {
		if len(args) != 2 && len(args) != 3 {
			return nil, fmt.Errorf("function takes two or three arguments")
		}
		s, ok := textArg(args[0])
		n, ok2, err := intArg(args[1])
		if err != nil || !ok || !ok2 {
			return nil, err
		}
		fill, ok := optTextArg(args, 2, " ")
		if !ok {
			return nil, nil
		}
		if n <= 0 {
			return "", nil
		}
		if n > maxStringLen/4 {
			return nil, fmt.Errorf("requested length too large")
		}
		count := int64(utf8.RuneCountInString(s))
		if count >= n || fill == "" {
			return runePrefix(s, n), nil
		}
		fr := []rune(fill)
		pad := make([]rune, 0, n-count)
		for i := int64(0); i < n-count; i++ {
			pad = append(pad, fr[i%int64(len(fr))])
		}
		if left {
			return string(pad) + s, nil
		}
		return s + string(pad), nil
	}
}

func fnStrpos(args []driver.Value) (driver.Value, error) {
	s, ok := textArg(args[0])
	sub, ok2 := textArg(args[1])
	if !ok || !ok2 {
		return nil, nil
	}
	i := strings.Index(s, sub)
	if i < 0 {
		return int64(0), nil
	}
	return int64(utf8.RuneCountInString(s[:i]) + 1), nil
}

func fnBtrim(args []driver.Value) (driver.Value, error) {
	if len(args) != 1 && len(args) != 2 {
		return nil, fmt.Errorf("function btrim takes one or two arguments")
	}
	s, ok := textArg(args[0])
	if !ok {
		return nil, nil
	}
	cut, ok := optTextArg(args, 1, " ")
	if !ok {
		return nil, nil
	}
	return strings.Trim(s, cut), nil
}

func fnChr(args []driver.Value) (driver.Value, error) {
	n, ok, err := intArg(args[0])
	if err != nil || !ok {
		return nil, err
	}
	if n <= 0 || n > utf8.MaxRune || n >= 0xD800 && n <= 0xDFFF {
		return nil, fmt.Errorf("requested character not valid: %d", n)
	}
	return string(rune(n)), nil
}

func fnASCII(args []driver.Value) (driver.Value, error) {
	s, ok := textArg(args[0])
	if !ok {
		return nil, nil
	}
	if s == "" {
		return int64(0), nil
	}
	r, _ := utf8.DecodeRuneInString(s)
	return int64(r), nil
}

func fnSplitPart(args []driver.Value) (driver.Value, error) {
	s, ok := textArg(args[0])
	d, ok2 := textArg(args[1])
	n, ok3, err := intArg(args[2])
	if err != nil || !ok || !ok2 || !ok3 {
		return nil, err
	}
	if n == 0 {
		return nil, fmt.Errorf("field position must not be zero")
	}
	var parts []string
	if d == "" {
		parts = []string{s}
	} else {
		parts = strings.Split(s, d)
	}
	if n < 0 {
		n = int64(len(parts)) + n + 1
	}
	if n < 1 || n > int64(len(parts)) {
		return "", nil
	}
	return parts[n-1], nil
}

func fnReverse(args []driver.Value) (driver.Value, error) {
	s, ok := textArg(args[0])
	if !ok {
		return nil, nil
	}
	r := []rune(s)
	for i, j := 0, len(r)-1; i < j; i, j = i+1, j-1 {
		r[i], r[j] = r[j], r[i]
	}
	return string(r), nil
}

func fnInitcap(args []driver.Value) (driver.Value, error) {
	s, ok := textArg(args[0])
	if !ok {
		return nil, nil
	}
	var b strings.Builder
	prevAlnum := false
	for _, r := range s {
		if prevAlnum {
			b.WriteRune(unicode.ToLower(r))
		} else {
			b.WriteRune(unicode.ToUpper(r))
		}
		prevAlnum = unicode.IsLetter(r) || unicode.IsDigit(r)
	}
	return b.String(), nil
}

func fnCharLength(args []driver.Value) (driver.Value, error) {
	s, ok := textArg(args[0])
	if !ok {
		return nil, nil
	}
	return int64(utf8.RuneCountInString(s)), nil
}

// fnNow returns the server clock's time as a timestamp in UTC.
func (s *Server) fnNow([]driver.Value) (driver.Value, error) {
	return s.clock.Now().UTC().Format(timestampLayout), nil
}

// fnSleep implements pg_sleep(seconds), rewritten by the translator to
// litepg_sleep(pid, seconds) so that the sleep belongs to the session
// with that process ID and ends when its statement is canceled.
func (s *Server) fnSleep(args []driver.Value) (driver.Value, error) {
	if len(args) != 2 {
		return nil, fmt.Errorf("function pg_sleep takes one argument")
	}
	pid, ok, err := intArg(args[0])
	if err != nil || !ok {
		return nil, fmt.Errorf("pg_sleep: bad session")
	}
	if args[1] == nil {
		return "", nil
	}
	secs, err := toFloat(args[1], oidFloat8)
	if err != nil {
		return nil, err
	}
	if math.IsNaN(secs) || secs <= 0 {
		return "", nil
	}
	sess := s.session(uint32(pid))
	if sess == nil {
		return nil, fmt.Errorf("pg_sleep: no such session")
	}
	d := time.Duration(math.Min(secs, 1e9) * float64(time.Second))
	if err := clock.Sleep(sess.statementContext(), s.clock, d); err != nil {
		return nil, err
	}
	return "", nil
}
