package views

import "time"

// AuditEntry is one catalog change as the audit trail keeps it: who made
// it, through which surface, the statement (passwords already masked)
// and how it ended. Code and Error are "" when it succeeded.
type AuditEntry struct {
	Time      time.Time
	Surface   string // console, http, forward, config, reload, lab
	User      string // the console or data-route user; "token" or "" on http; "" for config; who asked, for reload
	Addr      string // the client's address; the configuration file for config
	Statement string // the statement, with password literals masked
	Code      string // SQLSTATE of the failure; "" on success
	Error     string // the failure's message; "" on success
}

// Outcome is "ok" for a change that took effect and "error" for one
// that did not.
func (e AuditEntry) Outcome() string {
	if e.Code == "" && e.Error == "" {
		return "ok"
	}
	return "error"
}

// Audit is SHOW AUDIT and the audit view: the entries in the order
// given (the audit log's, oldest first). error is "SQLSTATE: message".
func Audit(entries []AuditEntry) Table {
	t := newTable("time, surface, user, client_addr, statement, outcome, error")
	t.Rows = make([][]string, 0, len(entries))
	for _, e := range entries {
		msg := e.Error
		if e.Code != "" {
			msg = e.Code + ": " + e.Error
		}
		t.Rows = append(t.Rows, []string{fmtTime(e.Time), e.Surface, e.User, e.Addr, e.Statement, e.Outcome(), msg})
	}
	return t
}
