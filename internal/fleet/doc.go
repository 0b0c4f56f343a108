// Package fleet is what one sluice knows of the others that share its
// catalog in etcd: its membership under a lease, the live members, the
// cluster-wide views gathered over the members' HTTP APIs, and the
// session commands forwarded to the instance that holds the session.
//
// # Membership
//
// Join registers the instance as <prefix>/instances/<name> (Member, as
// JSON: name, version, the admin console's and the HTTP API's
// addresses, the routes, the catalog revision it applies, since when
// its catalog store is unreachable, when it started, and an incarnation
// that is random per run) under a lease of Options.TTL (10 s by
// default), in one transaction that succeeds only while the key does
// not exist (CreateRevision == 0): a second instance of a name that a
// live instance holds is refused with a *NameTakenError naming the
// holder. Run then
//
//   - keeps the lease alive (the client's keep-alive);
//   - compares, every Refresh (1 s), the record with what Self returns
//     now (a new catalog revision, a route added on reload, the catalog
//     gone stale) and puts it again, only while the key is still under
//     its lease;
//   - watches <prefix>/instances/ from a listing, so Members always holds
//     the live members: a record whose lease expires is deleted by etcd
//     and vanishes from every watcher;
//   - registers again when the lease is lost: the keep-alive ends once
//     etcd has not answered for longer than the TTL. The next
//     registration takes over a record of its own incarnation left under
//     the old lease (after a restart etcd extends the old lease anew) and
//     refuses, retrying every second and logging an error, one of another
//     incarnation (another instance took the name meanwhile);
//   - revokes the lease when its context ends, so the others see the
//     instance leave at once rather than after the TTL.
//
// While etcd is unreachable the last listing stays (Members answers what
// it last read, with the time of that reading as LastSeen), the instance
// keeps serving, and the lease may expire on the server: the others then
// lose the record until the instance registers again. Lease is 0
// meanwhile; keys that other loops put under the lease (the shared
// budget's demand) vanish with it and must be put again under the new
// one.
//
// # Cluster-wide views
//
// The console answers SHOW CLUSTER list (SESSIONS, STATEMENTS, and every
// other list but ALL) and, in SQL, cluster_<view> for every view and
// GaussDB's pgxc_session_wlmstat, pgxc_wlm_session_statistics,
// pgxc_wlm_session_history and pgxc_total_user_resource_info, rather
// than a scope setting that would change what SHOW SESSIONS means: a
// statement says by itself whether it reads one instance or the fleet,
// the local views stay as cheap and as consistent as they were (one
// reading), and GaussDB's own names for its cluster views (pgxc_) keep
// their meaning. Every row of a cluster view begins with the column
// instance; session and statement ids are unique per instance only, so
// a row is identified by (instance, id).
//
// Cluster.Tables computes this instance's tables and asks every other
// live member concurrently for its own (GET /api/views?name=... of the
// HTTP API, with the fleet's bearer token and the InstanceHeader), each
// bounded by the timeout (2 s by default). Merge joins them, rows by
// instance name, columns matched by name so that instances of two
// versions can be merged. An instance that does not answer in time, or
// answers with an error, is not a failure: its rows are missing and
// Notices names it (a NoticeResponse on the console, the notices field
// of GET /api/cluster/views).
//
// The token goes to the HTTP addresses the members registered: whoever
// may write the prefix in etcd is trusted with it, as with the catalog.
//
// Cluster.Forward sends CANCEL STATEMENT or TERMINATE SESSION to the
// instance that holds the session (POST /api/sessions/{id}/cancel or
// /terminate), which runs it through its workload manager and records it
// in its audit trail as surface http, user instance:<sender>.
//
// # Concurrency
//
// A Membership's methods are safe for concurrent use. Its lock (mu)
// guards the lease, the record last put and the members; it is never
// held across a call to etcd or to Self. A Cluster keeps no state but
// its options and the membership (an atomic pointer, set once the
// instance has joined) and is safe for concurrent use. Neither package
// type holds a lock of another package.
package fleet
