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
// assumes it is the file's only writer. Memory keeps nothing. A store
// for a fleet (etcd: one transaction per change, conditioned on the
// revision read; the revision is the catalog version; a watch calls
// Manager.Reload when another instance changes the catalog) fits the
// same two methods.
//
// Unmarshal never panics on any input. File and Memory are safe for
// concurrent use; each has one mutex and takes no other lock.
package store
