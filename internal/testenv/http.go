package testenv

import (
	"io"
	"net/http"
	"testing"
)

// Fetch sends req with the default client and returns the response's
// status and its whole body; a request that gets no response, or a body
// that cannot be read, fails t.
func Fetch(t testing.TB, req *http.Request) (int, []byte) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, body
}
