package testsupport

import (
	"crypto/x509"
	"encoding/pem"
	"net"
)

// SelfSignedPEM makes a self-signed certificate for host (its own CA) and returns it and its
// private key PEM-encoded, as the tls.crt and tls.key of a kubernetes.io/tls Secret.
func SelfSignedPEM(t TB, host string) (certPEM, keyPEM []byte) {
	t.Helper()
	cert, _, err := selfSigned(host, []string{host}, net.IPv4(127, 0, 0, 1))
	if err != nil {
		t.Fatalf("making a certificate for %s: %v", host, err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(cert.PrivateKey)
	if err != nil {
		t.Fatalf("encoding the key of %s: %v", host, err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Certificate[0]}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
}
