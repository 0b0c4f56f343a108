package httpapi

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// CookieName is the cookie the page's ?token= sets.
const CookieName = "sluice_token"

// CheckExposure refuses to serve the API on a non-loopback address
// without a token. A listen address without a host ("":8474") listens on
// every interface and so needs a token too.
func CheckExposure(listen, token string) error {
	if token != "" {
		return nil
	}
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return fmt.Errorf("--http: bad listen address %q: want host:port", listen)
	}
	if !isLoopback(host) {
		return fmt.Errorf("HTTP API on non-loopback address %s needs a token (SLUICE_HTTP_TOKEN or http.token)", listen)
	}
	return nil
}

// loopbackListen refuses a proxy listen address that is not loopback:
// without a token the API may not open a port that others can reach (a
// port in front of a password-less admin console, say). An address
// without a host (":8474") listens on every interface.
func loopbackListen(listen string) error {
	host, _, err := net.SplitHostPort(listen)
	if err != nil || !isLoopback(host) {
		return fmt.Errorf("without a token (SLUICE_HTTP_TOKEN or http.token) proxies listen on loopback addresses only; set a token to listen on %s", listen)
	}
	return nil
}

// isLoopback reports whether host is "localhost" or a loopback IP.
func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

// cookieValue is what the cookie holds: a digest of the token, so the
// token itself is not stored in the browser.
func cookieValue(token string) string {
	sum := sha256.Sum256([]byte("sluice dashboard cookie\x00" + token))
	return hex.EncodeToString(sum[:])
}

func equal(a, b string) bool { return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }

func safeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

// RequestHeader marks a state-changing request as sent by a program or by
// a page's script, not by a form: a page of another site can add it only
// after a CORS preflight, which sluice never grants. Any value will do.
const RequestHeader = "X-Sluice-Request"

// checkForgery refuses a state-changing request that a browser may have
// sent for another site (see the package documentation): one whose Origin
// names another host; and a POST, PUT or PATCH that is neither JSON nor
// marked with RequestHeader and bears a mark of a browser. DELETE needs
// only the Origin test: no form sends it, and a page of another site can
// send it only after a preflight.
func checkForgery(r *http.Request) *Error {
	if safeMethod(r.Method) {
		return nil
	}
	if o := r.Header.Get("Origin"); o != "" {
		u, err := url.Parse(o)
		if err != nil || !strings.EqualFold(u.Host, r.Host) {
			return &Error{Status: http.StatusForbidden, Message: fmt.Sprintf("cross-origin request from %s refused", o)}
		}
	}
	if r.Method == http.MethodDelete || isJSON(r.Header.Get("Content-Type")) || r.Header.Get(RequestHeader) != "" || !fromBrowser(r) {
		return nil
	}
	return &Error{Status: http.StatusForbidden, Message: "request refused as a possible cross-site forgery: a browser's request that changes something must be JSON (Content-Type: application/json) or carry the " + RequestHeader + " header"}
}

// isJSON reports whether a Content-Type is application/json, with or
// without parameters.
func isJSON(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && mt == "application/json"
}

// fromBrowser reports whether r bears a header that browsers put on the
// requests they send and programs such as curl, Go's net/http and
// Toxiproxy's client do not: Origin, Referer, Sec-Fetch-Site or
// Sec-Fetch-Mode (which no script can set), or a User-Agent starting with
// "Mozilla/" (which Toxiproxy itself refuses).
func fromBrowser(r *http.Request) bool {
	h := r.Header
	return h.Get("Origin") != "" || h.Get("Referer") != "" || h.Get("Sec-Fetch-Site") != "" || h.Get("Sec-Fetch-Mode") != "" ||
		strings.HasPrefix(r.UserAgent(), "Mozilla/")
}

// authorize checks a request, and answers the page's ?token= itself (a
// cookie and a redirect); it returns the error to send, or nil to go on.
func (s *Server) authorize(w http.ResponseWriter, r *http.Request) *Error {
	if e := checkForgery(r); e != nil {
		return e
	}
	if s.token == "" {
		// Without a token the API listens on loopback only; answering
		// other host names too would let a web page reach it through DNS
		// rebinding.
		host := r.Host
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		if !isLoopback(host) {
			return &Error{Status: http.StatusForbidden, Message: fmt.Sprintf("host %q refused: without a token the API answers loopback names only (localhost, 127.0.0.1, [::1])", r.Host)}
		}
		return nil
	}
	if a := r.Header.Get("Authorization"); a != "" {
		scheme, cred, _ := strings.Cut(a, " ")
		switch {
		case strings.EqualFold(scheme, "Bearer") && s.tokenOK(strings.TrimSpace(cred)):
			return nil
		case strings.EqualFold(scheme, "Basic"):
			if _, pw, ok := r.BasicAuth(); ok && s.tokenOK(pw) {
				return nil
			}
		}
		return &Error{Status: http.StatusUnauthorized, Message: "unauthorized: bad token"}
	}
	if safeMethod(r.Method) {
		if c, err := r.Cookie(CookieName); err == nil && equal(c.Value, cookieValue(s.token)) {
			return nil
		}
		if t := r.URL.Query().Get("token"); t != "" && r.URL.Path == "/" {
			if !equal(t, s.token) {
				return &Error{Status: http.StatusUnauthorized, Message: "unauthorized: bad token"}
			}
			http.SetCookie(w, &http.Cookie{
				Name: CookieName, Value: cookieValue(s.token), Path: "/",
				HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
			})
			http.Redirect(w, r, "/", http.StatusSeeOther)
			return errHandled
		}
	}
	return &Error{Status: http.StatusUnauthorized, Message: "unauthorized: send Authorization: Bearer TOKEN (or open the page as /?token=TOKEN)"}
}

// tokenOK reports whether cred is the API's token or the fleet's.
func (s *Server) tokenOK(cred string) bool {
	return equal(cred, s.token) || s.fleetToken != "" && equal(cred, s.fleetToken)
}

// errHandled tells ServeHTTP that authorize has answered the request.
var errHandled = &Error{}
