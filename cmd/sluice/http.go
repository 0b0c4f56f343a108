package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/config"
	"github.com/sluicelab/sluice/internal/httpapi"
)

// httpAPI is the HTTP API, made but not yet bound.
type httpAPI struct {
	api  *httpapi.Server
	auth string // for the log
	hs   *http.Server
}

// close stops serving (after up to 2 s for requests in flight) and
// closes the API.
func (h *httpAPI) close() {
	sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := h.hs.Shutdown(sctx); err != nil {
		h.hs.Close()
	}
	h.api.Close()
}

// newHTTP makes the HTTP API of cfg. The token comes from
// SLUICE_HTTP_TOKEN or the config file; without one, only a loopback
// address is accepted (exit code 2 otherwise). It binds nothing.
func (a *app) newHTTP(cfg *config.Config, clk clock.Clock) (*httpAPI, error) {
	token := os.Getenv("SLUICE_HTTP_TOKEN")
	if token == "" {
		token = cfg.HTTP.Token
	}
	if err := httpapi.CheckExposure(cfg.HTTP.Listen, token); err != nil {
		return nil, usageErr(err)
	}
	api, err := httpapi.New(httpapi.Options{
		Manager: a.mgr, Proxy: a.srv, Clock: clk, Logger: a.log.With("component", "http"),
		Token: token, Version: version,
	})
	if err != nil {
		return nil, &exitError{code: 1, err: err}
	}
	h := &httpAPI{api: api, auth: "bearer token", hs: &http.Server{
		Handler:           api,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
	}}
	if token == "" {
		h.auth = "none (loopback)"
	}
	return h, nil
}

// serveHTTP binds the HTTP API's address and serves it until ctx ends.
func (a *app) serveHTTP(ctx context.Context, h *httpAPI, cfg *config.Config) error {
	ln, err := net.Listen("tcp", cfg.HTTP.Listen)
	if err != nil {
		return &exitError{code: 1, err: fmt.Errorf("HTTP API: %w", err)}
	}
	a.log.Info("HTTP API listening", "listen", ln.Addr().String(), "auth", h.auth)
	go func() {
		if err := h.api.Run(ctx); !errors.Is(err, context.Canceled) {
			a.log.Error("dashboard sampler stopped", "err", err)
		}
	}()
	go func() {
		if err := h.hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			a.log.Error("HTTP API stopped", "err", err)
		}
	}()
	return nil
}
