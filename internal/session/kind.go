package session

import "github.com/sluicelab/sluice/internal/enum"

// Kind is what a session is for: an ordinary client, or traffic between
// database nodes that a front end recognised at its opening exchange (a
// PostgreSQL startup with replication=..., a MySQL replica's binlog
// dump). The zero value is KindClient.
type Kind uint8

const (
	// KindClient is an ordinary client session.
	KindClient Kind = iota
	// KindReplication is a physical replication stream (PostgreSQL
	// replication=true running START_REPLICATION; a MySQL/MariaDB
	// replica's COM_BINLOG_DUMP or COM_BINLOG_DUMP_GTID).
	KindReplication
	// KindBaseBackup is a PostgreSQL replication connection running
	// BASE_BACKUP (pg_basebackup).
	KindBaseBackup
	// KindLogical is a PostgreSQL logical replication connection
	// (replication=database).
	KindLogical
)

var kindNames = []string{KindClient: "client", KindReplication: "replication", KindBaseBackup: "basebackup", KindLogical: "logical"}

// String is the kind's name as SHOW SESSIONS and the metrics show it.
func (k Kind) String() string { return enum.Name(kindNames, int(k), "kind") }

// SetKind records what the session is for; a front end may refine it
// as the session goes (a replication connection that runs BASE_BACKUP).
func (s *Session) SetKind(k Kind) { s.kind.Store(uint32(k)) }

// Kind returns what the session is for, KindClient unless SetKind said
// otherwise. It is one atomic load.
func (s *Session) Kind() Kind { return Kind(s.kind.Load()) }
