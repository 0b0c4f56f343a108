// Package wiretest holds fakes for testing the protocol packages' use of
// package wire's interfaces, the relay that stands in for the proxy in
// their tests (Relay, served by testenv.Serve) with its counting
// connection, and the benchmark of an observer on a stream. It is
// imported by tests only.
package wiretest
