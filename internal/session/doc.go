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
//     running statements is penalised; the proxy reads it per chunk to
//     choose the link class, so it is a single atomic load.
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
//
// # Lock order
//
// Lock order: Registry.mu before Session.mu (SetCancelKey holds both).
// Statement.mu is a leaf: it is never held while another lock is taken,
// nor while a Wait's methods run (they take the admission controller's
// lock).
// Callers outside the package may hold their own lock while calling a
// Session's or Statement's methods (the workload manager's evaluator
// does: its lock before Session.mu), but no method here calls out while
// holding a lock, and watchers run with no lock held.
package session
