package admin

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// TestMissingSessionAuditedAsAnswered: a CANCEL STATEMENT or TERMINATE
// SESSION of an id that names no session is refused to a pgx client
// with a SQLSTATE, and the audit trail, read back through the same
// console, records the command with that SQLSTATE.
func TestMissingSessionAuditedAsAnswered(t *testing.T) {
	c := startConsole(t, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn := c.connect(t)
	answered := map[string]string{}
	for _, sql := range []string{"CANCEL STATEMENT 987654", "TERMINATE SESSION 987653"} {
		_, err := conn.Exec(ctx, sql)
		var pe *pgconn.PgError
		if !errors.As(err, &pe) {
			t.Fatalf("%s: %v, want an error", sql, err)
		}
		answered[sql] = pe.Code
	}
	rows, err := conn.Query(ctx, "SELECT statement, outcome, error FROM audit")
	if err != nil {
		t.Fatal(err)
	}
	audited := map[string]string{}
	for rows.Next() {
		var st, outcome, msg string
		if err := rows.Scan(&st, &outcome, &msg); err != nil {
			t.Fatal(err)
		}
		if outcome != "error" {
			continue
		}
		code, _, _ := strings.Cut(msg, ":")
		audited[st] = code
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for st, code := range answered {
		if audited[st] != code {
			t.Errorf("%s: client got %s, audit trail has %q", st, code, audited[st])
		}
	}
}
