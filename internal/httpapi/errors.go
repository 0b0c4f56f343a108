package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/sluicelab/sluice/internal/sqlstate"
	"github.com/sluicelab/sluice/internal/wlm/ddl"
)

// Error is an API error. It encodes as
//
//	{"error": "message", "field": "name", "status": 400, "code": "22023", "hint": "..."}
//
// where field names the request field to blame (absent when none is),
// code is the SQLSTATE when the workload manager refused a statement,
// and hint is the manager's hint, if any.
type Error struct {
	Status  int    `json:"status"`
	Message string `json:"error"`
	Field   string `json:"field,omitempty"`
	Code    string `json:"code,omitempty"`
	Hint    string `json:"hint,omitempty"`
}

func (e *Error) Error() string { return e.Message }

func badField(field, format string, args ...any) *Error {
	return &Error{Status: http.StatusBadRequest, Field: field, Message: fmt.Sprintf(format, args...)}
}

func notFound(format string, args ...any) *Error {
	return &Error{Status: http.StatusNotFound, Message: fmt.Sprintf(format, args...)}
}

// statusOf maps a SQLSTATE to an HTTP status: syntax and bad values are
// 400, an unknown object 404, a duplicate or an object others depend on
// 409, as is a change another instance's committed change refused
// (40001), a catalog that cannot be saved 500, anything else 400.
func statusOf(code string) int {
	switch code {
	case sqlstate.SerializationFailure:
		return http.StatusConflict
	case sqlstate.SyntaxError, sqlstate.InvalidParameterValue, sqlstate.FeatureNotSupported, sqlstate.UndefinedColumn:
		return http.StatusBadRequest
	case sqlstate.UndefinedObject, sqlstate.UndefinedTable:
		return http.StatusNotFound
	case sqlstate.DuplicateObject, sqlstate.DependentObjectsStillExist:
		return http.StatusConflict
	case sqlstate.IOError, sqlstate.InternalError:
		return http.StatusInternalServerError
	}
	return http.StatusBadRequest
}

// fromDDL converts the workload manager's error for the statement rq
// built into an API error naming the field its position points at; an
// *Error passes through. An undefined object
// named by a body field (a pool's except_rule, a user's resource_pool) is
// a bad field, 400, not a missing resource.
func fromDDL(err error, rq *request) *Error {
	var ae *Error
	if errors.As(err, &ae) {
		return ae
	}
	var de *ddl.Error
	if !errors.As(err, &de) {
		return &Error{Status: http.StatusInternalServerError, Message: err.Error()}
	}
	e := &Error{Status: statusOf(de.Code), Code: de.Code, Message: de.Message, Hint: de.Hint}
	if de.Detail != "" {
		e.Message += ": " + de.Detail
	}
	if rq != nil {
		e.Field = rq.fieldAt(de.Position)
	}
	if e.Field != "" && e.Field != "name" && de.Code == sqlstate.UndefinedObject {
		e.Status = http.StatusBadRequest
	}
	return e
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

func writeError(w http.ResponseWriter, err error) {
	var e *Error
	if !errors.As(err, &e) {
		e = &Error{Status: http.StatusInternalServerError, Message: err.Error()}
	}
	if e.Status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="sluice"`)
	}
	writeJSON(w, e.Status, e)
}

// respond writes v with status when e is nil, else e's error body.
func respond(w http.ResponseWriter, status int, v any, e *Error) {
	if e != nil {
		writeError(w, e)
		return
	}
	writeJSON(w, status, v)
}

// muxErrors turns the mux's own plain-text 404 and 405 answers into JSON
// errors; everything else passes through.
type muxErrors struct {
	http.ResponseWriter
	r       *http.Request
	swallow bool
}

func (m *muxErrors) WriteHeader(status int) {
	switch status {
	case http.StatusNotFound:
		m.swallow = true
		m.ResponseWriter.Header().Del("X-Content-Type-Options")
		writeError(m.ResponseWriter, notFound("no such resource: %s %s", m.r.Method, m.r.URL.Path))
	case http.StatusMethodNotAllowed:
		m.swallow = true
		allow := m.ResponseWriter.Header().Get("Allow")
		writeError(m.ResponseWriter, &Error{Status: status, Message: fmt.Sprintf("method %s is not allowed on %s (allowed: %s)", m.r.Method, m.r.URL.Path, allow)})
	default:
		m.ResponseWriter.WriteHeader(status)
	}
}

func (m *muxErrors) Write(b []byte) (int, error) {
	if m.swallow {
		return len(b), nil
	}
	return m.ResponseWriter.Write(b)
}
