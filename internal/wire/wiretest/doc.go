// Package wiretest holds fakes for testing the protocol packages'
// use of package wire's interfaces. It is imported by tests only.
package wiretest
