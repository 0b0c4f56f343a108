package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2/client"
	"github.com/jackc/pgx/v5"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/sluicelab/sluice/internal/config"
	"github.com/sluicelab/sluice/internal/httpapi"
	"github.com/sluicelab/sluice/internal/proxy"
	"github.com/sluicelab/sluice/internal/session"
	sstack "github.com/sluicelab/sluice/internal/stack"
	"github.com/sluicelab/sluice/internal/testenv"
	"github.com/sluicelab/sluice/internal/wlm"
)

func testLogger() *slog.Logger { return testenv.Logger(slog.LevelDebug) }

// stack is the stack of sluice serve with the HTTP API on a loopback
// port and no routes.
type stack struct {
	*sstack.Stack
	reg   *session.Registry
	mgr   *wlm.Manager
	srv   *proxy.Server
	api   *httpapi.Server
	url   string // the HTTP API's base URL
	token string
}

type stackOptions struct {
	token string
}

func newStack(t testing.TB, o stackOptions) *stack {
	t.Helper()
	cfg := &config.Config{HTTP: config.HTTP{Listen: "127.0.0.1:0", Token: o.token}}
	st, err := sstack.New(context.Background(), sstack.Options{Config: cfg, Logger: testLogger(), Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return &stack{Stack: st, reg: st.Registry(), mgr: st.Manager(), srv: st.Proxy(), api: st.HTTP(),
		url: "http://" + st.HTTPAddr().String(), token: o.token}
}

// do sends a request with the stack's token, and a body as JSON, and
// returns the status and body.
func (s *stack) do(t testing.TB, method, path string, body any) (int, []byte) {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, s.url+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if s.token != "" {
		req.Header.Set("Authorization", "Bearer "+s.token)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return testenv.Fetch(t, req)
}

// echoProxy creates a proxy named name to a new echo server with
// Toxiproxy's own client, which takes only an address: the stack's token
// goes in the URL as a Basic password. It returns the client, the proxy
// and the echo server's address.
func (s *stack) echoProxy(t testing.TB, name string) (*toxiproxy.Client, *toxiproxy.Proxy, string) {
	t.Helper()
	echo := testenv.Echo(t)
	u, err := url.Parse(s.url)
	if err != nil {
		t.Fatal(err)
	}
	if s.token != "" {
		u.User = url.UserPassword("toxiproxy", s.token)
	}
	client := toxiproxy.NewClient(u.String())
	px, err := client.CreateProxy(name, "", echo)
	if err != nil {
		t.Fatal(err)
	}
	return client, px, echo
}

// must sends a request and fails the test unless the status is want.
func (s *stack) must(t testing.TB, want int, method, path string, body any) []byte {
	t.Helper()
	code, out := s.do(t, method, path, body)
	if code != want {
		t.Fatalf("%s %s: status %d, want %d: %s", method, path, code, want, out)
	}
	return out
}

// addPGRoute starts a postgres route to the server of url on link and
// returns the URL that goes through it.
func (s *stack) addPGRoute(t testing.TB, url, name, link string) string {
	t.Helper()
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	up := net.JoinHostPort(cfg.Host, fmt.Sprint(cfg.Port))
	addr, err := s.AddRoute(sstack.Route{Route: config.Route{Name: name, Listen: "127.0.0.1:0", Upstream: up, Protocol: "postgres", Link: link, DialTimeout: 5 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("postgres://%s:%s@%s/%s?sslmode=disable", cfg.User, cfg.Password, addr, cfg.Database)
}

// withUser rewrites the user and password of a PostgreSQL URL.
func withUser(t testing.TB, url, user, password string) string {
	t.Helper()
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("postgres://%s:%s@%s/%s?sslmode=disable", user, password, net.JoinHostPort(cfg.Host, fmt.Sprint(cfg.Port)), cfg.Database)
}

// scrape reads /metrics as Prometheus does.
func (s *stack) scrape(t testing.TB) map[string]*dto.MetricFamily {
	t.Helper()
	body := s.must(t, http.StatusOK, "GET", "/metrics", nil)
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return fams
}

// find returns the metric of family name whose labels include want.
func find(fams map[string]*dto.MetricFamily, name string, want map[string]string) *dto.Metric {
	f := fams[name]
	if f == nil {
		return nil
	}
next:
	for _, m := range f.Metric {
		have := map[string]string{}
		for _, l := range m.Label {
			have[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if have[k] != v {
				continue next
			}
		}
		return m
	}
	return nil
}

func counterValue(fams map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	m := find(fams, name, want)
	if m == nil {
		return 0
	}
	if m.Counter != nil {
		return m.Counter.GetValue()
	}
	if m.Gauge != nil {
		return m.Gauge.GetValue()
	}
	return m.Untyped.GetValue()
}
