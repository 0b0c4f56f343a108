package toxics

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
)

// MaxBody is the largest request body the handlers read, in bytes.
const MaxBody = 1 << 20

// Register adds the Toxiproxy API to mux:
//
//	GET    /proxies                          every proxy, by name
//	POST   /proxies                          create a proxy (201)
//	POST   /populate                         create or replace proxies (201)
//	GET    /proxies/{proxy}                  one proxy
//	POST   /proxies/{proxy}                  update it (PATCH too)
//	DELETE /proxies/{proxy}                  delete it (204)
//	GET    /proxies/{proxy}/toxics           its toxics
//	POST   /proxies/{proxy}/toxics           add a toxic (200, as Toxiproxy)
//	GET    /proxies/{proxy}/toxics/{toxic}   one toxic
//	POST   /proxies/{proxy}/toxics/{toxic}   update it (PATCH too)
//	DELETE /proxies/{proxy}/toxics/{toxic}   remove it (204)
//	POST   /reset                            enable all, remove all toxics (204)
//	GET    /version                          the version, as text
//
// Authentication is the caller's business.
func (s *Service) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET /proxies", s.listProxies)
	mux.HandleFunc("POST /proxies", s.createProxy)
	mux.HandleFunc("POST /populate", s.populate)
	mux.HandleFunc("GET /proxies/{proxy}", s.showProxy)
	mux.HandleFunc("POST /proxies/{proxy}", s.updateProxy)
	mux.HandleFunc("PATCH /proxies/{proxy}", s.updateProxy)
	mux.HandleFunc("DELETE /proxies/{proxy}", s.deleteProxy)
	mux.HandleFunc("GET /proxies/{proxy}/toxics", s.listToxics)
	mux.HandleFunc("POST /proxies/{proxy}/toxics", s.addToxic)
	mux.HandleFunc("GET /proxies/{proxy}/toxics/{toxic}", s.showToxic)
	mux.HandleFunc("POST /proxies/{proxy}/toxics/{toxic}", s.updateToxic)
	mux.HandleFunc("PATCH /proxies/{proxy}/toxics/{toxic}", s.updateToxic)
	mux.HandleFunc("DELETE /proxies/{proxy}/toxics/{toxic}", s.removeToxic)
	mux.HandleFunc("POST /reset", s.reset)
	mux.HandleFunc("GET /version", s.showVersion)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
}

// writeError writes err as Toxiproxy's error body, with the field.
func writeError(w http.ResponseWriter, err error) {
	e := asError(err)
	writeJSON(w, e.Status, e)
}

// asError returns the *Error in err's chain, or a 500 carrying err's
// message when there is none.
func asError(err error) *Error {
	var e *Error
	if !errors.As(err, &e) {
		e = &Error{Status: http.StatusInternalServerError, Message: err.Error()}
	}
	return e
}

// respond writes v with status when err is nil, else err's error body.
func respond(w http.ResponseWriter, status int, v any, err error) {
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, status, v)
}

// noContent answers 204 when err is nil, else err's error body.
func noContent(w http.ResponseWriter, err error) {
	if err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBody))
	if err != nil {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			return nil, errorf(http.StatusRequestEntityTooLarge, "", "request body is larger than %d bytes", MaxBody)
		}
		return nil, errorf(http.StatusBadRequest, "", "reading the request body: %v", err)
	}
	return b, nil
}

// readJSON reads the request body into v.
func readJSON(w http.ResponseWriter, r *http.Request, v any) error {
	body, err := readBody(w, r)
	if err != nil {
		return err
	}
	return decodeJSON(body, v)
}

// readToxic reads the request body as a toxic; toxicity is nil when the
// body leaves it out.
func readToxic(w http.ResponseWriter, r *http.Request) (t Toxic, toxicity *float64, err error) {
	body, err := readBody(w, r)
	if err != nil {
		return Toxic{}, nil, err
	}
	return decodeToxic(body)
}

func (s *Service) listProxies(w http.ResponseWriter, r *http.Request) {
	out := map[string]Proxy{}
	for _, p := range s.Proxies() {
		out[p.Name] = p
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Service) createProxy(w http.ResponseWriter, r *http.Request) {
	var c Config
	if err := readJSON(w, r, &c); err != nil {
		writeError(w, err)
		return
	}
	p, err := s.CreateProxy(r.Context(), c)
	respond(w, http.StatusCreated, p, err)
}

func (s *Service) populate(w http.ResponseWriter, r *http.Request) {
	var cs []Config
	if err := readJSON(w, r, &cs); err != nil {
		writeError(w, err)
		return
	}
	ps, err := s.Populate(r.Context(), cs)
	if ps == nil {
		ps = []Proxy{}
	}
	if err != nil {
		e := asError(err)
		writeJSON(w, e.Status, struct {
			*Error
			Proxies []Proxy `json:"proxies"`
		}{e, ps})
		return
	}
	writeJSON(w, http.StatusCreated, map[string][]Proxy{"proxies": ps})
}

func (s *Service) showProxy(w http.ResponseWriter, r *http.Request) {
	p, err := s.Proxy(r.PathValue("proxy"))
	respond(w, http.StatusOK, p, err)
}

func (s *Service) updateProxy(w http.ResponseWriter, r *http.Request) {
	var c Config
	if err := readJSON(w, r, &c); err != nil {
		writeError(w, err)
		return
	}
	p, err := s.UpdateProxy(r.Context(), r.PathValue("proxy"), c)
	respond(w, http.StatusOK, p, err)
}

func (s *Service) deleteProxy(w http.ResponseWriter, r *http.Request) {
	noContent(w, s.DeleteProxy(r.Context(), r.PathValue("proxy")))
}

func (s *Service) listToxics(w http.ResponseWriter, r *http.Request) {
	ts, err := s.Toxics(r.PathValue("proxy"))
	respond(w, http.StatusOK, ts, err)
}

func (s *Service) addToxic(w http.ResponseWriter, r *http.Request) {
	t, toxicity, err := readToxic(w, r)
	if err != nil {
		writeError(w, err)
		return
	}
	if toxicity == nil {
		t.Toxicity = 1
	}
	out, err := s.AddToxic(r.Context(), r.PathValue("proxy"), t)
	respond(w, http.StatusOK, out, err)
}

func (s *Service) showToxic(w http.ResponseWriter, r *http.Request) {
	t, err := s.Toxic(r.PathValue("proxy"), r.PathValue("toxic"))
	respond(w, http.StatusOK, t, err)
}

func (s *Service) updateToxic(w http.ResponseWriter, r *http.Request) {
	t, toxicity, err := readToxic(w, r)
	if err != nil {
		writeError(w, err)
		return
	}
	out, err := s.UpdateToxic(r.Context(), r.PathValue("proxy"), r.PathValue("toxic"), toxicity, t.Attributes)
	respond(w, http.StatusOK, out, err)
}

func (s *Service) removeToxic(w http.ResponseWriter, r *http.Request) {
	noContent(w, s.RemoveToxic(r.Context(), r.PathValue("proxy"), r.PathValue("toxic")))
}

func (s *Service) reset(w http.ResponseWriter, r *http.Request) {
	noContent(w, s.Reset(r.Context()))
}

// showVersion answers text, as Toxiproxy 2.5 does, or {"version": ...}
// to a client that accepts only JSON.
func (s *Service) showVersion(w http.ResponseWriter, r *http.Request) {
	if a := r.Header.Get("Accept"); strings.Contains(a, "application/json") && !strings.Contains(a, "text/") {
		writeJSON(w, http.StatusOK, map[string]string{"version": s.version})
		return
	}
	w.Header().Set("Content-Type", "text/plain;charset=utf-8")
	io.WriteString(w, s.version)
}
