package main

import (
	"context"
	"errors"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/config"
)

// startHTTP serves the HTTP API on cfg.HTTP.Listen.
func (a *app) startHTTP(ctx context.Context, cfg *config.Config, clk clock.Clock) error {
	return usageErr(errors.New("--http: the HTTP API is not available in this build"))
}
