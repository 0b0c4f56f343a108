package httpapi_test

import (
	"strings"
	"testing"

	toxiproxy "github.com/Shopify/toxiproxy/v2/client"

	"github.com/sluicelab/sluice/internal/wlm"
)

// TestToxiproxyChangesAudited drives the Toxiproxy-compatible API with
// Toxiproxy's own client and finds every change in the Manager's audit
// trail (the one SHOW AUDIT reads), with surface http, user token, the
// change as text and, for a refused one, the code it was refused with.
func TestToxiproxyChangesAudited(t *testing.T) {
	s := newStack(t, stackOptions{token: "tp"})
	client, px, echo := s.echoProxy(t, "aud")
	if _, err := px.AddToxic("lag", "latency", "", 1, toxiproxy.Attributes{"latency": 5}); err != nil {
		t.Fatal(err)
	}
	if _, err := px.UpdateToxic("lag", 0.5, toxiproxy.Attributes{"latency": 7}); err != nil {
		t.Fatal(err)
	}
	if _, err := px.AddToxic("bad", "latency", "", 1, toxiproxy.Attributes{"latency": -1}); err == nil {
		t.Fatal("negative latency accepted")
	}
	if err := px.RemoveToxic("lag"); err != nil {
		t.Fatal(err)
	}
	if err := px.Disable(); err != nil {
		t.Fatal(err)
	}
	if err := client.ResetState(); err != nil {
		t.Fatal(err)
	}
	if err := px.Delete(); err != nil {
		t.Fatal(err)
	}
	want := []struct{ prefix, code string }{
		{`TOXIPROXY CREATE PROXY "aud" LISTEN '' UPSTREAM '` + echo + `' ENABLED true`, ""},
		{`TOXIPROXY ADD TOXIC "lag" ON "aud" TYPE 'latency' TOXICITY 1 ATTRIBUTES ("latency" = 5)`, ""},
		{`TOXIPROXY ALTER TOXIC "lag" ON "aud" TOXICITY 0.5 ATTRIBUTES ("latency" = 7)`, ""},
		{`TOXIPROXY ADD TOXIC "bad" ON "aud"`, "22023"},
		{`TOXIPROXY REMOVE TOXIC "lag" ON "aud"`, ""},
		{`TOXIPROXY ALTER PROXY "aud"`, ""},
		{`TOXIPROXY RESET`, ""},
		{`TOXIPROXY DROP PROXY "aud"`, ""},
	}
	var got []wlm.AuditEntry
	for _, e := range s.mgr.Service().Audit() {
		if strings.HasPrefix(e.Statement, "TOXIPROXY") {
			got = append(got, e)
		}
	}
	if len(got) != len(want) {
		for _, e := range got {
			t.Logf("%+v", e)
		}
		t.Fatalf("%d Toxiproxy entries in the audit trail, want %d", len(got), len(want))
	}
	for i, w := range want {
		e := got[i]
		if !strings.HasPrefix(e.Statement, w.prefix) || e.Code != w.code || e.Surface != wlm.SurfaceHTTP || e.User != "token" || e.Addr == "" {
			t.Errorf("entry %d = %+v, want %q code %q from http/token", i, e, w.prefix, w.code)
		}
	}
	// The link the proxy made and dropped is audited too, as the console's
	// CREATE LINK would be.
	links := 0
	for _, e := range s.mgr.Service().Audit() {
		if strings.Contains(e.Statement, `LINK`) && strings.Contains(e.Statement, `"aud"`) {
			links++
		}
	}
	if links != 2 {
		t.Errorf("%d link changes for the proxy audited, want 2 (create, drop)", links)
	}
}
