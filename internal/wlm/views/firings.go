package views

import (
	"strconv"
	"time"
)

// Firing is one exception-rule firing as the firing history keeps it:
// the rule, what it did, the statement it fired on and what that
// statement measured when it did. Query has its password literals
// masked, as every statement's text in sluice; Info is the statement's
// except_info for this firing; Outcome what the action came to (package
// wlm's Outcome constants, a failed cancel with its error). A zero
// measure is one the rule did not take (Elapsed and Bandwidth of a held
// statement, BlockTime of a running one); "" is an unknown outcome, as
// in a history written before outcomes were kept.
type Firing struct {
	Time      time.Time     `json:"time"`
	Rule      string        `json:"rule"`
	Action    string        `json:"action"` // penalty or abort
	Statement uint64        `json:"statement_id"`
	Session   uint64        `json:"session_id"`
	User      string        `json:"user"`
	Pool      string        `json:"pool"`
	Route     string        `json:"route"`
	Query     string        `json:"query"`
	Bandwidth float64       `json:"bandwidth_mbps"` // the statement's MB/s when it fired
	Elapsed   time.Duration `json:"elapsed"`        // the statement's age when it fired
	BlockTime time.Duration `json:"blocktime"`      // its wait for admission, for a blocktime rule
	Bytes     int64         `json:"bytes"`          // its bytes up and down (with its shards') when it fired
	Info      string        `json:"except_info"`
	Outcome   string        `json:"outcome"`
}

// Firings is SHOW FIRINGS and the firings view: the entries in the order
// given (the history's, oldest first).
func Firings(entries []Firing) Table {
	t := newTable("time, rule, action, statement_id int, session_id int, usename, resource_pool, route, query, bandwidth_mbps real, elapsed_s real, blocktime_s real, bytes int, except_info, outcome")
	t.Rows = make([][]string, 0, len(entries))
	for _, e := range entries {
		t.Rows = append(t.Rows, []string{fmtTime(e.Time), e.Rule, e.Action,
			strconv.FormatUint(e.Statement, 10), strconv.FormatUint(e.Session, 10), e.User, e.Pool, e.Route, e.Query,
			strconv.FormatFloat(e.Bandwidth, 'f', 3, 64), strconv.FormatFloat(e.Elapsed.Seconds(), 'f', 3, 64),
			strconv.FormatFloat(e.BlockTime.Seconds(), 'f', 3, 64), strconv.FormatInt(e.Bytes, 10), e.Info, e.Outcome})
	}
	return t
}
