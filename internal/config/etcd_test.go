package config

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sluicelab/sluice/internal/etcd"
)

// TestEtcdCatalog: an etcd:// catalog (from the file or --catalog) sets
// Etcd with the URL's endpoints and prefix and the etcd_* keys; a file
// catalog leaves it nil; etcd_* keys without an etcd catalog, a bad URL,
// half a certificate and a password without a user are refused, naming
// the key and never the password.
func TestEtcdCatalog(t *testing.T) {
	const admin = "admin:\n  listen: 127.0.0.1:6433\n"
	for _, tc := range []struct {
		name, yaml, flag string
		want             *etcd.Config
		err              string // substring of the error; "" for none
	}{
		{name: "file catalog", yaml: "catalog: /tmp/c.json\n"},
		{name: "etcd", yaml: "catalog: etcd://h1:2379,h2/fleet\netcd_ca_file: /ca.pem\netcd_cert_file: /c.pem\netcd_key_file: /k.pem\netcd_user: sluice\netcd_password: s3cret\n",
			want: &etcd.Config{Endpoints: []string{"h1:2379", "h2:2379"}, Prefix: "/fleet", CAFile: "/ca.pem", CertFile: "/c.pem", KeyFile: "/k.pem", Username: "sluice", Password: "s3cret"}},
		{name: "flag", yaml: "etcd_user: u\netcd_password: p\n", flag: "etcd://127.0.0.1:12379",
			want: &etcd.Config{Endpoints: []string{"127.0.0.1:12379"}, Prefix: "/sluice", Username: "u", Password: "p"}},
		{name: "flag over etcd file", yaml: "catalog: etcd://h1/x\n", flag: "/tmp/c.json"},
		{name: "keys without etcd", yaml: "catalog: /tmp/c.json\netcd_password: s3cret\n", err: "etcd_password"},
		{name: "user without etcd", yaml: "etcd_user: u\n", err: "etcd_user"},
		{name: "bad url", yaml: "catalog: etcd:///x\n", err: "no etcd endpoint"},
		{name: "bad flag url", flag: "etcd://u:pw@h1/x", err: "--catalog"},
		{name: "half certificate", yaml: "catalog: etcd://h1\netcd_cert_file: /c.pem\n", err: "etcd_key_file"},
		{name: "password without user", yaml: "catalog: etcd://h1\netcd_password: s3cret\n", err: "etcd_user"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse("s.yaml", []byte(admin+tc.yaml))
			if err == nil {
				err = c.ApplyFlags(Flags{Catalog: tc.flag})
			}
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), ":pw@") {
					t.Fatalf("error %v, want one naming %q without the password", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(c.Etcd, tc.want) {
				t.Fatalf("Etcd = %+v, want %+v", c.Etcd, tc.want)
			}
		})
	}
}

// TestEtcdSecretHidden: the password to etcd shows in neither SHOW
// CONFIG's rows nor GET /api/config's JSON, which say only that it is
// set; SLUICE_ETCD_PASSWORD's value replaces the file's; a change of it
// needs a restart.
func TestEtcdSecretHidden(t *testing.T) {
	c, err := Parse("s.yaml", []byte("admin:\n  listen: 127.0.0.1:6433\ncatalog: etcd://h1/x\netcd_user: sluice\netcd_password: s3cret\n"))
	if err != nil {
		t.Fatal(err)
	}
	v := NewView(c, time.Time{}, 0)
	js, _ := json.Marshal(v)
	rows := ""
	for _, r := range v.Rows() {
		rows += r[0] + "=" + r[1] + "\n"
	}
	for _, out := range []string{string(js), rows} {
		if strings.Contains(out, "s3cret") || !strings.Contains(out, "etcd_password") || !strings.Contains(out, "sluice") {
			t.Errorf("view:\n%s", out)
		}
	}
	next, _ := Parse("s.yaml", []byte("admin:\n  listen: 127.0.0.1:6433\ncatalog: etcd://h1/x\netcd_user: sluice\netcd_password: s3cret\n"))
	next.SetEtcdPassword("other")
	if next.Etcd.Password != "other" {
		t.Fatalf("password %q", next.Etcd.Password)
	}
	if err := CheckReload(c, next); err == nil || strings.Contains(err.Error(), "other") || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("reload with another etcd password: %v", err)
	}
}
