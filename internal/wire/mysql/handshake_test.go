package mysql

import (
	"bytes"
	"encoding/hex"
	"strings"
	"testing"
)

// Captured from MariaDB 10.11 and go-sql-driver 1.10 (headers included).
var (
	mariadbGreeting = mustHex("640000000a352e352e352d31302e31312e31392d4d6172696144422d302b646562313275310086010000523e7d7b74552c7700fef7080200ff81150000000000001d00000037494b7b4c49674b22645456006d7973716c5f6e61746976655f70617373776f726400")
	goDriverResp    = mustHex("b30000018ca23a01000000002d0000000000000000000000000000000000000010000000736c7569636500145e81533fd2663efcf1918871ea5daa389136455c736c75696365006d7973716c5f6e61746976655f70617373776f726400590c5f636c69656e745f6e616d650f476f2d4d7953514c2d447269766572035f6f73056c696e7578095f706c6174666f726d05616d643634045f7069640533313738320c5f7365727665725f686f7374093132372e302e302e31")
	// A MySQL 8.0 greeting (CLIENT_MYSQL set, caching_sha2_password).
	mysql8Greeting = mustHex("4a0000000a382e302e33360008000000201a3a0b6a2e6e3800ffffff0200ffdf15000000000000000000004b2a0a0f3c6e233e1d2b70350063616368696e675f736861325f70617373776f726400")
)

func mustHex(s string) []byte {
	b, err := hex.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return b
}

func TestParseGreeting(t *testing.T) {
	tests := []struct {
		name    string
		p       []byte
		version string
		connID  uint32
		plugin  string
		ext     uint32
		ssl     bool
	}{
		{"mariadb", mariadbGreeting[4:], "5.5.5-10.11.19-MariaDB-0+deb12u1", 0x186, "mysql_native_password", 0x1d, false},
		{"mysql 8", mysql8Greeting[4:], "8.0.36", 8, "caching_sha2_password", 0, true},
		{"sluice", ownGreeting([20]byte{1, 2, 3}, false)[4:], "5.5.5-sluice", 0, "mysql_native_password", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, err := parseGreeting(tt.p)
			if err != nil {
				t.Fatal(err)
			}
			if g.version != tt.version || g.connID != tt.connID || g.plugin != tt.plugin || g.ext != tt.ext ||
				(g.caps&capSSL != 0) != tt.ssl || g.caps&capProtocol41 == 0 {
				t.Fatalf("%+v", g)
			}
			for _, offer := range []bool{true, false} {
				p := bytes.Clone(tt.p)
				caps, _ := patchGreeting(p, g, offer)
				g2, err := parseGreeting(p)
				if err != nil {
					t.Fatal(err)
				}
				if g2.caps != caps || (caps&capSSL != 0) != offer || caps&capsDroppedFromGreeting != 0 ||
					g2.version != g.version || g2.connID != g.connID || g2.plugin != g.plugin {
					t.Fatalf("offer %v: %+v after patching", offer, g2)
				}
				// Nothing but capability bits changed.
				diff := 0
				for i := range p {
					if p[i] != tt.p[i] {
						diff++
					}
				}
				if diff > 4 {
					t.Fatalf("patch changed %d bytes", diff)
				}
			}
		})
	}
}

func TestParseGreetingErrors(t *testing.T) {
	for _, p := range [][]byte{nil, {9}, {10, 'x'}, {10, '5', 0, 1, 2}, mariadbGreeting[4:40]} {
		if _, err := parseGreeting(p); err == nil {
			t.Errorf("parseGreeting(%x) succeeded", p)
		}
	}
}

func TestParseResponse(t *testing.T) {
	r, err := parseResponse(goDriverResp[4:])
	if err != nil {
		t.Fatal(err)
	}
	if r.user != "sluice" || r.database != "sluice" || r.plugin != "mysql_native_password" || r.sslOnly ||
		r.ext != extCacheMetadata || r.caps&capDeprecateEOF == 0 {
		t.Fatalf("%+v", r)
	}
	// With a program name, and as an SSL request.
	p := bytes.Clone(goDriverResp[4:])
	attrs := append(lstr("program_name"), lstr("mysql")...)
	i := bytes.Index(p, []byte("mysql_native_password\x00")) + len("mysql_native_password\x00")
	p = append(append(p[:i:i], lenencBytes(uint64(len(attrs)))...), attrs...)
	if r, err := parseResponse(p); err != nil || r.program != "mysql" {
		t.Fatalf("program name: %+v, %v", r, err)
	}
	ssl := sslRequest(goDriverResp[4:], 1)
	if r, err := parseResponse(ssl[4:]); err != nil || !r.sslOnly || ssl[3] != 1 || len(ssl) != 4+responsePrefix {
		t.Fatalf("ssl request: %+v, %v", r, err)
	}
	for _, bad := range [][]byte{nil, {0, 0, 0, 0}, goDriverResp[4:20], goDriverResp[4:40], goDriverResp[4:50]} {
		if _, err := parseResponse(bad); err == nil {
			t.Errorf("parseResponse(%x) succeeded", bad)
		}
	}
}

func TestErrPacket(t *testing.T) {
	b := errPacket(3, 2003, "HY000", "no")
	want := []byte{11, 0, 0, 3, 0xff, 0xd3, 0x07, '#', 'H', 'Y', '0', '0', '0', 'n', 'o'}
	if !bytes.Equal(b, want) {
		t.Fatalf("%x", b)
	}
}

func FuzzParseGreeting(f *testing.F) {
	f.Add(mariadbGreeting[4:])
	f.Add(mysql8Greeting[4:])
	f.Add(ownGreeting([20]byte{}, true)[4:])
	f.Fuzz(func(t *testing.T, p []byte) {
		g, err := parseGreeting(p)
		if err != nil {
			return
		}
		q := bytes.Clone(p)
		caps, _ := patchGreeting(q, g, true)
		g2, err := parseGreeting(q)
		if err != nil {
			t.Fatalf("patched greeting does not parse: %v", err)
		}
		if g2.caps != caps || g2.version != g.version || g2.connID != g.connID {
			t.Fatalf("patch changed more than capabilities: %+v -> %+v", g, g2)
		}
	})
}

func FuzzParseResponse(f *testing.F) {
	f.Add(goDriverResp[4:])
	f.Add(mariadbResponse[4:])
	f.Add(sslRequest(goDriverResp[4:], 1)[4:])
	f.Fuzz(func(t *testing.T, p []byte) {
		r, err := parseResponse(p)
		if err != nil || r.sslOnly {
			return
		}
		if len(p) < responsePrefix {
			t.Fatal("short response accepted")
		}
		if strings.IndexByte(r.user, 0) >= 0 || strings.IndexByte(r.database, 0) >= 0 {
			t.Fatalf("NUL in user %q or database %q", r.user, r.database)
		}
		q := bytes.Clone(p)
		setClientSSL(q, true)
		if r2, err := parseResponse(q); err != nil || r2.user != r.user || r2.database != r.database {
			t.Fatalf("CLIENT_SSL changed the decoding: %+v, %v", r2, err)
		}
	})
}
