// Package flowsql holds the statements of the flow-control workload, the
// one the lab's flow-control experiments and the measurement programs
// that reproduce them run: bulk statements that each return 100,000 rows
// of 7,000 bytes (about 700 MB), pulled over and over by low-priority
// sessions, and a normal query that returns 1,000 rows of 1,000 bytes
// (about 1 MB), the one timed.
package flowsql

// The statements by protocol. The MySQL ones read MariaDB's seq_1_to_N
// sequence tables.
const (
	PGBulk      = `COPY (SELECT repeat('b', 7000) FROM generate_series(1, 100000)) TO STDOUT`
	PGNormal    = `SELECT repeat('n', 1000) FROM generate_series(1, 1000)`
	MySQLBulk   = `SELECT REPEAT('b', 7000) FROM seq_1_to_100000`
	MySQLNormal = `SELECT REPEAT('n', 1000) FROM seq_1_to_1000`
)
