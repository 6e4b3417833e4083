package pki

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
)

// CheckCABundle says why PEM text cannot serve as CA certificates (nil when it can): it holds
// at most maxBytes, only CERTIFICATE blocks, at least one, each an X.509 certificate, and
// nothing else but white space. The ccm checks a tenant's CA ConfigMaps with it, and the
// manager checks again what a Route carries (tenants are untrusted).
func CheckCABundle(text string, maxBytes int) error {
	if len(text) > maxBytes {
		return fmt.Errorf("%d bytes, more than %d", len(text), maxBytes)
	}
	rest := []byte(text)
	n := 0
	for {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			return fmt.Errorf("a PEM block of type %.63q, not a certificate", b.Type)
		}
		if _, err := x509.ParseCertificate(b.Bytes); err != nil {
			return fmt.Errorf("certificate %d cannot be read: %w", n+1, err)
		}
		n++
	}
	if strings.TrimSpace(string(rest)) != "" {
		return errors.New("text that is not PEM")
	}
	if n == 0 {
		return errors.New("no PEM certificate")
	}
	return nil
}
