// Package session is the registry of live client sessions and their
// statements: who is talking (route, user, database, pool), which
// statement each byte belongs to, how many bytes went each way, and how
// to cancel a running statement.
//
// The wire observers (internal/wire/...) write to it: they open a
// Statement when a client sends one and end it when the server has
// answered, adding bytes to it as they pass. The workload manager reads
// it to evaluate exception rules and penalise or cancel statements; the
// admin console and HTTP API read it to show sessions and statements.
//
// Invariants:
//   - Byte counters are atomics and may be read at any time; every other
//     field of a Session or Statement is guarded by that object's mu.
//   - A Statement ends once. Ending it again is a no-op, so a cancel
//     racing with normal completion records one outcome: the first.
//   - Session.Penalized is true while at least one of the session's
//     running statements is penalised, or, for a shard session, one of
//     its coordinator's; the proxy reads it per chunk to choose the link
//     class, so it is a single atomic load (one more per coordinator up
//     the chain for a linked session).
//   - Watchers are called synchronously, outside the registry lock, in
//     the goroutine that caused the event; they must not block.
//   - The registry keeps every open session and a bounded ring of
//     recently ended statements (Options.KeepStatements).
//   - A statement's SQL text never holds a password: Begin hides the
//     password literals (package redact) before anything can read it.
//   - A statement may be held before it runs: Hold marks it waiting for
//     admission (the proxy keeps its bytes until then), Admit ends the
//     wait. Its block time runs from Hold to Admit; its execution, and
//     so its elapsed time, starts at Admit (at Begin when never held),
//     as GaussDB separates block time (queued) from elapsed time
//     (executing). A held statement has a Wait, the admission
//     controller's handle: CancelWait and Registry.Cancel end the wait
//     (no cancel request reaches the server, which never saw the
//     statement), Penalize demotes it, End leaves the queue.
//   - A session's Slot is what it holds of its pool's active_statements
//     (TakeSlot, DropSlot with TakeSlot's token, so a late drop never
//     clears a newer slot) and since when it has sat idle inside a
//     transaction (SetIdleInTransaction, LeaveIdle). TerminateIdle ends
//     a session only while it is still idle since the time its caller
//     saw, checked and claimed under mu, so a request begun meanwhile
//     either keeps the session or (LeaveIdle false) never goes upstream.
//
// # Distributed statements
//
// A coordinator PostgreSQL that reaches its shards through sluice
// (postgres_fdw, Citus) opens one connection per shard, whose
// application_name names the coordinator backend's process id. The
// front end finds that backend's session with Registry.ByBackendPID (the
// pid of the cancel key SetCancelKey registered; a pid that several open
// sessions share, on different servers, finds none) and links the shard
// session to it once, before it relays anything (Session.Link; never a
// cycle). The link is session to session: postgres_fdw keeps a shard
// connection open across the coordinator's statements. Watchers get a
// SessionLinked event, and both sessions report Distributed from then
// on: their bytes must be observed before they are relayed (the kernel
// fast path leaves them to user space).
//
// A shard session's statement belongs to the statement its coordinator
// is executing when it begins (Session.Executing: the oldest running
// statement not held for admission), which is its Parent. One begun
// while the coordinator executes nothing belongs to the coordinator's
// statement that ended last after reaching the server: the coordinator's
// backend goes on talking to its shards after sluice has seen its answer
// end or its client go (the ABORT of a cancelled join's remote
// transaction, a FETCH sent ahead and drained, a remote COMMIT after an
// extended-protocol Execute has ended), and every statement reaches
// sluice before the backend, so that work can be for no later one. Only
// a shard statement begun before the coordinator ran anything has no
// Parent. The choice is made
// once, at Begin, so every byte of a shard statement (a remote FETCH)
// counts for one coordinator statement, whatever comes later. The bytes
// of a shard statement count in its own counters and in a per-route
// counter (a node) of the top of its Parent chain, the distributed
// statement: TotalBytes, Snapshot.Nodes, TotalUp and TotalDown are its
// own plus every level's below it. A penalty of the distributed
// statement (Penalize) demotes its session and, through
// Session.Penalized, every session linked to it, while it runs; the
// shard statements keep their own penalised flag.
//
// Session.coord and Statement.Parent are set once, before the value is
// shared (Link's compare-and-swap, Begin), and read without a lock. A
// root statement's node list is guarded by its mu; the node counters
// are atomics.
//
// # Lock order
//
// Lock order: Registry.mu before Session.mu (SetCancelKey holds both;
// Registry.byPID is guarded by Registry.mu). No method holds two
// Sessions' locks at once: a shard statement's Begin reads its
// coordinator's statements (the coordinator's mu, then each statement's
// mu, one at a time) and then takes the root statement's mu to find its
// node, before it takes its own session's mu.
// Statement.mu is a leaf: it is never held while another lock is taken,
// nor while a Wait's methods run (they take the admission controller's
// lock).
// Callers outside the package may hold their own lock while calling a
// Session's or Statement's methods (the workload manager's evaluator
// does: its lock before Session.mu), but no method here calls out while
// holding a lock, and watchers run with no lock held.
package session
