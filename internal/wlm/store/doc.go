// Package store keeps the workload manager's catalog: its encoding
// (Marshal, Unmarshal: JSON, format "sluice-catalog/1", refusing a key
// named twice in one object with its line and column) and the stores
// that hold it behind wlm.Store.
//
// A store hands out a Revision with what it loads and saves; Save is
// conditioned on the revision the caller last saw and fails with
// ErrConflict when another writer came first. File is the default: one
// JSON file replaced atomically (temporary file, fsync, rename, fsync of
// the directory), so a crash leaves the old or the new catalog; it
// assumes it is the file's only writer. Memory keeps nothing.
//
// # The catalog in etcd
//
// Etcd is the store of a fleet: the catalog is one key (<prefix>/catalog)
// whose value is Marshal's JSON and whose ModRevision is the catalog's
// version. Save is one transaction, If(ModRevision(key) == expected)
// Then(Put) Else(Get): two instances that read one revision cannot both
// write, and the winner's revision is the etcd revision of its put.
// Through a leader election (a stopped leader) the transaction is sent
// again, each attempt bounded by 1 s, the whole by OpTimeout (5 s); an
// attempt that was committed after all shows up as the key holding these
// very bytes, which is the same success. Past the timeout Save fails
// with ErrUnavailable; a refused credential or permission is returned as
// such at once.
//
// Follow keeps a Follower (the wlm.Manager) in step: a watch of the key
// from the follower's applied revision + 1 delivers every other
// instance's change in revision order, and Follower.ApplyStored skips a
// revision it already has (its own save, or what a conflict's reload
// got), so each change is applied once. A broken watch (no leader, a
// lost member, a restart of the cluster) is opened again from the
// applied revision, so nothing committed meanwhile is missed; when that
// revision was compacted away, the whole key is loaded instead. A health
// check reads the key linearizably every second (1 s timeout, refused at
// once without a leader); after 3 s of failed checks the follower is
// stale (SetStale, from the first failure), which makes the Manager
// refuse changes: a lost quorum is noticed within 5 s, and a leader
// election (1 to 2.5 s) passes without it.
//
// While etcd is down the follower keeps the catalog it has, nothing is
// applied that etcd did not commit, and nothing here retries a change
// in the background: a change either committed (and every instance
// applies it from the watch) or failed for its caller.
//
// Unmarshal never panics on any input. File and Memory are safe for
// concurrent use; each has one mutex and takes no other lock. Etcd holds
// no lock of its own; Follow calls the follower from its goroutines with
// no lock held.
package store
