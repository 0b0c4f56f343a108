package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2/client"

	"github.com/sluicelab/sluice/internal/httpapi"
	"github.com/sluicelab/sluice/internal/session"
)

type apiError struct {
	Status  int    `json:"status"`
	Message string `json:"error"`
	Field   string `json:"field"`
	Code    string `json:"code"`
}

func decodeError(t *testing.T, body []byte) apiError {
	t.Helper()
	var e apiError
	if err := json.Unmarshal(body, &e); err != nil || e.Message == "" {
		t.Fatalf("error body %q is not a JSON error (%v)", body, err)
	}
	return e
}

// TestCatalogAPI runs the catalog endpoints step by step: each step is a
// request, the status it must get and, for errors, the field the error
// must name and a word its message must contain.
func TestCatalogAPI(t *testing.T) {
	s := newStack(t, stackOptions{})
	steps := []struct {
		method, path string
		body         any
		status       int
		field        string // for errors
		contains     string // in the body
	}{
		{"GET", "/api/links", nil, 200, "", `"default"`},
		{"POST", "/api/links", map[string]any{"name": "wan", "capacity": "1Gbit", "delay": "10ms", "jitter": -1}, 400, "jitter", "jitter"},
		{"POST", "/api/links", map[string]any{"name": "wan", "capacity": "1Gbit", "delay": "10ms"}, 201, "", `"capacity": "125MB/s"`},
		{"POST", "/api/links", map[string]any{"name": "wan"}, 409, "name", "already exists"},
		{"POST", "/api/links", map[string]any{"capacity": "1Gbit"}, 400, "name", "name"},
		{"POST", "/api/links", map[string]any{"name": "x", "delay": "ten"}, 400, "delay", "delay"},
		{"POST", "/api/links", map[string]any{"name": "x", "bogus": "1"}, 400, "bogus", "bogus"},
		{"POST", "/api/links", map[string]any{"name": "x", "delay": map[string]any{}}, 400, "delay", "object"},
		{"POST", "/api/links", `{"name": "x",`, 400, "", "bad request body"},
		{"PATCH", "/api/links/wan", map[string]any{"delay": nil, "jitter": "2ms", "routes": []string{"ignored"}}, 200, "", `"jitter": "2ms"`},
		{"PATCH", "/api/links/wan", map[string]any{}, 400, "", "nothing to change"},
		{"PATCH", "/api/links/wan", map[string]any{"name": "other", "delay": "1ms"}, 400, "name", "renaming"},
		{"PATCH", "/api/links/missing", map[string]any{"delay": "1ms"}, 404, "name", "does not exist"},
		{"GET", "/api/links/wan", nil, 200, "", `"name": "wan"`},
		{"GET", "/api/links/missing", nil, 404, "", "does not exist"},
		{"POST", "/api/rules", map[string]any{"name": "r1", "bandwidth": 128, "elapsedtime": 60, "action": "penalty"}, 201, "", `"action": "penalty"`},
		{"POST", "/api/rules", map[string]any{"name": "r2", "action": "penalty"}, 400, "name", "threshold"},
		{"POST", "/api/rules", map[string]any{"name": "r2", "bandwidth": 1, "action": "explode"}, 400, "action", "action"},
		{"POST", "/api/rules", map[string]any{"name": "r2", "bandwidth": 1, "cputime": 10}, 400, "cputime", "cputime"},
		{"POST", "/api/pools", map[string]any{"name": "rp", "except_rule": []string{"nope"}}, 400, "except_rule", "nope"},
		{"POST", "/api/pools", map[string]any{"name": "rp", "except_rule": []string{"r1"}, "network_priority": "low", "weight": 3}, 201, "", `"network_priority": "low"`},
		{"POST", "/api/pools", map[string]any{"name": "rp2", "weight": 0}, 400, "weight", "weight"},
		{"POST", "/api/pools", map[string]any{"name": "rp2", "active_statements": 0}, 400, "active_statements", "active_statements"},
		{"POST", "/api/pools", map[string]any{"name": "rp2", "active_statements": 4, "queue_timeout": "30s"}, 201, "", `"active_statements": 4`},
		{"GET", "/api/pools/rp2", nil, 200, "", `"queue_timeout": "30s"`},
		{"PATCH", "/api/pools/rp2", map[string]any{"active_statements": nil, "running": 9}, 200, "", `"active_statements": -1`},
		{"DELETE", "/api/pools/rp2", nil, 204, "", ""},
		{"POST", "/api/rules", map[string]any{"name": "rq", "blocktime": 2.5}, 201, "", `"blocktime": 2.5`},
		{"POST", "/api/rules", map[string]any{"name": "rq2", "blocktime": 2, "elapsedtime": 1}, 400, "name", "blocktime"},
		{"DELETE", "/api/rules/rq", nil, 204, "", ""},
		{"PATCH", "/api/links/wan", map[string]any{"max_active_statements": 16}, 200, "", `"max_active_statements": 16`},
		{"POST", "/api/users", map[string]any{"name": "u1", "resource_pool": "nope"}, 400, "resource_pool", "nope"},
		{"POST", "/api/users", map[string]any{"name": "u1", "resource_pool": "rp", "password": "x"}, 400, "password", "password"},
		{"POST", "/api/users", map[string]any{"name": "u1", "resource_pool": "rp"}, 201, "", `"resource_pool": "rp"`},
		{"GET", "/api/pools/rp", nil, 200, "", `"u1"`},
		{"GET", "/api/rules/r1", nil, 200, "", `"rp"`},
		{"DELETE", "/api/pools/rp", nil, 409, "name", "depend"},
		{"DELETE", "/api/pools/rp?cascade=maybe", nil, 400, "cascade", "cascade"},
		{"PATCH", "/api/users/u1", map[string]any{"resource_pool": nil}, 200, "", `"resource_pool": ""`},
		{"DELETE", "/api/pools/rp", nil, 204, "", ""},
		{"DELETE", "/api/pools/rp", nil, 404, "name", "does not exist"},
		{"DELETE", "/api/links/default", nil, 409, "name", "always exists"},
		{"GET", "/api/settings", nil, 200, "", "low_priority_bandwidth"},
		{"GET", "/api/settings/network_control", nil, 200, "", `"value": "on"`},
		{"GET", "/api/settings/bogus", nil, 404, "", "bogus"},
		{"PATCH", "/api/settings/low_priority_bandwidth", map[string]any{"value": "128MB"}, 200, "", `"value": "128MB/s"`},
		{"PATCH", "/api/settings/low_priority_bandwidth", map[string]any{"value": "fast"}, 400, "value", "fast"},
		{"PATCH", "/api/settings/low_priority_bandwidth", map[string]any{"val": "1MB"}, 400, "val", "val"},
		{"PATCH", "/api/settings", map[string]any{"network_control": false, "except_check_period": "100ms"}, 200, "", `"value": "off"`},
		{"PATCH", "/api/settings", map[string]any{"no_such_setting": 1}, 400, "no_such_setting", "no_such_setting"},
		{"DELETE", "/api/settings/network_control", nil, 204, "", ""},
		{"GET", "/api/settings/network_control", nil, 200, "", `"value": "on"`},
		{"DELETE", "/api/sessions", nil, 405, "", "not allowed"},
		{"GET", "/api/nothing", nil, 404, "", "no such resource"},
		// Names are quoted identifiers: any text is a name, none is SQL.
		{"POST", "/api/links", map[string]any{"name": `a"); DROP LINK "wan`, "delay": "1ms'); --"}, 400, "delay", "delay"},
		{"POST", "/api/links", map[string]any{"name": `a"); DROP LINK "wan`}, 201, "", `DROP LINK`},
		{"GET", "/api/links/wan", nil, 200, "", `"wan"`},
	}
	for i, st := range steps {
		code, body := s.do(t, st.method, st.path, st.body)
		if code != st.status {
			t.Fatalf("step %d: %s %s: status %d, want %d: %s", i, st.method, st.path, code, st.status, body)
		}
		if !strings.Contains(string(body), st.contains) {
			t.Fatalf("step %d: %s %s: body %s does not contain %q", i, st.method, st.path, body, st.contains)
		}
		if code >= 400 {
			e := decodeError(t, body)
			if e.Field != st.field {
				t.Fatalf("step %d: %s %s: error names field %q, want %q: %s", i, st.method, st.path, e.Field, st.field, body)
			}
			if e.Status != code {
				t.Fatalf("step %d: error body status %d, HTTP status %d", i, e.Status, code)
			}
			if st.field != "" && st.field != "name" && !strings.Contains(e.Message, st.field) && !strings.Contains(e.Message, st.contains) {
				t.Fatalf("step %d: message %q names neither the field %q nor %q", i, e.Message, st.field, st.contains)
			}
		}
	}
}

// TestAuth checks the token rule: every endpoint wants the token, given
// as a bearer token, as a Basic password, or (for GET) as the cookie the
// page's ?token= sets.
func TestAuth(t *testing.T) {
	s := newStack(t, stackOptions{token: "s3cret"})
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(path string, set func(*http.Request)) *http.Response {
		req, _ := http.NewRequest("GET", s.url+path, nil)
		if set != nil {
			set(req)
		}
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	for _, path := range []string{"/", "/metrics", "/api/links", "/api/snapshot", "/proxies", "/version", "/static/app.js", "/nothing"} {
		resp := get(path, nil)
		if resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
			t.Fatalf("GET %s without a token: %d %q", path, resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
		}
	}
	cases := []struct {
		name string
		set  func(*http.Request)
		want int
	}{
		{"bearer", func(r *http.Request) { r.Header.Set("Authorization", "Bearer s3cret") }, 200},
		{"bad bearer", func(r *http.Request) { r.Header.Set("Authorization", "Bearer nope") }, 401},
		{"basic", func(r *http.Request) { r.SetBasicAuth("anyone", "s3cret") }, 200},
		{"bad basic", func(r *http.Request) { r.SetBasicAuth("s3cret", "nope") }, 401},
		{"query token elsewhere", func(r *http.Request) { r.URL.RawQuery = "token=s3cret" }, 401},
	}
	for _, c := range cases {
		if resp := get("/api/links", c.set); resp.StatusCode != c.want {
			t.Errorf("%s: status %d, want %d", c.name, resp.StatusCode, c.want)
		}
	}
	if resp := get("/?token=nope", nil); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("/?token=bad: %d", resp.StatusCode)
	}
	resp := get("/?token=s3cret", nil)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/" {
		t.Fatalf("/?token=good: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	var cookie *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == httpapi.CookieName {
			cookie = c
		}
	}
	if cookie == nil || !cookie.HttpOnly || cookie.SameSite != http.SameSiteStrictMode || strings.Contains(cookie.Value, "s3cret") {
		t.Fatalf("cookie = %+v", cookie)
	}
	withCookie := func(r *http.Request) { r.AddCookie(cookie) }
	for _, path := range []string{"/", "/static/app.js", "/api/snapshot"} {
		if resp := get(path, withCookie); resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s with the cookie: %d", path, resp.StatusCode)
		}
	}
	// The cookie does not authorise changes.
	req, _ := http.NewRequest("POST", s.url+"/api/links", strings.NewReader(`{"name":"x"}`))
	req.AddCookie(cookie)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("POST with only the cookie: %v %v", resp.StatusCode, err)
	}
	// A browser's cross-origin POST is refused even with a token.
	req, _ = http.NewRequest("POST", s.url+"/api/links", strings.NewReader(`{"name":"x"}`))
	req.Header.Set("Authorization", "Bearer s3cret")
	req.Header.Set("Origin", "http://evil.example")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("cross-origin POST: %v %v", resp.StatusCode, err)
	}
}

// TestCrossSiteForgery checks the rule against requests a browser can
// be made to send for another site: a form-style or text/plain POST is
// refused when it bears any mark of a browser, with a token (the browser
// may hold the Basic credentials) or without; JSON, the X-Sluice-Request
// header, and programs that send no browser mark pass.
func TestCrossSiteForgery(t *testing.T) {
	const (
		browser = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 Safari/537.36"
		form    = "application/x-www-form-urlencoded"
		text    = "text/plain;charset=UTF-8"
	)
	type hdr = map[string]string
	cases := []struct {
		name         string
		method, path string
		header       hdr
		status       int
	}{
		{"form, cross-site Origin", "POST", "/api/links", hdr{"Content-Type": form, "Origin": "http://evil.example", "User-Agent": browser}, 403},
		{"JSON, cross-site Origin", "POST", "/api/links", hdr{"Content-Type": "application/json", "Origin": "http://evil.example"}, 403},
		{"opaque Origin", "POST", "/api/links", hdr{"Content-Type": text, "Origin": "null"}, 403},
		{"text/plain, no Origin, browser agent", "POST", "/api/links", hdr{"Content-Type": text, "User-Agent": browser}, 403},
		{"text/plain, no Origin, Referer", "POST", "/api/links", hdr{"Content-Type": text, "Referer": "http://evil.example/page"}, 403},
		{"form, no Origin, Sec-Fetch-Site", "POST", "/api/links", hdr{"Content-Type": form, "Sec-Fetch-Site": "cross-site"}, 403},
		{"multipart, no Origin, Sec-Fetch-Mode", "POST", "/proxies", hdr{"Content-Type": "multipart/form-data; boundary=x", "Sec-Fetch-Mode": "navigate"}, 403},
		{"no type, browser agent", "POST", "/reset", hdr{"User-Agent": browser}, 403},
		{"text/plain, same Origin, browser agent", "PATCH", "/api/settings/network_control", hdr{"Content-Type": text, "Origin": "ORIGIN", "User-Agent": browser}, 403},
		{"JSON lookalike type, browser agent", "POST", "/api/links", hdr{"Content-Type": "application/jsonx", "User-Agent": browser}, 403},
		{"JSON, browser agent", "POST", "/api/links", hdr{"Content-Type": "application/json", "User-Agent": browser}, 201},
		{"JSON with charset, same Origin", "POST", "/api/links", hdr{"Content-Type": "application/json; charset=utf-8", "Origin": "ORIGIN", "User-Agent": browser}, 201},
		{"text/plain with X-Sluice-Request", "POST", "/api/links", hdr{"Content-Type": text, "X-Sluice-Request": "1", "User-Agent": browser, "Referer": "ORIGIN/"}, 201},
		{"text/plain, program", "POST", "/api/links", hdr{"Content-Type": text}, 201},
		{"form, curl", "POST", "/api/links", hdr{"Content-Type": form, "User-Agent": "curl/8.5.0"}, 201},
		{"reset, program", "POST", "/reset", hdr{"Content-Type": "text/plain"}, 204},
		{"DELETE, browser agent", "DELETE", "/api/links/NAME", hdr{"User-Agent": browser}, 204},
		{"DELETE, cross-site Origin", "DELETE", "/api/links/NAME", hdr{"Origin": "http://evil.example", "User-Agent": browser}, 403},
		{"GET, cross-site", "GET", "/api/links", hdr{"Origin": "http://evil.example", "User-Agent": browser, "Sec-Fetch-Site": "cross-site"}, 200},
	}
	for _, token := range []string{"", "tok"} {
		s := newStack(t, stackOptions{token: token})
		origin := s.url
		for i, c := range cases {
			name := "l" + strconv.Itoa(i)
			s.must(t, 201, "POST", "/api/links", map[string]any{"name": name})
			body := `{"name": "n` + strconv.Itoa(i) + `"}`
			if c.path == "/api/settings/network_control" {
				body = `{"value": "off"}`
			}
			req, _ := http.NewRequest(c.method, s.url+strings.ReplaceAll(c.path, "NAME", name), strings.NewReader(body))
			if c.method == "DELETE" || c.path == "/reset" {
				req.Body, req.ContentLength = nil, 0
			}
			for k, v := range c.header {
				req.Header.Set(k, strings.ReplaceAll(v, "ORIGIN", origin))
			}
			if token != "" {
				req.SetBasicAuth("toxiproxy", token)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			out, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != c.status {
				t.Errorf("token %q: %s: %s %s: status %d, want %d: %s", token, c.name, c.method, c.path, resp.StatusCode, c.status, out)
			}
		}
		// A cross-origin fetch with JSON or the header asks first, and
		// sluice never grants the preflight.
		req, _ := http.NewRequest("OPTIONS", s.url+"/api/links", nil)
		req.Header.Set("Origin", "http://evil.example")
		req.Header.Set("Access-Control-Request-Method", "POST")
		req.Header.Set("Access-Control-Request-Headers", "content-type, x-sluice-request")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if a := resp.Header.Get("Access-Control-Allow-Origin"); a != "" || resp.StatusCode < 300 {
			t.Errorf("token %q: preflight answered %d with Access-Control-Allow-Origin %q", token, resp.StatusCode, a)
		}
	}
}

// TestNoTokenLoopbackNames checks that without a token the API answers
// loopback host names only (no DNS rebinding).
func TestNoTokenLoopbackNames(t *testing.T) {
	s := newStack(t, stackOptions{})
	for host, want := range map[string]int{"localhost:8474": 200, "127.0.0.1": 200, "[::1]:1": 200, "evil.example": 403, "10.0.0.1:8474": 403} {
		req, _ := http.NewRequest("GET", s.url+"/api/links", nil)
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("Host %s: status %d, want %d", host, resp.StatusCode, want)
		}
	}
}

func TestCheckExposure(t *testing.T) {
	cases := []struct {
		listen, token string
		ok            bool
	}{
		{"127.0.0.1:8474", "", true},
		{"localhost:8474", "", true},
		{"[::1]:8474", "", true},
		{"0.0.0.0:8474", "", false},
		{":8474", "", false},
		{"192.168.1.5:8474", "", false},
		{"example.com:8474", "", false},
		{"0.0.0.0:8474", "t", true},
		{"nonsense", "", false},
	}
	for _, c := range cases {
		err := httpapi.CheckExposure(c.listen, c.token)
		if (err == nil) != c.ok {
			t.Errorf("CheckExposure(%q, %q) = %v, want ok %v", c.listen, c.token, err, c.ok)
		}
		if err != nil && c.listen != "nonsense" && !strings.Contains(err.Error(), "token") {
			t.Errorf("CheckExposure(%q): message %q does not say a token is needed", c.listen, err)
		}
	}
}

// TestNoTokenProxyListen checks that without a token the Toxiproxy API
// opens loopback listeners only, whichever request asks for one, and
// that with a token it opens any.
func TestNoTokenProxyListen(t *testing.T) {
	const up = `"upstream": "127.0.0.1:1"`
	steps := []struct {
		token        string
		method, path string
		body         string
		status       int
	}{
		{"", "POST", "/proxies", `{"name": "any", "listen": "0.0.0.0:0", ` + up + `}`, 403},
		{"", "POST", "/proxies", `{"name": "any", "listen": ":0", ` + up + `}`, 403},
		{"", "POST", "/proxies", `{"name": "any", "listen": "[::]:0", ` + up + `}`, 403},
		{"", "POST", "/proxies", `{"name": "any", "listen": "example.com:0", ` + up + `}`, 403},
		{"", "POST", "/proxies", `{"name": "lo", "listen": "127.0.0.1:0", ` + up + `}`, 201},
		{"", "POST", "/proxies", `{"name": "host", "listen": "localhost:0", ` + up + `}`, 201},
		{"", "POST", "/proxies", `{"name": "dflt", ` + up + `}`, 201},
		{"", "POST", "/proxies/lo", `{"listen": "0.0.0.0:0"}`, 403},
		{"", "PATCH", "/proxies/lo", `{"listen": ":0", "enabled": true}`, 403},
		{"", "POST", "/proxies/lo", `{"listen": "127.0.0.2:0"}`, 200},
		{"", "POST", "/populate", `[{"name": "p1", "listen": "127.0.0.1:0", ` + up + `}, {"name": "p2", "listen": ":0", ` + up + `}]`, 403},
		{"", "POST", "/populate", `[{"name": "lo", "listen": "0.0.0.0:0", ` + up + `}]`, 403},
		{"t", "POST", "/proxies", `{"name": "any", "listen": "0.0.0.0:0", ` + up + `}`, 201},
		{"t", "POST", "/proxies", `{"name": "lo", "listen": "127.0.0.1:0", ` + up + `}`, 201},
		{"t", "POST", "/proxies/lo", `{"listen": ":0"}`, 200},
	}
	stacks := map[string]*stack{"": newStack(t, stackOptions{}), "t": newStack(t, stackOptions{token: "t"})}
	for i, st := range steps {
		s := stacks[st.token]
		code, body := s.do(t, st.method, st.path, st.body)
		if code != st.status {
			t.Fatalf("step %d: token %q: %s %s %s: status %d, want %d: %s", i, st.token, st.method, st.path, st.body, code, st.status, body)
		}
		if code == 403 && !strings.Contains(decodeError(t, body).Message, "token") {
			t.Fatalf("step %d: refusal %s does not say a token is needed", i, body)
		}
	}
	// Nothing refused was made or moved: the proxies and their
	// listeners are the loopback ones.
	for tok, s := range stacks {
		for _, p := range s.api.Toxics().Proxies() {
			host, _, _ := net.SplitHostPort(p.Listen)
			if ip := net.ParseIP(host); tok == "" && (ip == nil || !ip.IsLoopback()) {
				t.Errorf("without a token, proxy %s listens on %s", p.Name, p.Listen)
			}
			if p.Name == "p1" || p.Name == "p2" {
				t.Errorf("a refused /populate made proxy %s", p.Name)
			}
		}
	}
}

type fakeCanceler struct{ calls int }

func (f *fakeCanceler) Cancel(ctx context.Context) error { f.calls++; return nil }

// TestSessionsAndStatements drives the registry by hand: listing,
// filters, one item, and cancel (202, 409 for an ended statement or a
// session that cannot cancel, 404 for an unknown one).
func TestSessionsAndStatements(t *testing.T) {
	s := newStack(t, stackOptions{})
	now := time.Now()
	a := s.reg.Open(session.Info{Route: "r", Protocol: "postgres", Link: "default", Client: "127.0.0.1:1"}, now)
	a.SetIdentity("alice", "db", "app")
	fc := &fakeCanceler{}
	a.SetCanceler(fc)
	b := s.reg.Open(session.Info{Route: "t", Protocol: "tcp", Link: "default", Client: "127.0.0.1:2"}, now)
	b.SetIdentity("bob", "", "")
	b.SetKind(session.KindReplication)
	run := a.Begin("SELECT pg_sleep(10)", now)
	run.AddDown(1000)
	run.Penalize("except rule r (penalty): elapsed 1s >= 1s")
	done := a.Begin("SELECT 1", now)
	done.End(now.Add(time.Millisecond), session.OK, 1, "")
	tcp := b.Begin("?", now)

	var sessions []httpapi.Session
	json.Unmarshal(s.must(t, 200, "GET", "/api/sessions", nil), &sessions)
	if len(sessions) != 2 || sessions[0].User != "alice" || !sessions[0].Penalized || len(sessions[0].Active) != 1 || sessions[0].Kind != "client" {
		t.Fatalf("sessions = %+v", sessions)
	}
	json.Unmarshal(s.must(t, 200, "GET", "/api/sessions?user=bob", nil), &sessions)
	if len(sessions) != 1 || sessions[0].Route != "t" || sessions[0].Kind != "replication" {
		t.Fatalf("sessions of bob = %+v", sessions)
	}
	json.Unmarshal(s.must(t, 200, "GET", "/api/sessions?kind=replication", nil), &sessions)
	if len(sessions) != 1 || sessions[0].User != "bob" {
		t.Fatalf("replication sessions = %+v", sessions)
	}
	s.must(t, 404, "GET", "/api/sessions/999", nil)
	if e := decodeError(t, s.must(t, 400, "GET", "/api/sessions/x", nil)); e.Field != "id" {
		t.Fatalf("bad id names field %q", e.Field)
	}

	var sts []httpapi.Statement
	json.Unmarshal(s.must(t, 200, "GET", "/api/statements?state=running", nil), &sts)
	if len(sts) != 2 || sts[0].ID != run.ID || !sts[0].Penalized || sts[0].Class != "low" || sts[0].Ended != nil || sts[0].Rows != nil {
		t.Fatalf("running statements = %+v", sts)
	}
	json.Unmarshal(s.must(t, 200, "GET", "/api/statements?state=ended", nil), &sts)
	if len(sts) != 1 || sts[0].State != "ok" || sts[0].Rows == nil || *sts[0].Rows != 1 {
		t.Fatalf("ended statements = %+v", sts)
	}
	if e := decodeError(t, s.must(t, 400, "GET", "/api/statements?state=odd", nil)); e.Field != "state" {
		t.Fatalf("bad state names field %q", e.Field)
	}
	if e := decodeError(t, s.must(t, 400, "GET", "/api/statements?limit=-1", nil)); e.Field != "limit" {
		t.Fatalf("bad limit names field %q", e.Field)
	}

	var one httpapi.Statement
	json.Unmarshal(s.must(t, 202, "POST", "/api/statements/"+itoa(run.ID)+"/cancel", nil), &one)
	if !one.CancelRequested || fc.calls != 1 {
		t.Fatalf("cancel: %+v, %d calls", one, fc.calls)
	}
	s.must(t, 409, "POST", "/api/statements/"+itoa(done.ID)+"/cancel", nil)
	s.must(t, 409, "POST", "/api/statements/"+itoa(tcp.ID)+"/cancel", nil)
	s.must(t, 404, "POST", "/api/statements/12345/cancel", nil)
	s.must(t, 405, "GET", "/api/statements/1/cancel", nil)
	if err := s.reg.Cancel(context.Background(), done); !errors.Is(err, session.ErrNotRunning) {
		t.Fatalf("registry cancel of an ended statement: %v", err)
	}
}

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }

// TestToxiproxyClientWithToken drives the Toxiproxy API through the
// token: Toxiproxy's Go client takes only an address, so the token goes
// in the URL as a Basic password.
func TestToxiproxyClientWithToken(t *testing.T) {
	s := newStack(t, stackOptions{token: "tp"})
	if _, err := toxiproxy.NewClient(s.url).Proxies(); err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("client without the token: %v, want 401", err)
	}
	client, px, _ := s.echoProxy(t, "echo")
	if _, err := px.AddToxic("", "latency", "", 1, toxiproxy.Attributes{"latency": 1}); err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", px.Listen)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte("hi"))
	buf := make([]byte, 2)
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "hi" {
		t.Fatalf("echo through the proxy: %q, %v", buf, err)
	}
	// The proxy's link and route show in the catalog API.
	var links []httpapi.Link
	json.Unmarshal(s.must(t, 200, "GET", "/api/links", nil), &links)
	found := false
	for _, l := range links {
		if l.Name == "echo" && len(l.Routes) == 1 && l.Routes[0] == "echo" {
			found = true
		}
	}
	if !found {
		t.Fatalf("links = %+v, want link echo with route echo", links)
	}
	// Toxiproxy errors carry the field too.
	_, err = px.AddToxic("", "latency", "", 1, toxiproxy.Attributes{"latency": -5})
	if err == nil || !strings.Contains(err.Error(), "latency") {
		t.Fatalf("negative latency: %v", err)
	}
	code, body := s.do(t, "POST", "/proxies/echo/toxics", `{"type":"latency","attributes":{"latncy":5}}`)
	if e := decodeError(t, body); code != 400 || e.Field != "attributes.latncy" {
		t.Fatalf("misspelt attribute: %d %s", code, body)
	}
	// The client sends a proxy update and /reset as text/plain, and a
	// DELETE without a body: the cross-site rule lets them through.
	if err := px.Disable(); err != nil || px.Enabled {
		t.Fatalf("disable: %v (enabled %v)", err, px.Enabled)
	}
	if err := px.Enable(); err != nil || !px.Enabled {
		t.Fatalf("enable: %v (enabled %v)", err, px.Enabled)
	}
	if err := client.ResetState(); err != nil {
		t.Fatalf("reset: %v", err)
	}
	if ts, err := px.Toxics(); err != nil || len(ts) != 0 {
		t.Fatalf("toxics after reset: %v, %v", ts, err)
	}
	if err := px.Delete(); err != nil {
		t.Fatalf("delete: %v", err)
	}
}

func BenchmarkListLinks(b *testing.B) {
	s := newStack(b, stackOptions{})
	for i := range 20 {
		s.must(b, 201, "POST", "/api/links", map[string]any{"name": "l" + strconv.Itoa(i), "delay": "1ms", "capacity": "1Gbit"})
	}
	req := httptest.NewRequest("GET", "/api/links", nil)
	req.Host = "localhost"
	b.ReportAllocs()
	for b.Loop() {
		rec := httptest.NewRecorder()
		s.api.ServeHTTP(rec, req)
		if rec.Code != 200 {
			b.Fatal(rec.Code)
		}
	}
}
