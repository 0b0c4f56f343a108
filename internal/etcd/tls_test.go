package etcd

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// writePair writes a self-signed certificate and its key, PEM, under
// dir and returns their paths.
func writePair(t *testing.T, dir, name string) (cert, key string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC), NotAfter: time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kd, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	cert, key = filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem")
	if err := os.WriteFile(cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(key, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kd}), 0o600); err != nil {
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

	if tc, err := (Config{}).tlsConfig(); tc != nil || err != nil {
		t.Fatalf("no TLS files: %v, %v", tc, err)
	}
	tc, err := Config{CAFile: ca, CertFile: cert, KeyFile: key}.tlsConfig()
	if err != nil {
		t.Fatal(err)
	}
	if tc.RootCAs == nil || len(tc.Certificates) != 1 || tc.MinVersion != tls.VersionTLS12 {
		t.Fatalf("TLS config %+v", tc)
	}
	if tc, err := (Config{CAFile: ca}).tlsConfig(); err != nil || tc.RootCAs == nil || len(tc.Certificates) != 0 {
		t.Fatalf("CA only: %+v, %v", tc, err)
	}
	for _, tt := range []struct {
		name string
		c    Config
		want string
	}{
		{"missing CA", Config{CAFile: filepath.Join(dir, "none.pem")}, "etcd TLS CA"},
		{"CA not PEM", Config{CAFile: notPEM}, "no certificate found"},
		{"cert without key", Config{CertFile: cert}, "both"},
		{"key without cert", Config{KeyFile: key}, "both"},
		{"mismatched key", Config{CertFile: cert, KeyFile: otherKey}, "client certificate"},
	} {
		if _, err := tt.c.tlsConfig(); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want an error with %q", tt.name, err, tt.want)
		}
	}
}
