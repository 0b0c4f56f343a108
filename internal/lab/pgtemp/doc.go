// Package pgtemp runs a throwaway PostgreSQL server from the installed
// server binaries, for `sluice lab --backend postgres`.
//
// Start creates a private temporary directory, runs initdb into it,
// starts postgres listening only on a free loopback port (reserved with
// package loopport until the server listens, so servers started at once
// never share one) and on a Unix socket inside that directory, and waits
// until it accepts connections.
// The superuser is "postgres" with a random password given to initdb
// through a file; TCP connections authenticate with scram-sha-256. The
// server runs without fsync and with synchronous_commit off: its data is
// disposable. With Options.CertPEM and KeyPEM it also accepts TLS;
// Options.Settings adds server settings (wal_level=logical). initdb's
// defaults make it a replication primary as it is (wal_level=replica,
// max_wal_senders=10, pg_hba replication lines for loopback). Close
// stops it (fast shutdown, then SIGQUIT and SIGKILL if it lingers) and
// removes the directory; nothing outlives Close. Options.Start starts
// the server process another way (inside a network namespace); the
// readiness check, and SocketURL, use the Unix socket, which reaches
// the server from any namespace.
//
// PostgreSQL refuses to run as root. When the process is root, initdb and
// postgres run as the "postgres" system user (Options.User), as
// `runuser -u postgres` would run them, and the directory is handed to
// that user.
//
// The binaries are looked up in Options.BinDir, then in PATH, then in
// /usr/lib/postgresql/*/bin (newest version first). When none is found
// Start returns an error wrapping ErrNotInstalled that says what to
// install.
package pgtemp
