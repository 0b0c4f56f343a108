// Package wiretest holds fakes for testing the protocol packages' use of
// package wire's interfaces, and the counting connection their test
// relays are built from (their loopback server is testenv.Serve). It is
// imported by tests only.
package wiretest
