package translator

import (
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"

	"kubelb.dev/kubelb/internal/ir"
)

// secret builds an SDS TLS certificate secret.
func secret(s *ir.Secret) (*tlsv3.Secret, error) {
	return &tlsv3.Secret{
		Name: s.Name,
		Type: &tlsv3.Secret_TlsCertificate{TlsCertificate: &tlsv3.TlsCertificate{
			CertificateChain: &corev3.DataSource{Specifier: &corev3.DataSource_InlineBytes{InlineBytes: s.CertChain}},
			PrivateKey:       &corev3.DataSource{Specifier: &corev3.DataSource_InlineBytes{InlineBytes: s.PrivateKey}},
		}},
	}, nil
}
