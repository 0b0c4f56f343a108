package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/sluicelab/sluice/internal/config"
	"github.com/sluicelab/sluice/internal/fleet"
	"github.com/sluicelab/sluice/internal/httpapi"
	"github.com/sluicelab/sluice/internal/session"
	sstack "github.com/sluicelab/sluice/internal/stack"
	"github.com/sluicelab/sluice/internal/testenv"
)

// TestFleetEndpoints: without etcd the fleet is this instance alone;
// the fleet's token is accepted beside the API's; the views the others
// gather and the cluster-wide views carry their columns (the latter an
// instance column first); a forwarded session command is answered (with
// whether the id names a session here) and audited with the forwarding
// instance as the actor.
func TestFleetEndpoints(t *testing.T) {
	cfg := &config.Config{HTTP: config.HTTP{Listen: "127.0.0.1:0", Token: "api"}, Fleet: config.Fleet{Name: "solo", Token: "fleet"}}
	st, err := sstack.New(context.Background(), sstack.Options{Config: cfg, Logger: testLogger(), Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	base := "http://" + st.HTTPAddr().String()
	send := func(method, path, token string, header map[string]string) (int, []byte) {
		req, _ := http.NewRequest(method, base+path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		for k, v := range header {
			req.Header.Set(k, v)
		}
		return testenv.Fetch(t, req)
	}
	tests := []struct {
		name, method, path, token string
		status                    int
	}{
		{"instances with the fleet token", "GET", "/api/instances", "fleet", 200},
		{"instances with the API token", "GET", "/api/instances", "api", 200},
		{"a wrong token", "GET", "/api/instances", "nope", 401},
		{"views of a name", "GET", "/api/views?name=sessions&name=statements", "fleet", 200},
		{"views without a name", "GET", "/api/views", "fleet", 400},
		{"views of an unknown name", "GET", "/api/views?name=nope", "fleet", 400},
		{"cluster views", "GET", "/api/cluster/views?name=pg_session_wlmstat", "api", 200},
		{"forward to an unknown instance", "POST", "/api/sessions/3/cancel?instance=ghost", "api", 404},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if status, body := send(tt.method, tt.path, tt.token, nil); status != tt.status {
				t.Fatalf("%s %s = %d %s, want %d", tt.method, tt.path, status, body, tt.status)
			}
		})
	}

	_, body := send("GET", "/api/instances", "fleet", nil)
	var list []fleet.Instance
	if err := json.Unmarshal(body, &list); err != nil || len(list) != 1 || !list[0].Self || list[0].Name != "solo" || list[0].HTTPAddr != st.HTTPAddr().String() {
		t.Fatalf("GET /api/instances = %s, want solo alone, with its HTTP address", body)
	}

	_, body = send("GET", "/api/views?name=sessions", "fleet", nil)
	var views fleet.ViewsAnswer
	if err := json.Unmarshal(body, &views); err != nil || views.Instance != "solo" || !slices.Contains(views.Tables["sessions"].Columns, "id") {
		t.Fatalf("GET /api/views = %s", body)
	}

	_, body = send("GET", "/api/cluster/views?name=sessions", "fleet", nil)
	var cl httpapi.ClusterAnswer
	if err := json.Unmarshal(body, &cl); err != nil || cl.Tables["sessions"].Columns[0] != "instance" || cl.Notices == nil {
		t.Fatalf("GET /api/cluster/views = %s, want an instance column and a notices list", body)
	}

	status, body := send("POST", "/api/sessions/999/terminate", "fleet", map[string]string{fleet.InstanceHeader: "peer", "Content-Type": "application/json"})
	var ans fleet.SessionAnswer
	if err := json.Unmarshal(body, &ans); status != 200 || err != nil || ans.Done || ans.Session != 999 || !ans.Missing {
		t.Fatalf("terminate of no session = %d %s, want 200 done false, missing true", status, body)
	}
	// A session with nothing to act on is there: missing false.
	idle := st.Manager().Runtime().Registry().Open(session.Info{Route: "r", Protocol: "postgres"}, time.Now())
	defer idle.Close(time.Now())
	status, body = send("POST", "/api/sessions/"+strconv.FormatUint(idle.ID, 10)+"/cancel", "fleet", map[string]string{fleet.InstanceHeader: "peer", "Content-Type": "application/json"})
	ans = fleet.SessionAnswer{}
	if err := json.Unmarshal(body, &ans); status != 200 || err != nil || ans.Done || ans.Missing {
		t.Fatalf("cancel of an idle session = %d %s, want 200 done false, missing false", status, body)
	}
	found := false
	for _, e := range st.Manager().Service().Audit() {
		if e.Statement == "TERMINATE SESSION 999" && e.Surface == "http" && e.User == "instance:peer" {
			found = true
		}
	}
	if !found {
		t.Fatalf("no audit entry of the forwarded terminate: %+v", st.Manager().Service().Audit())
	}
}
