package pg

import (
	"context"
	"testing"

	"github.com/sluicelab/sluice/internal/session"
	"github.com/sluicelab/sluice/internal/wire"
	"github.com/sluicelab/sluice/internal/wire/wiretest"
)

func TestStartupSessionKind(t *testing.T) {
	tests := []struct {
		repl   string // "" : no replication parameter
		kind   session.Kind
		noDB   bool // the server uses no database
		absent bool
	}{
		{absent: true, kind: session.KindClient},
		{repl: "true", kind: session.KindReplication, noDB: true},
		{repl: "TRUE", kind: session.KindReplication, noDB: true},
		{repl: "t", kind: session.KindReplication, noDB: true},
		{repl: "yes", kind: session.KindReplication, noDB: true},
		{repl: "Y", kind: session.KindReplication, noDB: true},
		{repl: "on", kind: session.KindReplication, noDB: true},
		{repl: "1", kind: session.KindReplication, noDB: true},
		{repl: "database", kind: session.KindLogical},
		{repl: "Database", kind: session.KindClient}, // not "database", not a boolean: the server refuses it
		{repl: "false", kind: session.KindClient},
		{repl: "off", kind: session.KindClient},
		{repl: "of", kind: session.KindClient},
		{repl: "o", kind: session.KindClient},
		{repl: "0", kind: session.KindClient},
		{repl: "no", kind: session.KindClient},
		{repl: "", kind: session.KindClient},
		{repl: " true", kind: session.KindClient},
		{repl: "truer", kind: session.KindClient},
		{repl: "11", kind: session.KindClient},
	}
	for _, tt := range tests {
		params := map[string]string{"user": "u"}
		if !tt.absent {
			params["replication"] = tt.repl
		}
		p, err := parseStartup(startupBytes(params))
		if err != nil {
			t.Fatal(err)
		}
		if got := p.sessionKind(); got != tt.kind {
			t.Errorf("replication=%q: kind %v, want %v", tt.repl, got, tt.kind)
		}
		wantDB := "u"
		if tt.noDB {
			wantDB = ""
		}
		if got := p.database(); got != wantDB {
			t.Errorf("replication=%q: database %q, want %q", tt.repl, got, wantDB)
		}
	}
}

func TestIsBaseBackup(t *testing.T) {
	tests := []struct {
		sql  string
		want bool
	}{
		{"BASE_BACKUP", true},
		{"BASE_BACKUP LABEL 'x' WAL", true},
		{"base_backup (LABEL 'pg_basebackup base backup', PROGRESS, WAIT 0, MANIFEST 'yes')", true},
		{"  \n\tBase_Backup;", true},
		{"BASE_BACKUPS", false},
		{"BASE_BACKUP_2", false},
		{"BASE_BACKU", false},
		{"START_REPLICATION SLOT s PHYSICAL 0/0", false},
		{"IDENTIFY_SYSTEM", false},
		{"", false},
	}
	for _, tt := range tests {
		if got := isBaseBackup(tt.sql); got != tt.want {
			t.Errorf("isBaseBackup(%q) = %v, want %v", tt.sql, got, tt.want)
		}
	}
}

// TestOpenReplicationKindAndAdmission opens sessions under an Admitter
// that refuses every statement: a client session's Query is held and
// refused, a replication session's commands go upstream without asking,
// and the session's kind follows its startup and its commands.
func TestOpenReplicationKindAndAdmission(t *testing.T) {
	tests := []struct {
		name     string
		repl     string // "": none
		sql      string
		kind     session.Kind // after the startup
		after    session.Kind // after sql began
		admitted bool         // the Admitter was asked
	}{
		{"client", "", "SELECT 1", session.KindClient, session.KindClient, true},
		{"physical", "true", "IDENTIFY_SYSTEM", session.KindReplication, session.KindReplication, false},
		{"stream", "on", "START_REPLICATION SLOT s PHYSICAL 0/3000000 TIMELINE 1", session.KindReplication, session.KindReplication, false},
		{"basebackup", "1", "BASE_BACKUP (LABEL 'b', PROGRESS, MANIFEST 'yes')", session.KindReplication, session.KindBaseBackup, false},
		{"logical", "database", "START_REPLICATION SLOT s LOGICAL 0/0", session.KindLogical, session.KindLogical, false},
		// BASE_BACKUP only means something to a physical connection.
		{"logical base_backup", "database", "BASE_BACKUP", session.KindLogical, session.KindLogical, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			adm := &wiretest.Admitter{Refuse: func(*session.Statement) bool { return true }}
			r := startOpen(t, Options{Upstream: "db:5432", Admit: adm}, nil)
			params := map[string]string{"user": "rep"}
			if tt.repl != "" {
				params["replication"] = tt.repl
			}
			c := r.startup(t, params)
			s := c.Session
			if got := s.Kind(); got != tt.kind {
				t.Fatalf("kind after startup %v, want %v", got, tt.kind)
			}
			b := q(tt.sql)
			if err := c.Up.Observe(b); err != nil {
				t.Fatal(err)
			}
			fwd := b
			if rw, ok := c.Up.(wire.Rewriter); ok {
				var err error
				if fwd, err = rw.Rewrite(context.Background(), b); err != nil {
					t.Fatal(err)
				}
			}
			if asked := len(adm.Asked) > 0; asked != tt.admitted {
				t.Errorf("Admitter asked %v, want %v", adm.Asked, tt.admitted)
			}
			if !tt.admitted && string(fwd) != string(b) {
				t.Errorf("forwarded %q, want the Query as sent", fwd)
			}
			if got := s.Kind(); got != tt.after {
				t.Errorf("kind after %q %v, want %v", tt.sql, got, tt.after)
			}
			if got := s.Statements(); got != 1 {
				t.Errorf("statements %d, want 1", got)
			}
		})
	}
}
