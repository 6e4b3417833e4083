// Package xdstest gives tests of the xDS server their TLS material: a CA of their own
// (internal/pki), the server's TLS configuration, and for each real Envoy the files of its
// client Secret and a bootstrap that reads them. It also "mounts" a client Secret the manager
// made, as the kubelet would, for Envoys the e2e harness starts.
package xdstest

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"kubelb.dev/kubelb/internal/pki"
	"kubelb.dev/kubelb/internal/testsupport"
	"kubelb.dev/kubelb/internal/xds/bootstrap"
)

// ServerName is the name of the test xDS server's certificate; Envoys connect to
// 127.0.0.1:<port> and verify this name (bootstrap.Options.XDSServerName).
const ServerName = "xds.kubelb.test"

// PKI is a test CA with a server certificate for ServerName.
type PKI struct {
	CA     *pki.CA
	server tls.Certificate
}

var (
	shared     *PKI
	sharedOnce sync.Once
	sharedErr  error
)

// New returns a CA for tests (one per test process: making keys is not free) with its server
// certificate.
func New(t testsupport.TB) *PKI {
	t.Helper()
	sharedOnce.Do(func() {
		now := time.Now()
		ca, err := pki.NewCA(now)
		if err != nil {
			sharedErr = err
			return
		}
		cert, err := ca.IssueServer([]string{ServerName}, now, pki.ServerLifetime)
		if err != nil {
			sharedErr = err
			return
		}
		shared = &PKI{CA: ca, server: cert}
	})
	if sharedErr != nil {
		t.Fatalf("making the test xDS CA: %v", sharedErr)
	}
	return shared
}

// ServerTLS is the xDS server's TLS configuration (xds.NewServer).
func (p *PKI) ServerTLS() *tls.Config {
	return pki.ServerTLS(func() (*pki.CA, *tls.Certificate) { return p.CA, &p.server })
}

// ClientTLS is a gRPC client's TLS configuration with the client certificate of tenant
// (a tenant namespace), trusting the CA and expecting ServerName.
func (p *PKI) ClientTLS(t testsupport.TB, tenant string) *tls.Config {
	t.Helper()
	certPEM, keyPEM, err := p.CA.IssueClient(tenant, time.Now(), pki.ClientLifetime)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: p.CA.Pool(), ServerName: ServerName, MinVersion: tls.VersionTLS12}
}

// ClientSecretData is what the Envoy fleet controller puts into a tenant's client Secret:
// the certificate, key and CA, and the SDS files for the default mount path.
func (p *PKI) ClientSecretData(t testsupport.TB, tenant string) map[string][]byte {
	t.Helper()
	certPEM, keyPEM, err := p.CA.IssueClient(tenant, time.Now(), pki.ClientLifetime)
	if err != nil {
		t.Fatal(err)
	}
	files, err := bootstrap.TLSFiles("")
	if err != nil {
		t.Fatal(err)
	}
	files[pki.KeyCert], files[pki.KeyKey], files[pki.KeyCA] = certPEM, keyPEM, p.CA.CertPEM
	return files
}

// Bootstrap generates the bootstrap of an Envoy of opts.Tenant that connects to the test
// server with a client certificate of that tenant (opts.XDSServerName and opts.TLSDir are
// set here).
func (p *PKI) Bootstrap(t testsupport.TB, opts bootstrap.Options) []byte {
	t.Helper()
	opts.XDSServerName = ServerName
	b, err := bootstrap.Generate(opts)
	if err != nil {
		t.Fatal(err)
	}
	return Mount(t, b, p.ClientSecretData(t, opts.Tenant))
}

// NewPKI returns a CA of its own (not the shared one of New), e.g. to rotate to.
func NewPKI(t testsupport.TB) *PKI {
	t.Helper()
	now := time.Now()
	ca, err := pki.NewCA(now)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := ca.IssueServer([]string{ServerName}, now, pki.ServerLifetime)
	if err != nil {
		t.Fatal(err)
	}
	return &PKI{CA: ca, server: cert}
}

// ServerCredentials returns the CA and server certificate (for pki.ServerTLS).
func (p *PKI) ServerCredentials() (*pki.CA, *tls.Certificate) { return p.CA, &p.server }

// Mount plays the kubelet for the client Secret of a fleet: it writes the Secret's files into
// a fresh directory and returns the bootstrap reading them from there (the bootstrap and the
// SDS files name bootstrap.DefaultTLSDir, the fleet's mount path).
func Mount(t testsupport.TB, bootstrapYAML []byte, secretData map[string][]byte) []byte {
	t.Helper()
	return MountSecret(t, secretData).Bootstrap(bootstrapYAML)
}

// Mounted is a Secret volume laid out as the kubelet does it: the files are symbolic links
// into ..data, itself a link to a timestamped directory, and an update swaps ..data by a
// rename (the move Envoy's watched_directory reacts to).
type Mounted struct {
	Dir string
	n   int
}

// MountSecret writes the Secret's files into a fresh directory.
func MountSecret(t testsupport.TB, secretData map[string][]byte) *Mounted {
	t.Helper()
	m := &Mounted{Dir: t.TempDir()}
	m.Update(t, secretData)
	for name := range secretData {
		if err := os.Symlink(filepath.Join("..data", name), filepath.Join(m.Dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	return m
}

// Update replaces the files atomically with the Secret's new data (same keys).
func (m *Mounted) Update(t testsupport.TB, secretData map[string][]byte) {
	t.Helper()
	m.n++
	version := fmt.Sprintf("..%d", m.n)
	if err := os.Mkdir(filepath.Join(m.Dir, version), 0o700); err != nil {
		t.Fatal(err)
	}
	for name, data := range secretData {
		data = bytes.ReplaceAll(data, []byte(bootstrap.DefaultTLSDir), []byte(m.Dir))
		if err := os.WriteFile(filepath.Join(m.Dir, version, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	tmp := filepath.Join(m.Dir, "..data_tmp")
	if err := os.Symlink(version, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(m.Dir, "..data")); err != nil {
		t.Fatal(err)
	}
}

// Bootstrap returns the bootstrap reading the Secret from this directory.
func (m *Mounted) Bootstrap(bootstrapYAML []byte) []byte {
	return bytes.ReplaceAll(bootstrapYAML, []byte(bootstrap.DefaultTLSDir), []byte(m.Dir))
}
