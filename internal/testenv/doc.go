// Package testenv finds the real servers and client programs that
// integration tests use, and decides what happens when one is missing.
//
// The servers are the ones scripts/testdb starts; their addresses come from
// SLUICE_TEST_PG, SLUICE_TEST_MYSQL and SLUICE_TEST_ETCD (eval "$(scripts/testdb
// env)"), with the script's defaults when unset. The etcd cluster (three
// members) is shared: each test keeps its keys under EtcdPrefix, deleted
// when it ends. A test that stops and restarts members starts a cluster
// of its own (StartEtcdCluster). When a dependency is missing a test
// fails if CI=true and is skipped otherwise, so a developer without the
// servers can still run the unit tests while CI can never go green by
// skipping.
//
// StartTLSPostgres starts a PostgreSQL of one test's own with TLS on
// (package pgtemp: initdb into a temporary directory, a free loopback
// port, a fresh self-signed certificate), for tests that need what the
// shared server does not offer; it is stopped when the test ends.
//
// StartMariaDB starts a private MariaDB server in the same way
// (mariadb-install-db into a temporary directory, mariadbd on a free
// loopback port, as the system user mysql when root, an account with a
// random password), with extra server options such as --log-bin and
// --server-id, for tests that stop, restart or replicate servers; the
// shared MariaDB is never touched. It is shut down when the test ends.
//
// ConnectPG (from a URL) and ConnectPGConfig (from a parsed
// configuration) open a pgx connection that closes when the test ends;
// DialEtcd an etcd client (package etcd) that does likewise;
// PostgresConfig and MySQLConfig parse the servers' addresses;
// PostgresSocket finds a server's Unix socket; ServerSSL reads
// pg_stat_ssl to tell whether a connection reached the server over TLS.
//
// It also holds what tests of several packages share: SkipShort (leave a
// long test out of go test -short), Eventually (poll a
// condition until a deadline, for waits on real sockets and servers, in
// place of sleeps; Poll, the same for code that cannot fail a test;
// WaitBlocked, until goroutines in a named function are blocked), the
// loopback servers that stand in for an upstream
// or a peer (ServeOnce, Serve, Echo; DeadAddr, an address that refuses
// dials), Buffer (a log sink safe for concurrent writers),
// Logger (a test logger, verbose with -v), SVGNode (an SVG read back,
// for the charts' tests), and ReadDoc and CheckDocumented (a reference
// under doc/ and the names it must write as code).
package testenv
