// Package wlm is sluice's workload manager: it holds the current catalog
// (package catalog: links, exception rules, resource pools, user
// bindings and settings; kept by a Store, package store), the runtime
// links made from it, the binding of a session to a pool, class,
// link and path emulation, the admission of statements under a pool's
// active_statements (package admission), and the evaluator that applies
// exception rules to running and waiting statements. What SHOW and
// SELECT return is computed by package views from the inputs the
// Manager gathers (one catalog
// generation, the registry's sessions and statements, the time); the
// HTTP API and the dashboard derive their values with the same
// functions. The admin console and the configuration file
// change the catalog through a Manager; the proxy asks it how to treat a
// session; the evaluator watches the session registry.
//
// # Roles
//
// NewManager makes one shared core and hands it out as five roles, each a
// type of its own with only its methods; a user of the workload manager
// holds the one it needs, behind a small interface of its own defined
// where it is used:
//
//   - Service, the catalog service: Exec and ExecStatement (the console,
//     the HTTP API's SQL, the Toxiproxy API's links), ForwardUser and
//     BindUser (data-port forwarding), DefineLink and Set (the
//     configuration file), Reload, the stored revision and staleness
//     (ApplyStored, AppliedRevision, SetStale, StaleSince: a
//     store.Follower), and the audit log. Each change publishes a new
//     immutable generation (catalog, routes, runtime links) with one
//     atomic store.
//   - Runtime, the binding runtime: Bind and Version (proxy.Policy),
//     the routes (SetRoute, RemoveRoute, Routes, RoutesByLink), the
//     runtime links and the fleet's Low-class caps (Link, LinkNames,
//     SetLowPriorityCaps), the session registry, Coordinator (a shard
//     connection's distributed statement) and CancelSession /
//     TerminateSession. It reads the latest generation with one atomic
//     load.
//   - Admission: Admit and TryAdmit (wire.Admitter) and the pools'
//     counts and block times.
//   - Rules, the exception-rule evaluator: Run, Evaluate and Stats.
//   - Views: ViewTables, and Register, through which a view the manager
//     does not compute (the fleet's budget, the what-if table, and the
//     network estimates) gets its Source; SHOW, SELECT and ViewTables
//     answer it from there.
//
// The Manager itself only hands out the roles and closes the core.
//
// # Statements
//
// Service.Exec runs the console's statements (parsed by package ddl):
// CREATE / ALTER / DROP for EXCEPT RULE, RESOURCE POOL, LINK and USER (a
// user's binding to a pool; the console records no password: a PASSWORD
// clause is accepted there and dropped, see Data-port forwarding for the
// statement that reaches the database too), SET,
// SHOW, RESET and the SELECT of a few views. Option names and keywords
// are case-insensitive. Values take the units of package units (MB is
// 10^6 bytes, MiB 2^20, Mbit 10^6 bits; a rate is per second; times take
// us, ms, s); in ALTER, name=DEFAULT unsets an option. Errors carry a
// SQLSTATE and, when one token is to blame, its position: 42601 syntax,
// 42704 undefined object, 42710 duplicate object, 22023 invalid parameter
// value (naming the parameter and the value), 0A000 not supported, 2BP01
// dependent objects (DROP of a rule used by a pool or a pool used by a
// user, unless CASCADE, which detaches the rule or drops the bindings),
// 58030 when the catalog file cannot be written or etcd cannot be
// reached, 40001 when another instance changed a catalog in etcd since
// this one read it.
//
// ALTER ROUTE name WITH (option = value, ...) changes a route the
// configuration made (SetRoute): link, pool and the path emulation
// options; RESET (option, ...) or option=DEFAULT clears one. It goes
// through SetRoute's checks (42704 for an unknown route, link or pool;
// 22023 naming a bad option) and, like the console's other statements,
// is refused with 0A000 when it makes an abort rule reachable on a route
// that cannot cancel. The change is in memory only: the next SetRoute of
// the route (a configuration reload) replaces it.
//
// The option loss takes Bernoulli loss ("0.1%") or a Gilbert-Elliott
// model in tc netem's spelling, "gemodel P [R [1-H [1-K]]]" (see
// catalog.ParseLossModel); on links, routes and pools alike, loss and
// its model are one option for the link-route-pool override.
//
// # Audit trail
//
// Every change (ExecStatement of anything but SHOW and SELECT,
// ForwardUser, BindUser, DefineLink, Set) is recorded in an AuditLog (a
// ring of the last ManagerOptions.AuditSize changes, 1000 by default,
// with counters by surface and outcome that are never dropped) and
// logged at INFO, with the Actor the caller put in the context
// (WithActor: surface, user, client address), the statement with its
// password literals masked (package redact; a statement built without
// text is written out, its PASSWORD as the mask) and the outcome, the
// SQLSTATE and message of a failure. SHOW AUDIT and SELECT ... FROM
// audit show the ring. SetRoute and RemoveRoute, the configuration's
// and the Toxiproxy API's route bindings, are not recorded; ALTER ROUTE
// is. The Toxiproxy API records its own changes (package
// httpapi/toxics) in the same log, given to the Manager as
// ManagerOptions.Audit. The AuditLog has its own lock, taken with no
// other lock held (a change is recorded once Manager.mu is released).
//
// # Firing history
//
// Every exception-rule firing is recorded in a FiringLog, a ring of its
// own (the last DefaultFiringsSize, 1000), so that ordinary traffic, which
// pushes an ended statement out of the statement history
// (gs_wlm_session_history) in seconds, never pushes a firing out. An
// entry (Firing) has the time of the evaluator's pass, the rule, its
// action, the statement and session ids, user, pool and route, the
// statement's text with its password literals masked (as Begin keeps
// it), what the statement measured (bandwidth, elapsed time, block time,
// bytes), its except_info and the outcome: penalised, cancel sent,
// cancel failed with the error, and so on (the Outcome constants). The
// evaluator records a pass's firings once their actions are done (a
// cancel within CancelTimeout), in statement order, with none of its
// locks held. SHOW FIRINGS and SELECT ... FROM firings show the ring, as
// does the dashboard's "Recent rule firings" panel.
//
// NewFiringLog with a path keeps the history across restarts: each
// firing is appended as a line of JSON (file mode 0600) under the
// FiringLog's lock, a write of a few hundred bytes with no fsync; once
// the file holds twice the bound, it is rewritten with the kept entries
// (to a temporary file, synced and renamed over it), and the next
// NewFiringLog on the path reads them back. A write that fails is logged
// once at WARN and the history goes on in memory. Package stack makes
// the FiringLog, in <catalog>.firings beside a catalog file, in memory
// only with a catalog in etcd or none (or a file it cannot use, with a
// WARN), and gives it to the Manager as ManagerOptions.Firings; without
// one the Manager keeps its own in memory.
//
// # Admission
//
// A pool's active_statements (GaussDB's; -1 or DEFAULT unlimited, 0
// refused with 22023) bounds how many of its statements run at once; a
// link's max_active_statements bounds those of every session on the link,
// whatever their pool. Admission.Admit is the protocol front ends' hold
// point: it reads the session's pool (its user's binding, else its
// route's default pool) and link in the current catalog, one atomic load,
// and returns at once, allocating nothing, when neither has a limit.
// Otherwise it takes a slot of the admission.Controller, holding the
// statement (session.Statement.Hold: state waiting, block time running)
// until one frees, and marks it admitted (its elapsed time starts). The
// class of the wait is the pool's network_priority, or low for a
// penalised statement or session: high and normal waiters are admitted
// before low ones. A pool's queue_timeout (seconds; 0 or -1 none) bounds
// the wait. Statements admitted while their pool had no limit do not
// count against a limit set later; the front ends decide what one slot
// covers (a transaction keeps its slot until it ends).
//
// A failed wait is an *AdmitError, SQLSTATE 57014 (the MySQL front end
// answers 1317): "canceling statement due to user request" for
// Registry.Cancel (a client's cancel request, the console's CANCEL), for
// which no cancel request reaches the server; "canceling statement due
// to statement queue timeout" for queue_timeout; "canceling statement
// due to exception rule "r": blocked for 3s waiting for admission" for a
// blocktime abort; another message when the session's context ends or
// its statement ends first. ALTER RESOURCE POOL and ALTER LINK
// reconfigure the controller when the new catalog is swapped in: a higher
// limit admits waiters at once, a lower one lets running statements
// finish.
//
// A slot taken is recorded on the session (session.Session.TakeSlot,
// dropped by the release), and the front ends' gate records when the
// session sits idle inside a transaction (session.Slot.IdleSince): SHOW
// SESSIONS and SHOW POOLS show who holds a slot while idle, and for how
// long. A pool's idle_in_transaction (seconds; 0 or -1 none) bounds that
// time: the evaluator's pass (woken when the next bound falls due) ends
// such a session (session.Session.TerminateIdle: PostgreSQL FATAL 25P03,
// MySQL ERR 1927, the server connection closed, the slot freed), logs it
// at WARN, counts it (Stats.IdleInTransactionEnded) and records it in the
// audit log under surface wlm as "TERMINATE SESSION id: idle in
// transaction ...".
//
// # Exception rules
//
// A rule has three measurable thresholds, at least one set: bandwidth,
// in MB/s (a bare number; a value with a unit such as '100Mbit' is
// converted), elapsedtime, in seconds of execution (from admission), and
// blocktime, in seconds held waiting for admission. -1 means unlimited:
// the threshold does not apply (blocktime 0 is refused). Thresholds
// inside one rule combine with AND: the rule fires when the statement's
// bandwidth exceeds bandwidth and it has run at least elapsedtime.
// blocktime applies while a statement waits, the other two while it runs,
// so a rule with blocktime sets neither (22023); GaussDB's AND of them
// could never hold for one statement at one time. The rules of one pool
// combine with OR: any one firing acts. GaussDB's other thresholds
// (cputime, allcputime, cpuskewpercent, spillsize, broadcastsize,
// memsize, cpuavgpercent) need the database's executor; a proxy sees
// only bytes and time, so they are rejected with 0A000 unless set to -1.
//
// A statement's bandwidth is its bytes in both directions over the last
// BandwidthWindow (5 s), interpolated between the evaluator's samples
// (taken every SampleInterval, 1 s), or averaged since it started when it
// is younger than that. A statement younger than MinBandwidthAge (1 s)
// has no bandwidth yet, so a bandwidth threshold is not reached.
//
// Timing: a rule is first checked for a statement the moment the
// statement has run elapsedtime (one except_check_period after it was
// admitted when elapsedtime is -1), or, for a blocktime rule, has waited
// blocktime, then every except_check_period (default 5 s) after the
// previous check. The evaluator wakes up at that exact moment
// if it comes before its next sample. Each rule fires at most once per
// statement.
//
// A distributed statement (a coordinator's statement whose shard
// connections pass through this instance, linked by
// distributed_application_name; see package session) is measured on
// its total: its own bytes plus every shard statement's under it
// (session.Statement.TotalBytes), so its bandwidth is the whole
// query's. Its rules are its own pool's; a penalty of it fires once,
// like any rule, and demotes every flow that works for it (the shard
// sessions read Session.Penalized through their link); an abort cancels
// it at the coordinator, and PostgreSQL then cancels the remote queries
// itself. The shard statements are statements of their own sessions
// too: their own pool's rules apply to them, on their own bytes.
//
// Actions: penalty moves the statement to the Low class until it ends
// (session.Statement.Penalize; the proxy reads Session.Penalized per
// chunk), so its bytes go only when no normal or high bytes wait, within
// low_priority_bandwidth. abort (the default) cancels the statement
// through its protocol (session.Registry.Cancel: a PostgreSQL
// CancelRequest or MySQL KILL QUERY), so the client gets the server's own
// error and keeps its session. A blocktime rule acts on the wait
// instead: penalty admits the statement as low class (its waiter moves
// behind the normal and high ones, and it runs penalised), abort ends its
// wait with the *AdmitError naming the rule, with no cancel request (the
// server never saw the statement). When an abort and a penalty fire in
// the same pass, only the abort applies. Every firing is logged, counted
// (Rules.Stats, by rule and action) and appended to the statement's
// except_info; a failed cancel is counted and noted too.
//
// Because abort needs a way to cancel, a statement that would make an
// abort rule reachable while a route cannot cancel (a MySQL route without
// KILL credentials, a tcp route) is refused with 0A000. Reachable is
// decided simply: the rule is attached to a pool that a user is bound to
// or that is a route's default pool, and any route has CanCancel false
// (users are not tied to routes). A blocktime rule's abort needs no
// cancel request, so it is never refused. Only statements that create
// such a situation are refused; one created by SetRoute is logged.
//
// # Bindings
//
// Runtime.Bind(route, user) returns the user's pool (or the route's
// default pool), the pool's network_priority as the link class, the
// route's runtime link, and the path emulation of each direction: the
// link's options, overridden by the route's, overridden by the pool's,
// each option only where set. Runtime.Version increases whenever a
// binding may have changed (any catalog change, SetRoute); a live session
// compares it on each chunk, one atomic load, and re-binds when it moved.
// Runtime links are reconfigured in place: SET low_priority_bandwidth
// reconfigures every link, ALTER LINK that link, and pool weights reach
// every link. SetLowPriorityCaps (the fleet's shared budget) caps each
// link's Low class in memory: it runs at min(low_priority_bandwidth,
// cap), and the caps outlast catalog changes. SHOW BUDGET shows what
// SetBudgetView's source says, no rows without a fleet. SHOW WHATIF
// [RTT 'list'] and the whatif view show SetWhatIf's source (the stack's
// whatif.Table) with predictions at those RTTs (1, 5, 10 and 50 ms
// without RTT); no rows without one. A bad RTT list is 22023.
//
// # Data-port forwarding
//
// Service.ForwardUser serves `CREATE USER u RESOURCE POOL 'p' PASSWORD
// 'x'` sent on a data route (by the users the configuration names): it
// splits the statement with ddl.SplitUserPool, makes the binding with
// BindUser and returns the rest (`CREATE USER u PASSWORD 'x'`, or
// `IDENTIFIED BY 'x'` for MySQL) for the protocol front end to send to
// the database. BindUser creates or replaces the binding whatever the
// verb, because the database decides whether the user exists; an
// unknown pool is the console's 42704. The binding is made before the
// database runs the rest and stays if the database refuses it.
//
// # Atomicity and persistence
//
// The catalog a Manager holds is immutable. A statement applies to a deep
// copy (package catalog), which is validated (references, ranges, the
// abort check) and saved to the Store, conditioned on the revision last
// loaded or saved, before it replaces the current one with one atomic
// pointer swap; when the store reports that another writer came first,
// the Manager loads what it stored and runs the statement again on it
// (with a file; a shared store's conflict is 40001, see below): a statement takes effect entirely or
// not at all, on disk and in memory alike, and readers never see a half
// change. Statements are serialised by one mutex. The file is JSON,
// replaced atomically (a temporary file in the same directory, fsync,
// rename, fsync of the directory), so a crash leaves the old or the new
// catalog. At start the file is loaded and validated; a file that cannot
// be decoded or is inconsistent is an error naming the file (and the line
// and column for malformed JSON, or for a key an object names twice,
// which encoding/json would accept with the last value winning), and
// nothing is loaded. A missing file
// is created with the default catalog; no file at all keeps the catalog
// in memory.
//
// # A catalog shared through etcd
//
// With store.Etcd the catalog is shared by every instance of a fleet.
// Every surface that changes it (console, HTTP API, data-port
// forwarding, the configuration's links and settings at start and on
// reload) goes through change and so through one conditioned etcd
// transaction. A statement decided on a revision another instance has
// replaced fails with 40001 ("could not serialize access: the catalog
// changed since it was read; retry"), after the Manager loaded the
// stored catalog, so the client's retry runs on it: two concurrent ALTERs
// give one success and one 40001, never a lost update. The
// configuration's DefineLink and Set still rerun after a conflict: they
// declare what the catalog must hold. (The file and memory stores keep
// rerunning every statement: their only writer is this process.)
//
// Other instances' changes arrive through store.Etcd.Follow, which calls
// ApplyStored: the same swap as a local change (links reconfigured in
// place, live sessions re-bind at their next chunk without
// reconnecting), in revision order, a revision at most once, each logged
// ("catalog change applied"). AppliedRevision is the etcd revision of the
// catalog in force (the file store's count of saves otherwise);
// StaleSince is when etcd stopped answering (zero while it answers and
// for a file). While it is set, traffic goes on with the catalog in
// force and every change is refused at once with 58030 ("etcd cannot be
// reached: the catalog is read-only until it is back"); a save that
// fails for want of etcd is the same error. A change is never applied
// here unless etcd committed it.
//
// The link "default" always exists (unlimited, no emulation) and cannot
// be dropped. Settings: low_priority_bandwidth (default 256MB, i.e.
// 256·10^6 bytes/s; 0 unlimited), cluster_low_priority_bandwidth (0 off;
// a fleet's budget for every instance's Low class together, see
// internal/fleet/budget), low_priority_queue_bytes (64KiB; -1 off),
// low_priority_yield (10%: the Low class's share of a link while Normal
// or High bytes are on it; 100% off), network_control (on), except_check_period (5s),
// distributed_application_name ('fdw %p'; see below).
//
// distributed_application_name is the application_name pattern by which
// a shard connection names its coordinator backend (package distname:
// %p the pid, %c postgres_fdw's session id, %g a Citus global pid; the
// empty pattern turns linking off). It is a catalog setting like the
// others rather than a route's configuration key, because it describes
// the database cluster, not one route: one SET reaches every route
// (a coordinator's session may be on any of them) and, with etcd, every
// instance of a fleet; the configuration file sets it under settings:,
// the catalog file keeps it. Runtime.Coordinator is the protocol front
// end's lookup: the pattern, parsed once per value, then the registry's
// backend pid index.
//
// # Evaluator
//
// One pass (Evaluate) samples every running statement and checks the
// rules that are due under the evaluator's lock, then applies the
// firings without it: penalties at once, in statement order, and the
// cancel requests of aborts concurrently, at most MaxConcurrentCancels
// at a time, each bounded by CancelTimeout on the manager's clock. A pass
// with many aborts against an unresponsive server so takes about one
// CancelTimeout, not one per statement. The pass returns once every
// cancel request has ended.
//
// # Lock order
//
// Lock order: Manager.mu before a runtime link's lock (a change
// reconfigures links under it). The evaluator (its own type, made by the
// Manager, reading the current catalog through a func it is given) has
// its own lock, evaluator.mu, taken before session.Session.mu and
// session.Statement.mu (a pass reads sessions and statements under it);
// the registry's lock is never taken under evaluator.mu (Registry.Active
// is read before it). Manager.mu and evaluator.mu are never held
// together, and no lock is held across a cancel request. Manager.mu,
// which serialises changes, is held across the store's Save (for etcd,
// up to its 5 s timeout) and taken by ApplyStored; AppliedRevision and
// StaleSince are atomic loads, taken under no lock.
//
// The admission controller's lock (admission.Controller.mu) is a leaf:
// taken under Manager.mu when a change reconfigures it, and alone
// otherwise (Admit, a release, a waiter's Cancel or Demote). Manager.mu
// is never held while a statement waits: Admit reads the catalog with
// one atomic load and blocks in the controller with no lock held. The
// evaluator cancels or demotes a held statement after releasing
// evaluator.mu, through session.Statement (whose mu is released before
// the controller's is taken). The block-time histograms have their own
// leaf lock.
//
// core.srcMu, which serialises Views.Register, is a leaf; readers load
// the registered Sources with one atomic load and call a Source with no
// lock of the manager's held (a Source must not call back into it).
// In this section Manager.mu is the core's mu, which every role shares.
//
// A Manager and each of its roles are safe for concurrent use.
package wlm
