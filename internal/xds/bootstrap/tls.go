package bootstrap

import (
	"encoding/json"
	"fmt"
	"net"
	"path"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"sigs.k8s.io/yaml"

	"kubelb.dev/kubelb/internal/pki"
)

// Envoy's side of the xDS mutual TLS. The fleet mounts its client Secret (pki.ClientSecretName:
// tls.crt, tls.key, ca.crt and the two SDS files TLSFiles makes) at TLSDir. Envoy reads the
// certificate and the CA through SDS from those files and watches the directory: when the
// kubelet swaps the Secret's files (a renewed certificate, a new CA), Envoy reloads them
// without a restart.
const (
	// DefaultTLSDir is where the fleet's pods mount the client Secret.
	DefaultTLSDir = "/etc/envoy-xds-tls"
	// ClientCertSDSFile and CASDSFile are the SDS files (in TLSDir) that name the client
	// certificate and the CA.
	ClientCertSDSFile = "xds-client-certificate.sds.yaml"
	CASDSFile         = "xds-ca.sds.yaml"
	// ClientCertSecretName and CASecretName are the names of the SDS secrets.
	ClientCertSecretName = "xds_client_certificate"
	CASecretName         = "xds_trusted_ca"
)

// TLSFiles are the SDS files of the client Secret mounted at tlsDir ("" is DefaultTLSDir),
// keyed by file name: they point Envoy at tls.crt, tls.key and ca.crt in the same directory.
func TLSFiles(tlsDir string) (map[string][]byte, error) {
	if tlsDir == "" {
		tlsDir = DefaultTLSDir
	}
	file := func(name string) *corev3.DataSource {
		return &corev3.DataSource{Specifier: &corev3.DataSource_Filename{Filename: path.Join(tlsDir, name)}}
	}
	out := map[string][]byte{}
	for name, secret := range map[string]*tlsv3.Secret{
		ClientCertSDSFile: {Name: ClientCertSecretName, Type: &tlsv3.Secret_TlsCertificate{TlsCertificate: &tlsv3.TlsCertificate{
			CertificateChain: file(pki.KeyCert),
			PrivateKey:       file(pki.KeyKey),
		}}},
		CASDSFile: {Name: CASecretName, Type: &tlsv3.Secret_ValidationContext{ValidationContext: &tlsv3.CertificateValidationContext{
			TrustedCa: file(pki.KeyCA),
		}}},
	} {
		if err := secret.Validate(); err != nil {
			return nil, fmt.Errorf("SDS file %s: %w", name, err)
		}
		res, err := anypb.New(secret)
		if err != nil {
			return nil, err
		}
		b, err := toYAML(&discoveryv3.DiscoveryResponse{Resources: []*anypb.Any{res}})
		if err != nil {
			return nil, err
		}
		out[name] = b
	}
	return out, nil
}

// xdsTransportSocket is the TLS of the connection to the xDS server: the client certificate
// and the CA from the SDS files in tlsDir, SNI serverName, and the server's certificate must
// name serverName (a DNS name, or an IP address).
func xdsTransportSocket(tlsDir, serverName string) (*corev3.TransportSocket, error) {
	if tlsDir == "" {
		tlsDir = DefaultTLSDir
	}
	sds := func(file string) *corev3.ConfigSource {
		return &corev3.ConfigSource{
			ResourceApiVersion: corev3.ApiVersion_V3,
			ConfigSourceSpecifier: &corev3.ConfigSource_PathConfigSource{PathConfigSource: &corev3.PathConfigSource{
				Path:             path.Join(tlsDir, file),
				WatchedDirectory: &corev3.WatchedDirectory{Path: tlsDir},
			}},
		}
	}
	sanType := tlsv3.SubjectAltNameMatcher_DNS
	if net.ParseIP(serverName) != nil {
		sanType = tlsv3.SubjectAltNameMatcher_IP_ADDRESS
	}
	ctx := &tlsv3.UpstreamTlsContext{
		Sni: serverName,
		CommonTlsContext: &tlsv3.CommonTlsContext{
			// gRPC servers require ALPN h2.
			AlpnProtocols: []string{"h2"},
			TlsParams: &tlsv3.TlsParameters{
				TlsMinimumProtocolVersion: tlsv3.TlsParameters_TLSv1_2,
				TlsMaximumProtocolVersion: tlsv3.TlsParameters_TLSv1_3,
			},
			TlsCertificateSdsSecretConfigs: []*tlsv3.SdsSecretConfig{{Name: ClientCertSecretName, SdsConfig: sds(ClientCertSDSFile)}},
			ValidationContextType: &tlsv3.CommonTlsContext_CombinedValidationContext{CombinedValidationContext: &tlsv3.CommonTlsContext_CombinedCertificateValidationContext{
				DefaultValidationContext: &tlsv3.CertificateValidationContext{
					MatchTypedSubjectAltNames: []*tlsv3.SubjectAltNameMatcher{{
						SanType: sanType,
						Matcher: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: serverName}},
					}},
				},
				ValidationContextSdsSecretConfig: &tlsv3.SdsSecretConfig{Name: CASecretName, SdsConfig: sds(CASDSFile)},
			}},
		},
	}
	cfg, err := anypb.New(ctx)
	if err != nil {
		return nil, err
	}
	return &corev3.TransportSocket{
		Name:       "envoy.transport_sockets.tls",
		ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: cfg},
	}, nil
}

// toYAML renders a proto as stable YAML (protojson output is deliberately unstable).
func toYAML(m proto.Message) ([]byte, error) {
	js, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(m)
	if err != nil {
		return nil, err
	}
	var doc map[string]any
	if err := json.Unmarshal(js, &doc); err != nil {
		return nil, err
	}
	return yaml.Marshal(doc)
}
