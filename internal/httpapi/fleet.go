package httpapi

// This file serves the fleet's endpoints: the live instances, this
// instance's views for the others to gather, the cluster-wide views, and
// the session commands an instance forwards to the one that holds the
// session.

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strconv"

	"github.com/sluicelab/sluice/internal/fleet"
	"github.com/sluicelab/sluice/internal/session"
	"github.com/sluicelab/sluice/internal/wlm/views"
)

// ClusterAnswer is the body of GET /api/cluster/views: the views asked
// for, merged over the live instances (first column instance), and a
// notice for each instance that did not answer.
type ClusterAnswer struct {
	Tables  map[string]fleet.WireTable `json:"tables"`
	Notices []string                   `json:"notices"`
}

func (s *Server) registerFleet(mux *http.ServeMux) {
	mux.HandleFunc("GET /api/instances", s.listInstances)
	mux.HandleFunc("GET /api/views", s.localViews)
	mux.HandleFunc("GET /api/cluster/views", s.clusterViews)
	mux.HandleFunc("POST /api/sessions/{id}/cancel", func(w http.ResponseWriter, r *http.Request) { s.sessionCommand(w, r, false) })
	mux.HandleFunc("POST /api/sessions/{id}/terminate", func(w http.ResponseWriter, r *http.Request) { s.sessionCommand(w, r, true) })
}

func (s *Server) listInstances(w http.ResponseWriter, r *http.Request) {
	if s.fleet == nil {
		writeError(w, &Error{Status: http.StatusNotImplemented, Message: "this server has no fleet"})
		return
	}
	writeJSON(w, http.StatusOK, s.fleet.Instances(r.Context()))
}

// viewNames reads the repeated query parameter name: views of
// views.Names, at least one.
func viewNames(r *http.Request) ([]string, *Error) {
	names := r.URL.Query()["name"]
	if len(names) == 0 {
		return nil, badField("name", "query parameter name: name at least one view (%v)", views.Names)
	}
	for _, n := range names {
		if !slices.Contains(views.Names, n) {
			return nil, badField("name", "query parameter name: no view %q (want one of %v)", n, views.Names)
		}
	}
	return names, nil
}

// localViews answers this instance's views of ?name=, as the other
// instances gather them.
func (s *Server) localViews(w http.ResponseWriter, r *http.Request) {
	names, e := viewNames(r)
	if e != nil {
		writeError(w, e)
		return
	}
	ans := fleet.ViewsAnswer{Tables: map[string]fleet.WireTable{}}
	if s.fleet != nil {
		ans.Instance = s.fleet.Name()
	}
	for n, t := range s.views.ViewTables(names) {
		ans.Tables[n] = fleet.ToWire(t)
	}
	writeJSON(w, http.StatusOK, ans)
}

// clusterViews answers the views of ?name= of every live instance.
func (s *Server) clusterViews(w http.ResponseWriter, r *http.Request) {
	names, e := viewNames(r)
	if e != nil {
		writeError(w, e)
		return
	}
	if s.fleet == nil {
		writeError(w, &Error{Status: http.StatusNotImplemented, Message: "this server has no fleet"})
		return
	}
	tabs, notices := s.fleet.Tables(r.Context(), names)
	ans := ClusterAnswer{Tables: map[string]fleet.WireTable{}, Notices: notices}
	if ans.Notices == nil {
		ans.Notices = []string{}
	}
	for n, t := range tabs {
		ans.Tables[n] = fleet.ToWire(t)
	}
	writeJSON(w, http.StatusOK, ans)
}

// sessionCommand cancels the running statement of session {id}, or ends
// the session, as the console's CANCEL STATEMENT and TERMINATE SESSION
// do, recorded in the audit trail; ?instance= names the instance that
// holds the session, when it is another, to forward the command to.
// 200 with done true or false (nothing to act on), and missing true when
// no session has the id.
func (s *Server) sessionCommand(w http.ResponseWriter, r *http.Request, terminate bool) {
	id, e := parseID(r)
	if e != nil {
		writeError(w, e)
		return
	}
	if inst := r.URL.Query().Get("instance"); inst != "" && (s.fleet == nil || inst != s.fleet.Name()) {
		if s.fleet == nil {
			writeError(w, badField("instance", "instance %q: this server has no fleet", inst))
			return
		}
		ans, err := s.fleet.Forward(r.Context(), inst, id, terminate)
		var re *fleet.RemoteError
		switch {
		case errors.Is(err, fleet.ErrUnknownInstance):
			writeError(w, notFound("%v", err))
		case errors.As(err, &re):
			writeError(w, &Error{Status: re.Status, Message: re.Error()})
		case err != nil:
			writeError(w, &Error{Status: http.StatusBadGateway, Message: err.Error()})
		default:
			writeJSON(w, http.StatusOK, ans)
		}
		return
	}
	ans := fleet.SessionAnswer{Session: id}
	if s.fleet != nil {
		ans.Instance = s.fleet.Name()
	}
	if terminate {
		ans.Done = s.rt.TerminateSession(r.Context(), id)
	} else {
		ctx, cancel := context.WithTimeout(r.Context(), CancelTimeout)
		defer cancel()
		done, err := s.rt.CancelSession(ctx, id)
		switch {
		case errors.Is(err, session.ErrNoCanceler):
			ans.Notice = "session " + strconv.FormatUint(id, 10) + "'s route cannot cancel statements (a mysql route needs kill_user and kill_password)"
		case err != nil:
			writeError(w, &Error{Status: http.StatusBadGateway, Message: err.Error()})
			return
		}
		ans.Done = done
	}
	ans.Missing = !ans.Done && s.rt.Registry().Session(id) == nil
	writeJSON(w, http.StatusOK, ans)
}
