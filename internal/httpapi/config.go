package httpapi

import (
	"context"
	"errors"
	"net/http"

	"github.com/sluicelab/sluice/internal/config"
	"github.com/sluicelab/sluice/internal/sqlstate"
)

// Reloader is the configuration in force and the way to re-read it, for
// POST /api/reload and GET /api/config; package stack provides it. Both
// are safe for concurrent use.
type Reloader interface {
	// ReloadConfig re-reads the configuration the process started
	// with and applies it; an error means it was refused (a
	// *config.Error inside names the file, key and value).
	ReloadConfig(ctx context.Context) (config.Changes, error)
	// ConfigView describes the configuration in force, secrets
	// omitted.
	ConfigView() config.View
}

// ReloadResponse is the body of a successful POST /api/reload: the
// routes' changes and the configuration now in force.
type ReloadResponse struct {
	Changes config.Changes `json:"changes"`
	Config  config.View    `json:"config"`
}

func (s *Server) registerConfig(mux *http.ServeMux) {
	mux.HandleFunc("GET /api/config", s.showConfig)
	mux.HandleFunc("POST /api/reload", s.reload)
}

// noReloader is the error of both endpoints on a server without a
// Reloader.
func noReloader() *Error {
	return &Error{Status: http.StatusNotImplemented, Message: "this server has no configuration to show or reload"}
}

func (s *Server) showConfig(w http.ResponseWriter, r *http.Request) {
	if s.reloader == nil {
		writeError(w, noReloader())
		return
	}
	writeJSON(w, http.StatusOK, s.reloader.ConfigView())
}

// reload re-reads and applies the configuration: 200 with the changes,
// 400 (code F0000) for a configuration refused, 500 for another failure
// (an address in use); the configuration in force is then unchanged.
func (s *Server) reload(w http.ResponseWriter, r *http.Request) {
	if s.reloader == nil {
		writeError(w, noReloader())
		return
	}
	s.log.Info("reload requested", "client", r.RemoteAddr)
	ch, err := s.reloader.ReloadConfig(r.Context())
	if err != nil {
		e := &Error{Status: http.StatusInternalServerError, Message: "reload refused; configuration unchanged: " + err.Error()}
		if errors.As(err, new(*config.Error)) {
			e.Status, e.Code = http.StatusBadRequest, sqlstate.ConfigFileError
		}
		writeError(w, e)
		return
	}
	writeJSON(w, http.StatusOK, ReloadResponse{Changes: ch, Config: s.reloader.ConfigView()})
}
