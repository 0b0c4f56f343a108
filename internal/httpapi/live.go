package httpapi

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/sluicelab/sluice/internal/session"
	"github.com/sluicelab/sluice/internal/wlm/views"
)

// CancelTimeout bounds one cancel request of POST
// /api/statements/{id}/cancel.
const CancelTimeout = 5 * time.Second

// Session is an open session.
type Session struct {
	ID          uint64    `json:"id"`
	Route       string    `json:"route"`
	Protocol    string    `json:"protocol"`
	Link        string    `json:"link"`
	Client      string    `json:"client"`
	Upstream    string    `json:"upstream"`
	User        string    `json:"user"`
	Database    string    `json:"database"`
	Application string    `json:"application"`
	Pool        string    `json:"pool"`
	Opened      time.Time `json:"opened"`
	BytesUp     int64     `json:"bytes_up"`
	BytesDown   int64     `json:"bytes_down"`
	Statements  int64     `json:"statements"`
	Penalized   bool      `json:"penalized"`
	Active      []uint64  `json:"active_statements"`
	Kind        string    `json:"kind"` // client, replication, basebackup or logical
	// Coordinator is, for a shard connection of a distributed query, the
	// id of its coordinator's session; null otherwise.
	Coordinator *uint64 `json:"coordinator"`
	// State is SHOW SESSIONS' state: idle in transaction, waiting,
	// active or idle.
	State string `json:"state"`
	// Slot is the resource pool whose active_statements slot the session
	// holds, "" when none; IdleInTransaction is how long, in seconds, it
	// has sat idle inside a transaction holding it, null when it does not.
	Slot              string   `json:"slot"`
	IdleInTransaction *float64 `json:"idle_in_transaction"`
}

// Statement is a running or recently ended statement. Ended and Rows are
// null while it runs (Rows also when the server reported no count);
// Bandwidth is its total bytes both ways over its age, in bytes per
// second. A distributed statement (a coordinator's, with shard
// statements) has its own plus its shard statements' bytes in
// TotalBytesUp and TotalBytesDown and theirs per route in Nodes (its own
// route not included); a shard statement names its coordinator
// statement in Parent (null otherwise). For any other statement the
// totals are its own bytes and Nodes is empty.
type Statement struct {
	views.StatementRef
	SQL             string     `json:"sql"`
	State           string     `json:"state"`
	Class           string     `json:"class"`
	Penalized       bool       `json:"penalized"`
	CancelRequested bool       `json:"cancel_requested"`
	Started         time.Time  `json:"started"`
	Ended           *time.Time `json:"ended"`
	Elapsed         float64    `json:"elapsed_seconds"`
	BytesUp         int64      `json:"bytes_up"`
	BytesDown       int64      `json:"bytes_down"`
	Bandwidth       float64    `json:"bandwidth_bytes_per_second"`
	Rows            *int64     `json:"rows"`
	Code            string     `json:"code,omitempty"`
	ExceptInfo      []string   `json:"except_info"`
	Parent          *uint64    `json:"parent"`
	TotalBytesUp    int64      `json:"total_bytes_up"`
	TotalBytesDown  int64      `json:"total_bytes_down"`
	Nodes           []Node     `json:"nodes"`
}

// Node is what a distributed statement's shard statements moved on one
// route.
type Node struct {
	Route      string `json:"route"`
	Statements int64  `json:"statements"`
	BytesUp    int64  `json:"bytes_up"`
	BytesDown  int64  `json:"bytes_down"`
}

func sessionJSON(s *session.Session, now time.Time) Session {
	out := Session{
		ID: s.ID, Route: s.Info.Route, Protocol: s.Info.Protocol, Link: s.Info.Link, Client: s.Info.Client,
		Upstream: s.Info.Upstream, User: s.User(), Database: s.Database(), Application: s.Application(),
		Pool: s.Pool(), Opened: s.Opened, BytesUp: s.BytesUp(), BytesDown: s.BytesDown(),
		Statements: s.Statements(), Penalized: s.Penalized(), Active: []uint64{}, Kind: s.Kind().String(),
	}
	for _, st := range s.Active() {
		out.Active = append(out.Active, st.ID)
	}
	if c := s.Coordinator(); c != nil {
		id := c.ID
		out.Coordinator = &id
	}
	sl := s.Slot()
	out.State, out.Slot = views.SessionState(s, sl), sl.Pool
	if d, ok := sl.IdleInTransaction(now); ok {
		sec := d.Seconds()
		out.IdleInTransaction = &sec
	}
	return out
}

func (s *Server) statementJSON(st *session.Statement, now time.Time) Statement {
	snap := st.Snapshot()
	cls := views.Class(s.cat.Catalog(), snap.Pool, snap.Penalized)
	out := Statement{
		StatementRef: views.Ref(&snap), SQL: snap.SQL,
		State: snap.Outcome.String(), Class: cls.String(), Penalized: snap.Penalized, CancelRequested: st.CancelRequested(),
		Started: snap.Started, BytesUp: snap.BytesUp, BytesDown: snap.BytesDown, Code: snap.Code,
		ExceptInfo: snap.Except, TotalBytesUp: snap.TotalUp, TotalBytesDown: snap.TotalDown, Nodes: []Node{},
	}
	if out.ExceptInfo == nil {
		out.ExceptInfo = []string{}
	}
	if snap.ParentID != 0 {
		p := snap.ParentID
		out.Parent = &p
	}
	for _, n := range snap.Nodes {
		out.Nodes = append(out.Nodes, Node{Route: n.Route, Statements: n.Statements, BytesUp: n.BytesUp, BytesDown: n.BytesDown})
	}
	end := now
	if !snap.Ended.IsZero() {
		e := snap.Ended
		out.Ended, end = &e, e
		if snap.Rows >= 0 {
			r := snap.Rows
			out.Rows = &r
		}
	}
	if age := end.Sub(snap.Started); age > 0 {
		out.Elapsed = age.Seconds()
		out.Bandwidth = float64(snap.TotalUp+snap.TotalDown) / age.Seconds()
	}
	return out
}

func (s *Server) registerLive(mux *http.ServeMux) {
	mux.HandleFunc("GET /api/sessions", s.listSessions)
	mux.HandleFunc("GET /api/sessions/{id}", s.showSession)
	mux.HandleFunc("GET /api/statements", s.listStatements)
	mux.HandleFunc("GET /api/statements/{id}", s.showStatement)
	mux.HandleFunc("POST /api/statements/{id}/cancel", s.cancelStatement)
}

func parseID(r *http.Request) (uint64, *Error) {
	raw := r.PathValue("id")
	id, err := strconv.ParseUint(raw, 10, 64)
	if err != nil {
		return 0, badField("id", "id %q: want a positive integer", raw)
	}
	return id, nil
}

func (s *Server) listSessions(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	now := s.clk.Now()
	out := []Session{}
	for _, ss := range s.rt.Registry().Sessions() {
		j := sessionJSON(ss, now)
		if !match(q, "route", j.Route) || !match(q, "user", j.User) || !match(q, "pool", j.Pool) || !match(q, "kind", j.Kind) {
			continue
		}
		out = append(out, j)
	}
	writeJSON(w, http.StatusOK, out)
}

// match reports whether query parameter key is absent or equals v.
func match(q map[string][]string, key, v string) bool {
	want, ok := q[key]
	return !ok || len(want) == 0 || want[0] == v
}

func (s *Server) showSession(w http.ResponseWriter, r *http.Request) {
	id, e := parseID(r)
	if e != nil {
		writeError(w, e)
		return
	}
	ss := s.rt.Registry().Session(id)
	if ss == nil {
		writeError(w, notFound("session %d is not open", id))
		return
	}
	writeJSON(w, http.StatusOK, sessionJSON(ss, s.clk.Now()))
}

// listStatements answers the running statements (oldest first), then the
// recently ended ones (newest first). Query parameters: state (running,
// ended or all), route, user, pool, limit.
func (s *Server) listStatements(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	running, ended := true, true
	switch st := q.Get("state"); st {
	case "", "all":
	case "running":
		ended = false
	case "ended":
		running = false
	default:
		writeError(w, badField("state", "query parameter state: bad value %q (want running, ended or all)", st))
		return
	}
	limit := -1
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 0 {
			writeError(w, badField("limit", "query parameter limit: bad value %q (want an integer >= 0)", l))
			return
		}
		limit = n
	}
	now := s.clk.Now()
	reg := s.rt.Registry()
	var list []*session.Statement
	if running {
		list = append(list, reg.Active()...)
	}
	if ended {
		recent := reg.Recent()
		for i := len(recent) - 1; i >= 0; i-- {
			list = append(list, recent[i])
		}
	}
	out := []Statement{}
	for _, st := range list {
		if limit >= 0 && len(out) >= limit {
			break
		}
		j := s.statementJSON(st, now)
		if !match(q, "route", j.Route) || !match(q, "user", j.User) || !match(q, "pool", j.Pool) {
			continue
		}
		out = append(out, j)
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) findStatement(r *http.Request) (*session.Statement, *Error) {
	id, e := parseID(r)
	if e != nil {
		return nil, e
	}
	st := s.rt.Registry().Statement(id)
	if st == nil {
		return nil, notFound("statement %d is neither running nor among the recently ended ones", id)
	}
	return st, nil
}

func (s *Server) showStatement(w http.ResponseWriter, r *http.Request) {
	st, e := s.findStatement(r)
	if e != nil {
		writeError(w, e)
		return
	}
	writeJSON(w, http.StatusOK, s.statementJSON(st, s.clk.Now()))
}

// cancelStatement asks the database to cancel a running statement through
// its protocol and answers 202: the outcome is recorded when the server
// answers.
func (s *Server) cancelStatement(w http.ResponseWriter, r *http.Request) {
	st, e := s.findStatement(r)
	if e != nil {
		writeError(w, e)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), CancelTimeout)
	defer cancel()
	if err := s.rt.Registry().Cancel(ctx, st); err != nil {
		switch {
		case errors.Is(err, session.ErrNotRunning):
			writeError(w, &Error{Status: http.StatusConflict, Message: "statement " + strconv.FormatUint(st.ID, 10) + " is not running"})
		case errors.Is(err, session.ErrNoCanceler):
			writeError(w, &Error{Status: http.StatusConflict, Message: "statement " + strconv.FormatUint(st.ID, 10) + ": its session cannot cancel statements (a tcp route, or a MySQL route without kill credentials)"})
		default:
			writeError(w, &Error{Status: http.StatusBadGateway, Message: err.Error()})
		}
		return
	}
	writeJSON(w, http.StatusAccepted, s.statementJSON(st, s.clk.Now()))
}
