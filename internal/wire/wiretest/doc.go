// Package wiretest holds fakes for testing the protocol packages'
// use of package wire's interfaces, and the loopback server and counting
// connection their test relays are built from. It is imported by tests
// only.
package wiretest
