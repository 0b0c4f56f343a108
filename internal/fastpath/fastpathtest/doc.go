// Package fastpathtest is for tests that need the kernel fast path
// (package fastpath): Open loads it for one test, or fails or skips the
// test as testenv.Missing does for a missing database. It holds no
// state; each Kernel it returns is the test's and closed with it.
package fastpathtest
