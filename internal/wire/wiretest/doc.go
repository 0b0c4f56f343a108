// Package wiretest holds fakes for testing the protocol packages' use of
// package wire's interfaces, the counting connection their test relays
// are built from (their loopback server is testenv.Serve), and the
// benchmark of an observer on a stream. It is imported by tests only.
package wiretest
