package stack

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/sluicelab/sluice/internal/admin"
	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/config"
	"github.com/sluicelab/sluice/internal/httpapi"
	"github.com/sluicelab/sluice/internal/proxy"
	"github.com/sluicelab/sluice/internal/wlm"
)

// newAdmin makes the admin console of cfg, refusing a console without a
// password on a non-loopback address, and names its authentication for
// the log. It binds nothing.
func newAdmin(cfg *config.Config, mgr *wlm.Manager, clk clock.Clock, log *slog.Logger) (*admin.Server, string, error) {
	users := maps.Clone(cfg.Admin.Users)
	if users == nil {
		users = map[string]string{}
	}
	if cfg.Admin.Password != "" {
		users[admin.DefaultUser] = cfg.Admin.Password
	}
	noPassword := len(users) == 0
	if noPassword && !isLoopback(cfg.Admin.Listen) {
		return nil, "", configErr(fmt.Errorf("admin console on non-loopback address %s needs a password (SLUICE_ADMIN_PASSWORD or admin.password)", cfg.Admin.Listen))
	}
	console, err := admin.New(admin.Options{Manager: mgr, Logger: log.With("component", "admin"), Clock: clk, Users: users, AllowNoPassword: noPassword})
	if err != nil {
		return nil, "", configErr(fmt.Errorf("admin console: %w", err))
	}
	if noPassword {
		return console, "trust (loopback)", nil
	}
	return console, "scram-sha-256", nil
}

// serveAdmin binds the admin console's address and serves it until ctx
// ends.
func (s *Stack) serveAdmin(ctx context.Context, auth string) error {
	ln, err := net.Listen("tcp", s.cfg.Admin.Listen)
	if err != nil {
		return fmt.Errorf("admin console: %w", err)
	}
	s.adminAddr = ln.Addr()
	s.log.Info("admin console listening", "listen", ln.Addr().String(), "auth", auth)
	s.goLoop(func() {
		if err := s.console.Serve(ctx, ln); err != nil && !errors.Is(err, admin.ErrServerClosed) && !errors.Is(err, context.Canceled) {
			s.log.Error("admin console stopped", "err", err)
		}
	})
	return nil
}

// newHTTP makes the HTTP API of cfg; without a token only a loopback
// address is accepted. It binds nothing.
func newHTTP(cfg *config.Config, mgr *wlm.Manager, srv *proxy.Server, clk clock.Clock, log *slog.Logger, version string) (*httpapi.Server, *http.Server, string, error) {
	token := cfg.HTTP.Token
	if err := httpapi.CheckExposure(cfg.HTTP.Listen, token); err != nil {
		return nil, nil, "", configErr(err)
	}
	api, err := httpapi.New(httpapi.Options{
		Manager: mgr, Proxy: srv, Clock: clk, Logger: log.With("component", "http"),
		Token: token, Version: version,
	})
	if err != nil {
		return nil, nil, "", err
	}
	hs := &http.Server{
		Handler:           api,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
	}
	if token == "" {
		return api, hs, "none (loopback)", nil
	}
	return api, hs, "bearer token", nil
}

// serveHTTP binds the HTTP API's address and serves it, and runs the
// dashboard sampler, until ctx ends.
func (s *Stack) serveHTTP(ctx context.Context, auth string) error {
	ln, err := net.Listen("tcp", s.cfg.HTTP.Listen)
	if err != nil {
		return fmt.Errorf("HTTP API: %w", err)
	}
	s.httpAddr = ln.Addr()
	s.log.Info("HTTP API listening", "listen", ln.Addr().String(), "auth", auth)
	s.goLoop(func() {
		if err := s.api.Run(ctx); !errors.Is(err, context.Canceled) {
			s.log.Error("dashboard sampler stopped", "err", err)
		}
	})
	s.goLoop(func() {
		if err := s.hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("HTTP API stopped", "err", err)
		}
	})
	return nil
}

// isLoopback reports whether addr's host is a loopback address or name.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
