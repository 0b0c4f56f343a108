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

// startHTTP serves the HTTP API on cfg.HTTP.Listen. The token comes from
// SLUICE_HTTP_TOKEN or the config file; without one, only a loopback
// address is accepted (exit code 2 otherwise).
func (a *app) startHTTP(ctx context.Context, cfg *config.Config, clk clock.Clock) error {
	token := os.Getenv("SLUICE_HTTP_TOKEN")
	if token == "" {
		token = cfg.HTTP.Token
	}
	if err := httpapi.CheckExposure(cfg.HTTP.Listen, token); err != nil {
		return usageErr(err)
	}
	api, err := httpapi.New(httpapi.Options{
		Manager: a.mgr, Proxy: a.srv, Clock: clk, Logger: a.log.With("component", "http"),
		Token: token, Version: version,
	})
	if err != nil {
		return &exitError{code: 1, err: err}
	}
	ln, err := net.Listen("tcp", cfg.HTTP.Listen)
	if err != nil {
		api.Close()
		return &exitError{code: 1, err: fmt.Errorf("HTTP API: %w", err)}
	}
	hs := &http.Server{
		Handler:           api,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
	}
	a.closers = append(a.closers, func() {
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if err := hs.Shutdown(sctx); err != nil {
			hs.Close()
		}
		api.Close()
	})
	auth := "bearer token"
	if token == "" {
		auth = "none (loopback)"
	}
	a.log.Info("HTTP API listening", "listen", ln.Addr().String(), "auth", auth)
	go func() {
		if err := api.Run(ctx); !errors.Is(err, context.Canceled) {
			a.log.Error("dashboard sampler stopped", "err", err)
		}
	}()
	go func() {
		if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			a.log.Error("HTTP API stopped", "err", err)
		}
	}()
	return nil
}
