// Package views computes what sluice shows of its workload: the admin
// console's SHOW SESSIONS, STATEMENTS, POOLS, RULES, LINKS, USERS,
// ROUTES, AUDIT, FIRINGS (the exception rules' firing history, from the
// entries the caller keeps), BUDGET (a fleet's shared low-priority budget, from a
// BudgetState the caller gathers), WHATIF (round trips per application
// and predictions at added RTTs, from the whatif.Apps the caller
// gathers) and ALL, the GaussDB-named views its SELECT reads
// (pg_session_wlmstat, gs_wlm_session_statistics,
// gs_wlm_session_history, pg_resource_pool, gs_respool_exception_info,
// pg_total_user_resource_info; Names lists every view SQL can read) and
// the projection of a small SELECT over them, and
// the few derived values the HTTP API and the dashboard show beside them
// (a statement's class and the fields naming it, the routes of each link,
// sessions counted by pool or user).
//
// Every function is pure: it reads the catalog generation, the sessions
// and statements, and the time it is given, and keeps nothing. The
// caller (wlm.Manager) gathers those inputs; the evaluator's bandwidth of
// a running statement arrives as a number in a Statement. Values are
// text as the console prints them: times in seconds with three
// decimals, bandwidth in MB/s (10^6 bytes) with two (columns named
// *_mbps), durations of the GaussDB views in milliseconds. Each column
// has an SQL type (Table.Types: INTEGER, REAL or TEXT) for package
// viewsql; an empty INTEGER or REAL value is NULL there. GaussDB's
// columns that sluice has no value for are present and empty (NULL when
// numeric).
//
// A statement held for admission (session.Statement.Hold) has state or
// status "waiting" and its block time (block_time: seconds in SHOW
// STATEMENTS, milliseconds in gs_wlm_session_statistics); its elapsed
// time (elapsed, duration) is execution time, from admission, 0 while it
// waits. Slot limits are written -1 when unlimited, as GaussDB writes
// active_statements. SHOW SESSIONS ends with each session's state
// (SessionState: "idle in transaction" for a session under admission
// idle inside a transaction), the pool whose slot it holds and how long
// it has sat idle in a transaction holding it (NULL otherwise); SHOW
// POOLS ends with the pool's idle_in_transaction and the count of such
// sessions (idle_holders).
//
// A distributed statement (a coordinator's, with shard statements of
// linked sessions on other routes; see package session) shows its own
// bytes where any statement does and, appended at the end of SHOW
// STATEMENTS' and the gs_wlm views' columns, its parent (a shard
// statement's coordinator statement), its totals (own plus shards') and
// its bytes per node (Nodes); SHOW SESSIONS ends with the coordinator
// of a shard session.
//
// The package holds no state and takes no locks of its own; reading a
// session or a statement takes that object's lock (session.Session.mu,
// session.Statement.mu), one at a time.
package views
