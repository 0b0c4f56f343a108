package wiretest

import (
	"context"
	"errors"
	"strings"

	"github.com/sluicelab/sluice/internal/sqlstate"
	"github.com/sluicelab/sluice/internal/wire"
)

// Forwarder is a wire.Forwarder for tests. It names the user "admin"
// only, and takes statements that begin with "CREATE USER":
//
//   - RESOURCE POOL 'p': it drops that clause and returns the rest;
//   - RESOURCE POOL 'nope': it refuses with 42704, as for an unknown pool;
//   - RESOURCE POOL 'bad': it fails with Failure, an error that carries
//     no SQLSTATE.
//
// Every statement shown to it is appended to Seen. Not safe for
// concurrent use.
type Forwarder struct {
	Failure string // message of the 'bad' pool's error
	Seen    []string
}

var _ wire.Forwarder = (*Forwarder)(nil)

// Forwards reports whether user is "admin".
func (f *Forwarder) Forwards(user string) bool { return user == "admin" }

// Forward implements wire.Forwarder as described on Forwarder.
func (f *Forwarder) Forward(ctx context.Context, sql string) (string, bool, error) {
	f.Seen = append(f.Seen, sql)
	if !strings.HasPrefix(sql, "CREATE USER") {
		return sql, false, nil
	}
	if strings.Contains(sql, " RESOURCE POOL 'nope'") {
		return "", true, &wire.Refusal{Code: sqlstate.UndefinedObject, Message: `resource pool "nope" does not exist`}
	}
	if strings.Contains(sql, " RESOURCE POOL 'bad'") {
		return "", true, errors.New(f.Failure)
	}
	rest := strings.Replace(sql, " RESOURCE POOL 'p'", "", 1)
	return rest, rest != sql, nil
}
