// Package etcd is how sluice reaches its coordination service: it parses
// the catalog address `etcd://host1:2379,host2:2379/prefix` into a
// Config and dials a client of the etcd project's own Go client
// (go.etcd.io/etcd/client/v3), with TLS and user/password when the
// configuration sets them.
//
// The packages of the fleet (the catalog store, membership, the shared
// low-priority budget) share one client and one key prefix; each owns a
// part of the key space under the prefix (Key names them), so no two
// write the same key.
//
// Config is a value, safe to copy. Dial's client is safe for concurrent
// use and must be closed by the caller. The package holds no state and
// takes no lock.
package etcd
