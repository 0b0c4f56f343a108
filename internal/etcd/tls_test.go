package etcd_test

import (
	"crypto/tls"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicelab/sluice/internal/etcd"
	"github.com/sluicelab/sluice/internal/testenv"
)

// writePair writes a fresh self-signed certificate and its key, PEM,
// under dir and returns their paths.
func writePair(t *testing.T, dir, name string) (cert, key string) {
	t.Helper()
	c := testenv.SelfSigned(t)
	cert, key = filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem")
	if err := os.WriteFile(cert, c.CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(key, c.KeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return cert, key
}

// TestTLSConfig: no TLS file dials in the clear; a CA file becomes the
// only root; a client pair is presented; a missing file, a CA file with
// no certificate, half a pair and a key that does not match are errors
// naming what is wrong.
func TestTLSConfig(t *testing.T) {
	dir := t.TempDir()
	ca, _ := writePair(t, dir, "ca")
	cert, key := writePair(t, dir, "client")
	_, otherKey := writePair(t, dir, "other")
	notPEM := filepath.Join(dir, "not.pem")
	os.WriteFile(notPEM, []byte("hello"), 0o600)

	if tc, err := etcd.TLSConfig(etcd.Config{}); tc != nil || err != nil {
		t.Fatalf("no TLS files: %v, %v", tc, err)
	}
	tc, err := etcd.TLSConfig(etcd.Config{CAFile: ca, CertFile: cert, KeyFile: key})
	if err != nil {
		t.Fatal(err)
	}
	if tc.RootCAs == nil || len(tc.Certificates) != 1 || tc.MinVersion != tls.VersionTLS12 {
		t.Fatalf("TLS config %+v", tc)
	}
	if tc, err := etcd.TLSConfig(etcd.Config{CAFile: ca}); err != nil || tc.RootCAs == nil || len(tc.Certificates) != 0 {
		t.Fatalf("CA only: %+v, %v", tc, err)
	}
	for _, tt := range []struct {
		name string
		c    etcd.Config
		want string
	}{
		{"missing CA", etcd.Config{CAFile: filepath.Join(dir, "none.pem")}, "etcd TLS CA"},
		{"CA not PEM", etcd.Config{CAFile: notPEM}, "no certificate found"},
		{"cert without key", etcd.Config{CertFile: cert}, "both"},
		{"key without cert", etcd.Config{KeyFile: key}, "both"},
		{"mismatched key", etcd.Config{CertFile: cert, KeyFile: otherKey}, "client certificate"},
	} {
		if _, err := etcd.TLSConfig(tt.c); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want an error with %q", tt.name, err, tt.want)
		}
	}
}
