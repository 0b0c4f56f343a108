package httpapi

import (
	"net/http"
	"time"

	"github.com/sluicelab/sluice/internal/whatif"
)

func (s *Server) registerWhatIf(mux *http.ServeMux) {
	mux.HandleFunc("GET /api/whatif", s.whatIf)
}

// whatIf answers GET /api/whatif[?rtt=1ms,5ms]: the applications of the
// what-if table (Options.WhatIf) with their predictions at each
// added RTT (whatif.DefaultRTTs without rtt), as a whatif.Report.
func (s *Server) whatIf(w http.ResponseWriter, r *http.Request) {
	rtts, err := whatif.ParseRTTs(r.URL.Query().Get("rtt"))
	if err != nil {
		writeError(w, badField("rtt", "%s", err))
		return
	}
	var apps []whatif.App
	var window time.Duration
	if s.whatIfTable != nil {
		apps, window = s.whatIfTable.Snapshot(s.clk.Now()), s.whatIfTable.Window()
	}
	writeJSON(w, http.StatusOK, whatif.NewReport(apps, rtts, window))
}
