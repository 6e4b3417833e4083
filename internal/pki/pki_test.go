package pki

import (
	"crypto/tls"
	"crypto/x509"
	"net/url"
	"slices"
	"testing"
	"time"
)

func TestClientCertificateNamesTenant(t *testing.T) {
	t.Parallel()
	now := time.Now()
	ca, err := NewCA(now)
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := ca.IssueClient("tenant-a", now, ClientLifetime)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	leaf := pair.Leaf
	if got, err := TenantOf(leaf); err != nil || got != "tenant-a" {
		t.Errorf("TenantOf = %q, %v; want tenant-a", got, err)
	}
	if leaf.Subject.CommonName != "tenant-a" || leaf.URIs[0].String() != "spiffe://kubelb.k8c.io/tenant/tenant-a" {
		t.Errorf("subject %q, URIs %v", leaf.Subject.CommonName, leaf.URIs)
	}
	// A client certificate verifies for client auth against the CA, not for server auth.
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: ca.Pool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("client certificate does not verify: %v", err)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: ca.Pool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err == nil {
		t.Error("a client certificate verifies as a server certificate")
	}

	for name, uris := range map[string][]string{
		"no URI":             nil,
		"other trust domain": {"spiffe://example.com/tenant/tenant-a"},
		"not a tenant path":  {"spiffe://kubelb.k8c.io/manager/tenant-a"},
		"empty tenant":       {"spiffe://kubelb.k8c.io/tenant/"},
		"nested path":        {"spiffe://kubelb.k8c.io/tenant/a/b"},
		"two tenants":        {"spiffe://kubelb.k8c.io/tenant/tenant-a", "spiffe://kubelb.k8c.io/tenant/tenant-b"},
	} {
		c := &x509.Certificate{}
		for _, u := range uris {
			pu, _ := url.Parse(u)
			c.URIs = append(c.URIs, pu)
		}
		if got, err := TenantOf(c); err == nil {
			t.Errorf("%s: TenantOf = %q, want an error", name, got)
		}
	}
}

func TestServerCertificateAndNames(t *testing.T) {
	t.Parallel()
	for host, want := range map[string][]string{
		"kubelb.kubelb.svc":           {"kubelb.kubelb.svc", "kubelb.kubelb", "kubelb.kubelb.svc.cluster.local"},
		"kubelb.ns.svc.cluster.local": {"kubelb.ns.svc.cluster.local", "kubelb.ns", "kubelb.ns.svc"},
		"xds.example.com":             {"xds.example.com"},
		"10.0.0.1":                    {"10.0.0.1"},
	} {
		if got := ServerNames(host); !slices.Equal(got, want) {
			t.Errorf("ServerNames(%q) = %v, want %v", host, got, want)
		}
	}
	now := time.Now()
	ca, err := NewCA(now)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := ca.IssueServer(ServerNames("kubelb.kubelb.svc"), now, ServerLifetime)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"kubelb.kubelb.svc", "kubelb.kubelb"} {
		if _, err := cert.Leaf.Verify(x509.VerifyOptions{DNSName: name, Roots: ca.Pool()}); err != nil {
			t.Errorf("server certificate for %s: %v", name, err)
		}
	}
	ip, err := ca.IssueServer([]string{"127.0.0.1"}, now, ServerLifetime)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ip.Leaf.Verify(x509.VerifyOptions{DNSName: "127.0.0.1", Roots: ca.Pool()}); err != nil {
		t.Errorf("server certificate for an IP: %v", err)
	}
}

func TestRenewal(t *testing.T) {
	t.Parallel()
	now := time.Now()
	ca, err := NewCA(now)
	if err != nil {
		t.Fatal(err)
	}
	certPEM, _, err := ca.IssueClient("tenant-a", now, 30*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	renew, at := NeedsRenewal(certPEM, ca, now)
	if renew || at.Before(now.Add(19*time.Hour)) || at.After(now.Add(20*time.Hour)) {
		t.Errorf("fresh certificate: renew %v at %v; want false, after 2/3 of 30h", renew, at.Sub(now))
	}
	if renew, _ := NeedsRenewal(certPEM, ca, now.Add(21*time.Hour)); !renew {
		t.Error("a certificate past 2/3 of its lifetime is not renewed")
	}
	other, err := NewCA(now)
	if err != nil {
		t.Fatal(err)
	}
	if renew, _ := NeedsRenewal(certPEM, other, now); !renew {
		t.Error("a certificate of another CA is not renewed")
	}
	if renew, _ := NeedsRenewal([]byte("garbage"), ca, now); !renew {
		t.Error("an unreadable certificate is not renewed")
	}
	// Nothing outlives the CA.
	long, _, err := ca.IssueClient("tenant-a", now, 2*CALifetime)
	if err != nil {
		t.Fatal(err)
	}
	if renew, at := NeedsRenewal(long, ca, now); renew || at.After(ca.Cert.NotAfter) {
		t.Errorf("a certificate asked to outlive the CA: renew %v at %v (CA until %v)", renew, at, ca.Cert.NotAfter)
	}
}

func mustKey(t *testing.T, ca *CA) []byte {
	t.Helper()
	k, err := ca.KeyPEM()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestParseCA(t *testing.T) {
	t.Parallel()
	ca, err := NewCA(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	keyPEM := mustKey(t, ca)
	back, err := ParseCA(ca.CertPEM, keyPEM)
	if err != nil || back.Fingerprint() != ca.Fingerprint() {
		t.Fatalf("ParseCA round trip: %v", err)
	}
	other, err := NewCA(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ParseCA(ca.CertPEM, mustKey(t, other)); err == nil {
		t.Error("a CA with another CA's key was accepted")
	}
	leaf, key, err := ca.IssueClient("tenant-a", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ParseCA(leaf, key); err == nil {
		t.Error("a leaf certificate was accepted as a CA")
	}
	if _, err := ParseCA([]byte("x"), keyPEM); err == nil {
		t.Error("garbage was accepted as a CA")
	}
}
