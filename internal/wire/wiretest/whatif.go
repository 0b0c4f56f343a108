package wiretest

import (
	"testing"
	"time"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/whatif"
	"github.com/sluicelab/sluice/internal/wire"
)

// Exchange is one client chunk, at 0, and the server's answer to it, at 1.
type Exchange [2][]byte

// WhatIfCase is a conversation and what the what-if table must count for
// it: Txns transactions of RoundTrips round trips in all, or, when Txns
// is 0, no application at all.
type WhatIfCase struct {
	Name       string
	Steps      []Exchange
	Txns       int64
	RoundTrips float64
}

// RunWhatIfCases feeds each case's conversation to the observers open
// returns, an exchange at a time, 1 ms of virtual time apart on a fake
// clock from start, and checks what tb counts, with 1 ms of server time
// per round trip. open counts into tb, on clk.
func RunWhatIfCases(t *testing.T, start time.Time, tests []WhatIfCase, open func(t *testing.T, clk *clock.Fake, tb *whatif.Table) (up, down wire.Observer)) {
	for _, tt := range tests {
		t.Run(tt.Name, func(t *testing.T) {
			clk := clock.NewFake(start)
			tb := whatif.New(whatif.Options{})
			up, down := open(t, clk, tb)
			for _, s := range tt.Steps {
				if err := up.Observe(s[0]); err != nil {
					t.Fatalf("client observe: %v", err)
				}
				clk.Advance(time.Millisecond)
				if err := down.Observe(s[1]); err != nil {
					t.Fatalf("server observe: %v", err)
				}
				clk.Advance(time.Millisecond)
			}
			apps := tb.Snapshot(clk.Now())
			if tt.Txns == 0 {
				if len(apps) != 0 {
					t.Fatalf("apps %+v, want none", apps)
				}
				return
			}
			if len(apps) != 1 || apps[0].Transactions != tt.Txns || apps[0].RoundTrips != tt.RoundTrips {
				t.Fatalf("apps %+v, want %d transactions of %v round trips", apps, tt.Txns, tt.RoundTrips)
			}
			if want := time.Duration(tt.RoundTrips) * time.Millisecond; apps[0].ServerTime != want {
				t.Errorf("server time %v, want %v", apps[0].ServerTime, want)
			}
		})
	}
}
