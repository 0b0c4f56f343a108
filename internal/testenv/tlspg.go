package testenv

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluicelab/sluice/internal/clock"
	"github.com/sluicelab/sluice/internal/lab/pgtemp"
)

// Cert is a self-signed server certificate for 127.0.0.1, valid for an
// hour either side of its creation.
type Cert struct {
	CertPEM, KeyPEM []byte
	// CAFile is a file holding CertPEM, for configurations that name a
	// CA file; it lives in the test's temporary directory.
	CAFile string
	// Pool trusts the certificate.
	Pool *x509.CertPool
	// Server is a TLS server configuration presenting the certificate.
	Server *tls.Config
}

// SelfSigned returns a fresh self-signed certificate for 127.0.0.1.
func SelfSigned(t testing.TB) *Cert {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := clock.Real{}.Now()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "sluice test"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(time.Hour),
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	c := &Cert{
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
		CAFile:  filepath.Join(t.TempDir(), "ca.pem"),
		Pool:    x509.NewCertPool(),
		Server:  &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key, Leaf: cert}}},
	}
	c.Pool.AddCert(cert)
	if err := os.WriteFile(c.CAFile, c.CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return c
}

// ServerSSL reports whether the server's end of conn uses TLS, as
// pg_stat_ssl says; a failed query fails t.
func ServerSSL(t testing.TB, conn *pgx.Conn) bool {
	t.Helper()
	var ssl bool
	if err := conn.QueryRow(context.Background(), "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()").Scan(&ssl); err != nil {
		t.Fatalf("read pg_stat_ssl: %v", err)
	}
	return ssl
}

// TLSPostgres is a throwaway PostgreSQL of one test with TLS on.
type TLSPostgres struct {
	// URL connects as the superuser over TLS, verifying the certificate
	// (sslmode=verify-full, sslrootcert=Cert.CAFile).
	URL string
	// Addr is the server's host:port on loopback.
	Addr string
	// Cert is the server's certificate.
	Cert *Cert
}

// StartTLSPostgres starts a PostgreSQL of the test's own from the
// installed server binaries (initdb into a temporary directory, a free
// loopback port, ssl = on with a fresh self-signed certificate) and stops
// it when the test ends. Plain connections are accepted too, so a test
// can tell which one a client made (pg_stat_ssl). The shared servers are
// left alone. Missing binaries fail the test under CI=true and skip it
// elsewhere.
func StartTLSPostgres(t testing.TB) *TLSPostgres {
	t.Helper()
	if _, err := pgtemp.FindBinaries(""); err != nil {
		Missing(t, "%v", err)
		return nil
	}
	cert := SelfSigned(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv, err := pgtemp.Start(ctx, pgtemp.Options{CertPEM: cert.CertPEM, KeyPEM: cert.KeyPEM})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Errorf("stop TLS PostgreSQL: %v", err)
		}
	})
	cfg, err := pgx.ParseConfig(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port)))
	u, err := url.Parse(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("sslmode", "verify-full")
	q.Set("sslrootcert", cert.CAFile)
	u.RawQuery = q.Encode()
	return &TLSPostgres{URL: u.String(), Addr: addr, Cert: cert}
}
