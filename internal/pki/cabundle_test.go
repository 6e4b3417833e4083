package pki

import (
	"strings"
	"testing"
	"time"
)

// TestCheckCABundle: a bundle of certificates passes; what a tenant might put in a CA
// ConfigMap instead (nothing, a key, garbage around the PEM, too much) is refused with a reason.
func TestCheckCABundle(t *testing.T) {
	ca, err := NewCA(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	cert := string(ca.CertPEM)
	for _, c := range []struct {
		name, text string
		want       string // part of the error; "" for none
	}{
		{"one certificate", cert, ""},
		{"two, with white space", cert + "\n\n" + cert + "\n", ""},
		{"empty", "", "no PEM certificate"},
		{"a key", "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n", "not a certificate"},
		{"text after the PEM", cert + "junk", "not PEM"},
		{"not a certificate inside", "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n", "cannot be read"},
		{"too long", strings.Repeat(cert, 200), "more than"}, // 200 × ~600 bytes
	} {
		err := CheckCABundle(c.text, 64<<10)
		if (err == nil) != (c.want == "") || err != nil && !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}
