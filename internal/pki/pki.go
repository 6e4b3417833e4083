// Package pki is the manager's small certificate authority for xDS: one CA (kept in a
// Secret in the manager's namespace, see Store) issues each manager replica a server
// certificate for the xDS address and each tenant's Envoy fleet a client certificate naming
// the tenant. The xDS server (internal/xds) trusts only this CA and serves a proxy only the
// tenant its certificate names.
//
// The identity of a fleet is the URI SAN spiffe://kubelb.k8c.io/tenant/<tenant namespace>
// (TenantURI); the subject's common name carries the same namespace for people reading the
// certificate, but only the URI is checked (TenantOf). Keys are ECDSA P-256.
package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"strings"
	"time"
)

// Lifetimes of what the CA issues. Certificates are renewed after RenewFraction of their
// lifetime (see NeedsRenewal).
const (
	CALifetime     = 10 * 365 * 24 * time.Hour
	ServerLifetime = 30 * 24 * time.Hour
	ClientLifetime = 30 * 24 * time.Hour
	// backdate covers clocks a little behind the manager's.
	backdate = 5 * time.Minute
)

// RenewFraction of a certificate's lifetime after which it is reissued (2/3).
const RenewFraction = 2.0 / 3.0

// TrustDomain is the SPIFFE trust domain of the tenant identities.
const TrustDomain = "kubelb.k8c.io"

// tenantPathPrefix is the path of a tenant identity before the tenant namespace.
const tenantPathPrefix = "/tenant/"

// TenantURI is the identity of the Envoy fleet of a tenant namespace:
// spiffe://kubelb.k8c.io/tenant/<namespace>.
func TenantURI(namespace string) *url.URL {
	return &url.URL{Scheme: "spiffe", Host: TrustDomain, Path: tenantPathPrefix + namespace}
}

// TenantOf returns the tenant namespace a client certificate names: its one URI SAN of the
// form spiffe://kubelb.k8c.io/tenant/<namespace>. A certificate with no such URI, or more
// than one, names no tenant.
func TenantOf(cert *x509.Certificate) (string, error) {
	if cert == nil {
		return "", errors.New("no client certificate")
	}
	tenant := ""
	for _, u := range cert.URIs {
		if u.Scheme != "spiffe" || u.Host != TrustDomain || !strings.HasPrefix(u.Path, tenantPathPrefix) {
			continue
		}
		ns := strings.TrimPrefix(u.Path, tenantPathPrefix)
		if ns == "" || strings.Contains(ns, "/") || tenant != "" {
			return "", fmt.Errorf("certificate %q does not name exactly one tenant", cert.Subject.CommonName)
		}
		tenant = ns
	}
	if tenant == "" {
		return "", fmt.Errorf("certificate %q names no tenant", cert.Subject.CommonName)
	}
	return tenant, nil
}

// CA is the xDS certificate authority.
type CA struct {
	Cert *x509.Certificate
	Key  *ecdsa.PrivateKey
	// CertPEM is Cert, PEM-encoded (the ca.crt handed to the fleets).
	CertPEM []byte
}

// NewCA makes a self-signed CA valid from now for CALifetime.
func NewCA(now time.Time) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating the CA key: %w", err)
	}
	serial, err := serialNumber()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "kubelb xDS CA " + now.UTC().Format("2006-01-02T15:04:05Z")},
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.Add(CALifetime),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("signing the CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, Key: key, CertPEM: encodeCert(der)}, nil
}

// ParseCA reads a CA from its PEM-encoded certificate and PKCS#8 (or SEC 1) key.
func ParseCA(certPEM, keyPEM []byte) (*CA, error) {
	block, _ := pem.Decode(certPEM)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, errors.New("the CA certificate is not PEM")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("parsing the CA certificate: %w", err)
	}
	if !cert.IsCA {
		return nil, errors.New("the CA certificate is not a CA")
	}
	kb, _ := pem.Decode(keyPEM)
	if kb == nil {
		return nil, errors.New("the CA key is not PEM")
	}
	var key *ecdsa.PrivateKey
	if k, err := x509.ParsePKCS8PrivateKey(kb.Bytes); err == nil {
		var ok bool
		if key, ok = k.(*ecdsa.PrivateKey); !ok {
			return nil, fmt.Errorf("the CA key is a %T, not ECDSA", k)
		}
	} else if key, err = x509.ParseECPrivateKey(kb.Bytes); err != nil {
		return nil, fmt.Errorf("parsing the CA key: %w", err)
	}
	if !key.PublicKey.Equal(cert.PublicKey) {
		return nil, errors.New("the CA key does not belong to the CA certificate")
	}
	return &CA{Cert: cert, Key: key, CertPEM: encodeCert(cert.Raw)}, nil
}

// KeyPEM returns the CA's key, PKCS#8 PEM-encoded.
func (ca *CA) KeyPEM() ([]byte, error) { return encodeKey(ca.Key) }

// Fingerprint is a short hash of the CA certificate, to tell CAs apart.
func (ca *CA) Fingerprint() string {
	sum := sha256.Sum256(ca.Cert.Raw)
	return hex.EncodeToString(sum[:8])
}

// Pool is a certificate pool holding only this CA.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// IssueServer issues a server certificate for the names (DNS names or IP addresses), valid
// from now for lifetime.
func (ca *CA) IssueServer(names []string, now time.Time, lifetime time.Duration) (tls.Certificate, error) {
	if len(names) == 0 {
		return tls.Certificate{}, errors.New("a server certificate needs at least one name")
	}
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: names[0]},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, n := range names {
		if ip := net.ParseIP(n); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, n)
		}
	}
	certPEM, keyPEM, err := ca.issue(tmpl, now, lifetime)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.X509KeyPair(certPEM, keyPEM)
}

// IssueClient issues the client certificate of a tenant namespace's Envoy fleet (identity
// TenantURI(namespace)), valid from now for lifetime, PEM-encoded.
func (ca *CA) IssueClient(namespace string, now time.Time, lifetime time.Duration) (certPEM, keyPEM []byte, err error) {
	if namespace == "" {
		return nil, nil, errors.New("a client certificate needs a tenant namespace")
	}
	return ca.issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: namespace, OrganizationalUnit: []string{"kubelb tenant"}},
		URIs:        []*url.URL{TenantURI(namespace)},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, now, lifetime)
}

func (ca *CA) issue(tmpl *x509.Certificate, now time.Time, lifetime time.Duration) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generating a key: %w", err)
	}
	if tmpl.SerialNumber, err = serialNumber(); err != nil {
		return nil, nil, err
	}
	tmpl.NotBefore = now.Add(-backdate)
	tmpl.NotAfter = now.Add(lifetime)
	if tmpl.NotAfter.After(ca.Cert.NotAfter) {
		tmpl.NotAfter = ca.Cert.NotAfter
	}
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		return nil, nil, fmt.Errorf("signing a certificate for %q: %w", tmpl.Subject.CommonName, err)
	}
	keyPEM, err = encodeKey(key)
	if err != nil {
		return nil, nil, err
	}
	return encodeCert(der), keyPEM, nil
}

// NeedsRenewal reports whether a PEM certificate must be reissued: it does not parse, was
// not signed by ca, or RenewFraction of its lifetime has passed at now. It also returns when
// it will need renewal (zero when it needs it now).
func NeedsRenewal(certPEM []byte, ca *CA, now time.Time) (bool, time.Time) {
	block, _ := pem.Decode(certPEM)
	if block == nil {
		return true, time.Time{}
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return true, time.Time{}
	}
	return needsRenewal(cert, ca, now)
}

func needsRenewal(cert *x509.Certificate, ca *CA, now time.Time) (bool, time.Time) {
	if err := cert.CheckSignatureFrom(ca.Cert); err != nil {
		return true, time.Time{}
	}
	at := RenewAt(cert)
	if !now.Before(at) {
		return true, time.Time{}
	}
	return false, at
}

// RenewAt is when a certificate should be reissued: after RenewFraction of its lifetime.
func RenewAt(cert *x509.Certificate) time.Time {
	life := cert.NotAfter.Sub(cert.NotBefore)
	return cert.NotBefore.Add(time.Duration(float64(life) * RenewFraction))
}

// ServerNames are the names a server certificate for the xDS host carries: the host itself
// and, for a Service name (svc.ns.svc or svc.ns.svc.cluster.local), its other in-cluster
// forms (svc.ns, svc.ns.svc, svc.ns.svc.cluster.local).
func ServerNames(host string) []string {
	names := []string{host}
	if net.ParseIP(host) != nil {
		return names
	}
	parts := strings.Split(strings.TrimSuffix(host, "."), ".")
	var svc, ns string
	switch {
	case len(parts) == 3 && parts[2] == "svc":
		svc, ns = parts[0], parts[1]
	case len(parts) == 5 && parts[2] == "svc" && parts[3] == "cluster" && parts[4] == "local":
		svc, ns = parts[0], parts[1]
	default:
		return names
	}
	for _, n := range []string{svc + "." + ns, svc + "." + ns + ".svc", svc + "." + ns + ".svc.cluster.local"} {
		if n != host {
			names = append(names, n)
		}
	}
	return names
}

func serialNumber() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, fmt.Errorf("making a serial number: %w", err)
	}
	return n, nil
}

func encodeCert(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func encodeKey(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encoding a key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// Names of the Secrets that hold the xDS TLS material (internal/pki/store keeps the CA; the
// Envoy fleet controller makes the client Secrets).
const (
	// CASecretName is the Secret in the manager's namespace holding the CA (tls.crt, tls.key).
	// Deleting it rotates the CA: the manager makes a new one, every replica reissues its
	// server certificate and every fleet gets a new client certificate.
	CASecretName = "kubelb-xds-ca"
	// ClientSecretName is the Secret in each tenant namespace holding the fleet's client
	// certificate (tls.crt, tls.key) and the CA (ca.crt); the fleet mounts it.
	ClientSecretName = "envoy-xds-tls"
	// LabelXDSTLS marks both kinds of Secret ("ca" or "client"), so that a cache can hold
	// exactly them.
	LabelXDSTLS = "kubelb.k8c.io/xds-tls"
	// KeyCert, KeyKey and KeyCA are the keys of the Secrets (and the file names in the
	// fleet's mounted Secret).
	KeyCert = "tls.crt"
	KeyKey  = "tls.key"
	KeyCA   = "ca.crt"
)

// ServerTLS is a server TLS configuration that asks current for the CA and the server
// certificate at every handshake and requires a client certificate that CA signed.
func ServerTLS(current func() (*CA, *tls.Certificate)) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		ClientAuth: tls.RequireAndVerifyClientCert,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			ca, cert := current()
			if ca == nil || cert == nil {
				return nil, errors.New("the xDS server credentials are not loaded yet")
			}
			return &tls.Config{
				MinVersion:   tls.VersionTLS12,
				ClientAuth:   tls.RequireAndVerifyClientCert,
				ClientCAs:    ca.Pool(),
				Certificates: []tls.Certificate{*cert},
				NextProtos:   []string{"h2"},
			}, nil
		},
	}
}
