package store

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"kubelb.dev/kubelb/internal/pki"
	"kubelb.dev/kubelb/internal/testenv"
)

const ns = "kubelb"

// TestCAKeptInSecret: on a real API server, replicas starting at once make one CA between
// them; a Secret that holds no CA is never overwritten; an Authority serves TLS from the CA
// and follows a new CA when the Secret is deleted (the rotation procedure).
func TestCAKeptInSecret(t *testing.T) {
	hub := testenv.Start(t, "hub", testenv.Options{})
	c := hub.Client
	ctx := context.Background()
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}

	// Five replicas at once.
	var wg sync.WaitGroup
	fingerprints := make([]string, 5)
	errs := make([]error, 5)
	for i := range fingerprints {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ca, err := EnsureCA(ctx, c, c, ns)
			errs[i] = err
			if err == nil {
				fingerprints[i] = ca.Fingerprint()
			}
		}()
	}
	wg.Wait()
	for i := range fingerprints {
		if errs[i] != nil {
			t.Fatalf("replica %d: %v", i, errs[i])
		}
		if fingerprints[i] != fingerprints[0] {
			t.Fatalf("replicas made different CAs: %v", fingerprints)
		}
	}
	sec := &corev1.Secret{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: pki.CASecretName}, sec); err != nil {
		t.Fatal(err)
	}
	if sec.Labels[pki.LabelXDSTLS] != "ca" || sec.Type != corev1.SecretTypeTLS {
		t.Errorf("CA Secret labels %v type %s", sec.Labels, sec.Type)
	}

	// An Authority serves the CA's server certificate and takes only the CA's clients.
	a := NewAuthority(c, c, ns, "kubelb.kubelb.svc", testr.New(t))
	if err := a.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if a.CA().Fingerprint() != fingerprints[0] {
		t.Fatal("the Authority does not use the CA of the Secret")
	}
	handshake := func(tenantCA *pki.CA) (*x509.Certificate, error) {
		server, client := net.Pipe()
		defer server.Close()
		defer client.Close()
		certPEM, keyPEM, err := tenantCA.IssueClient("tenant-a", time.Now(), time.Hour)
		if err != nil {
			return nil, err
		}
		cert, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			return nil, err
		}
		go func() { _ = tls.Server(server, a.ServerTLS()).Handshake() }()
		cc := tls.Client(client, &tls.Config{ServerName: "kubelb.kubelb", RootCAs: a.CA().Pool(), Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2"}})
		if err := cc.Handshake(); err != nil {
			return nil, err
		}
		// TLS 1.3: the server's verdict on the client certificate arrives with the first read.
		_ = cc.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		if _, err := cc.Read(make([]byte, 1)); err != nil && !isTimeout(err) {
			return nil, err
		}
		return cc.ConnectionState().PeerCertificates[0], nil
	}
	if _, err := handshake(a.CA()); err != nil {
		t.Fatalf("handshake with a client of the CA: %v", err)
	}
	stranger, err := pki.NewCA(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := handshake(stranger); err == nil {
		t.Error("a client of another CA was accepted")
	}

	// Rotation: the Secret is deleted; the next refresh makes a new CA and a server
	// certificate from it.
	old := a.CA()
	if err := c.Delete(ctx, sec); err != nil {
		t.Fatal(err)
	}
	if err := a.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if a.CA().Fingerprint() == old.Fingerprint() {
		t.Fatal("the CA did not change after its Secret was deleted")
	}
	leaf, err := handshake(a.CA())
	if err != nil {
		t.Fatalf("handshake after rotation: %v", err)
	}
	if err := leaf.CheckSignatureFrom(a.CA().Cert); err != nil {
		t.Errorf("the server certificate is not from the new CA: %v", err)
	}

	// A Secret that holds no CA is an error, and stays as it is.
	bad := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: pki.CASecretName, Namespace: "other"}, Data: map[string][]byte{"tls.crt": []byte("x")}}
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "other"}}); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, bad); err != nil {
		t.Fatal(err)
	}
	if _, err := EnsureCA(ctx, c, c, "other"); err == nil {
		t.Error("a Secret without a CA was accepted")
	}
	if err := c.Get(ctx, types.NamespacedName{Namespace: "other", Name: pki.CASecretName}, bad); err != nil || string(bad.Data["tls.crt"]) != "x" {
		t.Errorf("the foreign Secret was changed: %v %q", err, bad.Data["tls.crt"])
	}
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}
