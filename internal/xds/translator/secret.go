package translator

import (
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"

	"kubelb.dev/kubelb/internal/ir"
)

// secret builds an SDS TLS certificate secret, or a generic one.
func secret(s *ir.Secret) (*tlsv3.Secret, error) {
	if len(s.Generic) > 0 {
		return &tlsv3.Secret{Name: s.Name, Type: &tlsv3.Secret_GenericSecret{GenericSecret: &tlsv3.GenericSecret{
			Secret: &corev3.DataSource{Specifier: &corev3.DataSource_InlineBytes{InlineBytes: s.Generic}},
		}}}, nil
	}
	return &tlsv3.Secret{
		Name: s.Name,
		Type: &tlsv3.Secret_TlsCertificate{TlsCertificate: &tlsv3.TlsCertificate{
			CertificateChain: &corev3.DataSource{Specifier: &corev3.DataSource_InlineBytes{InlineBytes: s.CertChain}},
			PrivateKey:       &corev3.DataSource{Specifier: &corev3.DataSource_InlineBytes{InlineBytes: s.PrivateKey}},
		}},
	}, nil
}
