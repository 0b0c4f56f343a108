// Package catalog is the workload manager's configuration as data: the
// types (links, exception rules, resource pools, user bindings,
// settings), their validation, and the execution of the console's
// changing statements (CREATE, ALTER, DROP, SET, RESET of package ddl)
// on a catalog.
//
// Everything here is pure: no I/O, no clock, no locks. A change is a
// function applied to a Clone; on error the clone is thrown away, so a
// statement takes effect entirely or not at all. ErrUnchanged says the
// statement had nothing to do. Errors are *ddl.Error at the position of
// the token (or built AST node) to blame: 42704 undefined object, 42710
// duplicate object, 22023 invalid parameter value (naming the parameter
// and the value), 0A000 not supported, 2BP01 dependent objects.
//
// Invariants, kept by every statement and checked by Validate: the link
// DefaultLink exists; every rule a pool lists and every pool a user is
// bound to exists; weights are in [1, link.MaxWeight]; every emulation
// makes valid netem parameters; slot limits (a pool's active_statements,
// a link's max_active_statements) are in [0, MaxActiveStatements], 0
// unlimited; a rule has a threshold, and one with blocktime has no other.
//
// Zero values mean "unset" wherever a field was added after the catalog
// file's format was fixed (ActiveStatements, QueueTimeout, IdleInTransaction,
// MaxActiveStatements, BlockTime), so a file written before them loads
// with no limit; the console spells those unset values -1, as GaussDB
// does.
//
// Package catalog knows nothing of where a catalog is kept (package
// store) nor of the runtime links, routes and sessions (package wlm).
package catalog
