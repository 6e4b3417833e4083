package trafficpolicy

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"kubelb.dev/kubelb/api/v1alpha1"
)

// TestReadClientNamesUnsupportedFields: a ClientTrafficPolicy with fields kubelb does not
// serve is refused as a whole, naming each of them (at most maxUnsupported, then "…").
func TestReadClientNamesUnsupportedFields(t *testing.T) {
	for _, tc := range []struct{ spec, want string }{
		{`
targetRefs: [{group: gateway.networking.k8s.io, kind: Gateway, name: g}]
timeout: {http: {idleTimeout: 30s, streamIdleTimeout: 1m}, tcp: {idleTimeout: 1m, tlsHandshakeTimeout: 5s, connectionInspectionTimeout: 5s}}
headers: {withUnderscoresAction: DropHeader, enableEnvoyHeaders: true, preserveXRequestID: true}
`, "spec.timeout.tcp.connectionInspectionTimeout not yet supported by kubelb"},
		{`
targetSelectors: [{kind: Gateway}]
connection: {connectionLimit: {value: 10, maxConnectionDuration: 1h}, bufferLimit: 1Mi, maxAcceptPerSocketEvent: 1, socketBufferLimit: 1Mi}
tls: {minVersion: "1.3", session: {resumption: {stateless: {}, stateful: {timeout: 1h}}}}
http1: {enableTrailers: true, ignoredUpgradeTypes: [h2c], disableSafeMaxConnectionDuration: true}
http2: {maxConcurrentStreams: 10, connectionKeepalive: {}}
http3: {altSvc: false}
proxyProtocol: {optional: true}
path: {disableMergeSlashes: true}
tcpKeepalive: {probes: 3}
clientIPDetection: {xForwardedFor: {trustedCIDRs: [10.0.0.0/8]}}
healthCheck: {}
`, "spec.connection.socketBufferLimit, spec.healthCheck, spec.http1.disableSafeMaxConnectionDuration, spec.http1.ignoredUpgradeTypes, spec.http2.connectionKeepalive, spec.http3.altSvc, spec.tls.session.resumption.stateful.timeout not yet supported by kubelb"},
		{`clientIPDetection: {directSourceIP: {geo: true}, customHeader: {name: x, failClosed: true}}`, "spec.clientIPDetection.directSourceIP.geo not yet supported by kubelb"},
		{`tls: {minVersion: "1.2", clientValidation: {caCertificateRefs: [], spkiHashes: [x], crl: {}}, fingerprints: [SHA256]}`, "spec.tls.clientValidation.crl, spec.tls.clientValidation.spkiHashes, spec.tls.fingerprints not yet supported by kubelb"},
	} {
		_, err := ReadClient("ns", "p", spec(t, tc.spec))
		if err == nil || err.Error() != tc.want {
			t.Errorf("got %v\nwant %s", err, tc.want)
		}
	}
	if _, err := ReadClient("ns", "p", spec(t, `timeout: {http: {idleTimeout: 30}}`)); err == nil || !strings.Contains(err.Error(), "the spec cannot be read") {
		t.Errorf("a number for a duration: got %v", err)
	}
}

// TestReadAndResolveClient: the fields served come out as the settings the hub applies; an
// empty policy (targets alone) asks for nothing and is served as such.
func TestReadAndResolveClient(t *testing.T) {
	ct, err := ReadClient("ns", "p", spec(t, `
targetRef: {group: gateway.networking.k8s.io, kind: Gateway, name: g}
timeout: {http: {requestReceivedTimeout: 10s, idleTimeout: 2m30s}}
headers: {withUnderscoresAction: RejectRequest}
connection: {connectionLimit: {value: 100, closeDelay: 500ms}, maxAcceptPerSocketEvent: 1}
`))
	if err != nil {
		t.Fatal(err)
	}
	if ct.Namespace != "ns" || ct.Name != "p" {
		t.Errorf("carried as %s/%s", ct.Namespace, ct.Name)
	}
	s, err := ResolveClient(ct)
	if err != nil {
		t.Fatal(err)
	}
	if want := (ClientSettings{RequestReceivedTimeout: 10 * time.Second, IdleTimeout: 150 * time.Second, WithUnderscores: UnderscoresRejectRequest,
		ConnectionLimit: 100, CloseDelay: 500 * time.Millisecond, MaxAcceptPerSocketEvent: 1}); !reflect.DeepEqual(*s, want) {
		t.Errorf("got %+v, want %+v", *s, want)
	}
	ct, err = ReadClient("ns", "empty", spec(t, `targetRefs: [{group: gateway.networking.k8s.io, kind: Gateway, name: g}]`))
	if err != nil {
		t.Fatal(err)
	}
	if s, err := ResolveClient(ct); err != nil || !s.IsZero() {
		t.Errorf("an empty policy: got %+v, %v", s, err)
	}
	for _, tc := range []struct {
		spec string
		want ClientSettings
	}{
		{`clientIPDetection: {xForwardedFor: {numTrustedHops: 2}}`, ClientSettings{XFFTrustedHops: 2}},
		{`clientIPDetection: {xForwardedFor: {numTrustedHops: 0}}`, ClientSettings{}},
		// Canonical, sorted, without repeats.
		{`clientIPDetection: {xForwardedFor: {trustedCIDRs: [10.1.2.3/8, "2001:db8::1/32", 192.0.2.0/24, 10.0.0.0/8]}}`,
			ClientSettings{XFFTrustedCIDRs: []string{"10.0.0.0/8", "192.0.2.0/24", "2001:db8::/32"}}},
		{`clientIPDetection: {customHeader: {name: X-Real-IP}}`, ClientSettings{ClientIPHeader: "x-real-ip"}},
		{`clientIPDetection: {customHeader: {name: x-client, failClosed: true}}`, ClientSettings{ClientIPHeader: "x-client", ClientIPHeaderFailClosed: true}},
		{`timeout: {tcp: {idleTimeout: 90s}}`, ClientSettings{TCPIdleTimeout: 90 * time.Second}},
		{`connection: {bufferLimit: 32Ki}`, ClientSettings{BufferLimit: 32 << 10}},
		{`connection: {bufferLimit: 1048576}`, ClientSettings{BufferLimit: 1 << 20}},
		{`headers: {preserveXRequestID: true}`, ClientSettings{PreserveXRequestID: true}},
		{`http1: {enableTrailers: true, preserveHeaderCase: true, http10: {useDefaultHost: true}}`,
			ClientSettings{HTTP1Trailers: true, HTTP1PreserveHeaderCase: true, HTTP10: true, HTTP10DefaultHost: true}},
		{`http1: {http10: {}}`, ClientSettings{HTTP10: true}},
		{`http1: {enableTrailers: false}`, ClientSettings{}},
		{`path: {escapedSlashesAction: RejectRequest}`, ClientSettings{EscapedSlashes: EscapedSlashesRejectRequest, MergeSlashes: true}},
		{`path: {disableMergeSlashes: true}`, ClientSettings{}},
		{`enableProxyProtocol: true`, ClientSettings{ProxyProtocol: true}},
		{`enableProxyProtocol: false`, ClientSettings{}},
		{`proxyProtocol: {}`, ClientSettings{ProxyProtocol: true}},
		{`{enableProxyProtocol: false, proxyProtocol: {optional: true}}`, ClientSettings{ProxyProtocol: true, ProxyProtocolOptional: true}},
		{`clientIPDetection: {directSourceIP: {}}`, ClientSettings{DirectSourceIP: true}},
		{`headers: {enableEnvoyHeaders: false}`, ClientSettings{SuppressEnvoyHeaders: true}},
		{`headers: {enableEnvoyHeaders: true}`, ClientSettings{}},
		// http3 (no fields): the HTTPS listeners are served over HTTP/3 too.
		{`http3: {}`, ClientSettings{HTTP3: true}},
		{`{http3: {}, http2: {maxConcurrentStreams: 10}}`, ClientSettings{HTTP3: true, HTTP2: &HTTP2{MaxConcurrentStreams: 10}}},
		// Envoy Gateway's reading: a session without resumption offers none.
		{`tls: {session: {}}`, ClientSettings{TLS: &ClientTLS{Session: &SessionResumption{}}}},
		{`tls: {session: {resumption: {stateless: {}}}}`, ClientSettings{TLS: &ClientTLS{Session: &SessionResumption{Stateless: true}}}},
		{`tls: {session: {resumption: {stateful: {}, stateless: {}}}}`, ClientSettings{TLS: &ClientTLS{Session: &SessionResumption{Stateless: true, Stateful: true}}}},
		{`timeout: {http: {requestHeadersReceivedTimeout: 5s, streamIdleTimeout: 1m}, tcp: {tlsHandshakeTimeout: 3s}}`,
			ClientSettings{RequestHeadersTimeout: 5 * time.Second, StreamIdleTimeout: time.Minute, TLSHandshakeTimeout: 3 * time.Second}},
		{`connection: {connectionLimit: {value: 10, maxConnectionDuration: 10m, maxRequestsPerConnection: 100, maxStreamDuration: 30s}}`,
			ClientSettings{ConnectionLimit: 10, MaxConnectionDuration: 10 * time.Minute, MaxRequestsPerConnection: 100, MaxStreamDuration: 30 * time.Second}},
		// The CRD's default kind is Secret; repeats are dropped.
		{`tls: {clientValidation: {caCertificateRefs: [{name: ca}, {kind: ConfigMap, name: ca}, {group: "", kind: Secret, name: ca}]}}`,
			ClientSettings{TLS: &ClientTLS{ClientValidation: &ClientValidation{Refs: []CARef{{Kind: "Secret", Name: "ca"}, {Kind: "ConfigMap", Name: "ca"}}}}}},
		{`tls: {clientValidation: {caCertificateRefs: [{kind: ConfigMap, name: ca}], optional: true}}`,
			ClientSettings{TLS: &ClientTLS{ClientValidation: &ClientValidation{Refs: []CARef{{Kind: "ConfigMap", Name: "ca"}}, Optional: true}}}},
		{`tls: {clientValidation: {caCertificateRefs: [{kind: ConfigMap, name: ca}], mode: VerifyIfGiven}}`,
			ClientSettings{TLS: &ClientTLS{ClientValidation: &ClientValidation{Refs: []CARef{{Kind: "ConfigMap", Name: "ca"}}, Optional: true}}}},
		{`tls: {clientValidation: {caCertificateRefs: [{kind: ConfigMap, name: ca}], mode: RequireAndVerify, optional: false}}`,
			ClientSettings{TLS: &ClientTLS{ClientValidation: &ClientValidation{Refs: []CARef{{Kind: "ConfigMap", Name: "ca"}}}}}},
	} {
		ct, err := ReadClient("ns", "ip", spec(t, tc.spec))
		if err != nil {
			t.Fatalf("%s: %v", tc.spec, err)
		}
		if s, err := ResolveClient(ct); err != nil || !reflect.DeepEqual(*s, tc.want) {
			t.Errorf("%s: got %+v, %v; want %+v", tc.spec, s, err, tc.want)
		}
	}
	ct, err = ReadClient("ns", "tls", spec(t, `
tls:
  minVersion: "1.2"
  maxVersion: Auto
  ciphers: [ECDHE-RSA-AES128-GCM-SHA256, ECDHE-ECDSA-CHACHA20-POLY1305]
  ecdhCurves: [X25519]
  signatureAlgorithms: [rsa_pss_rsae_sha256]
  alpnProtocols: [h2]
`))
	if err != nil {
		t.Fatal(err)
	}
	s, err = ResolveClient(ct)
	if err != nil {
		t.Fatal(err)
	}
	ct, err = ReadClient("ns", "h2", spec(t, `
tcpKeepalive: {probes: 3, idleTime: 1m, interval: 10s}
http2: {initialStreamWindowSize: 64Ki, initialConnectionWindowSize: 1Mi, maxConcurrentStreams: 100, onInvalidMessage: TerminateStream}
`))
	if err != nil {
		t.Fatal(err)
	}
	if s, err := ResolveClient(ct); err != nil || *s.Keepalive != (Keepalive{Probes: 3, IdleTime: time.Minute, Interval: 10 * time.Second}) ||
		*s.HTTP2 != (HTTP2{InitialStreamWindowSize: 64 << 10, InitialConnectionWindowSize: 1 << 20, MaxConcurrentStreams: 100, TerminateStream: true}) {
		t.Errorf("tcpKeepalive and http2: got %+v, %v", s, err)
	}
	if s, err := ResolveClient(&v1alpha1.ClientTraffic{TCPKeepalive: &v1alpha1.ClientTrafficTCPKeepalive{}}); err != nil || *s.Keepalive != (Keepalive{}) {
		t.Errorf("an empty tcpKeepalive turns keepalive on with the system's timers: got %+v, %v", s, err)
	}
	if want := (&ClientTLS{MinVersion: "1.2", Ciphers: []string{"ECDHE-RSA-AES128-GCM-SHA256", "ECDHE-ECDSA-CHACHA20-POLY1305"}, ECDHCurves: []string{"X25519"},
		SignatureAlgorithms: []string{"rsa_pss_rsae_sha256"}, ALPN: []string{"h2"}}); !reflect.DeepEqual(s.TLS, want) {
		t.Errorf("tls: got %+v, want %+v", s.TLS, want)
	}
}

// TestResolveClientRefuses: values out of bounds, durations that are not Gateway API
// durations and unknown actions are each named (all of them, not only the first).
func TestResolveClientRefuses(t *testing.T) {
	for _, tc := range []struct{ spec, want string }{
		{`timeout: {http: {requestReceivedTimeout: 500ms}}`, "timeout.http.requestReceivedTimeout 500ms is out of range; use 1s to 1h"},
		{`timeout: {http: {requestReceivedTimeout: 2h}}`, "timeout.http.requestReceivedTimeout 2h is out of range"},
		{`timeout: {http: {idleTimeout: 0s}}`, "timeout.http.idleTimeout 0s is out of range; use 1s to 1h"},
		{`timeout: {http: {idleTimeout: 61m}}`, "timeout.http.idleTimeout 61m is out of range"},
		{`timeout: {http: {idleTimeout: 1.5h}}`, `timeout.http.idleTimeout "1.5h" is not a duration`},
		{`connection: {connectionLimit: {closeDelay: 1s}}`, "connection.connectionLimit.value is not set"},
		{`connection: {connectionLimit: {value: 0}}`, "connection.connectionLimit.value 0 is out of range; use 1 to 1048576"},
		{`connection: {connectionLimit: {value: 2000000}}`, "connection.connectionLimit.value 2000000 is out of range"},
		{`connection: {connectionLimit: {value: 1, closeDelay: 1m}}`, "connection.connectionLimit.closeDelay 1m is out of range; use 0s to 10s"},
		{`connection: {maxAcceptPerSocketEvent: 100000}`, "connection.maxAcceptPerSocketEvent 100000 is out of range"},
		{`headers: {withUnderscoresAction: Reject}`, `headers.withUnderscoresAction "Reject" is not an action; use Allow, RejectRequest or DropHeader`},
		{`clientIPDetection: {xForwardedFor: {numTrustedHops: 9}}`, "clientIPDetection.xForwardedFor.numTrustedHops 9 is out of range; use 0 to 8"},
		{`clientIPDetection: {xForwardedFor: {numTrustedHops: -1}}`, "clientIPDetection.xForwardedFor.numTrustedHops -1 is out of range"},
		{`clientIPDetection: {xForwardedFor: {}}`, "clientIPDetection.xForwardedFor sets neither numTrustedHops nor trustedCIDRs"},
		{`clientIPDetection: {xForwardedFor: {numTrustedHops: 1, trustedCIDRs: [10.0.0.0/8]}}`, "clientIPDetection.xForwardedFor has both numTrustedHops and trustedCIDRs; give one"},
		{`clientIPDetection: {xForwardedFor: {trustedCIDRs: [10.0.0.0/8, proxy]}}`, `clientIPDetection.xForwardedFor.trustedCIDRs[1] "proxy" is not a CIDR`},
		{`clientIPDetection: {xForwardedFor: {trustedCIDRs: [10.0.0.1/32, 10.0.0.2/32, 10.0.0.3/32, 10.0.0.4/32, 10.0.0.5/32, 10.0.0.6/32, 10.0.0.7/32, 10.0.0.8/32, 10.0.0.9/32, 10.0.0.10/32, 10.0.0.11/32, 10.0.0.12/32, 10.0.0.13/32, 10.0.0.14/32, 10.0.0.15/32, 10.0.0.16/32, 10.0.0.17/32]}}`, "clientIPDetection.xForwardedFor.trustedCIDRs has 17 entries, at most 16"},
		{`clientIPDetection: {}`, "clientIPDetection has none of xForwardedFor, customHeader and directSourceIP; give one"},
		{`clientIPDetection: {xForwardedFor: {numTrustedHops: 1}, customHeader: {name: x}}`, "clientIPDetection has more than one of xForwardedFor, customHeader and directSourceIP"},
		{`clientIPDetection: {directSourceIP: {}, xForwardedFor: {numTrustedHops: 1}}`, "clientIPDetection has more than one of"},
		{`timeout: {http: {requestHeadersReceivedTimeout: 500ms}}`, "timeout.http.requestHeadersReceivedTimeout 500ms is out of range; use 1s to 1h"},
		{`timeout: {http: {streamIdleTimeout: 2h}}`, "timeout.http.streamIdleTimeout 2h is out of range; use 1s to 1h"},
		{`timeout: {http: {streamIdleTimeout: 0s}}`, "timeout.http.streamIdleTimeout 0s is out of range"},
		{`timeout: {tcp: {tlsHandshakeTimeout: 2h}}`, "timeout.tcp.tlsHandshakeTimeout 2h is out of range; use 1s to 1h"},
		{`connection: {connectionLimit: {value: 1, maxConnectionDuration: 25h}}`, "connection.connectionLimit.maxConnectionDuration 25h is out of range; use 1s to 24h"},
		{`connection: {connectionLimit: {value: 1, maxStreamDuration: 0s}}`, "connection.connectionLimit.maxStreamDuration 0s is out of range"},
		{`connection: {connectionLimit: {value: 1, maxRequestsPerConnection: 0}}`, "connection.connectionLimit.maxRequestsPerConnection 0 is out of range; use 1 to 1048576"},
		{`tls: {clientValidation: {caCertificateRefs: []}}`, "tls.clientValidation.caCertificateRefs is empty"},
		{`tls: {clientValidation: {caCertificateRefs: [{kind: Service, name: ca}]}}`, "tls.clientValidation.caCertificateRefs[0] is a Service; name a ConfigMap or a Secret (core group)"},
		{`tls: {clientValidation: {caCertificateRefs: [{group: example.com, kind: ConfigMap, name: ca}]}}`, "caCertificateRefs[0] is a ConfigMap.example.com"},
		{`tls: {clientValidation: {caCertificateRefs: [{kind: ConfigMap, name: ca, namespace: other}]}}`, "tls.clientValidation.caCertificateRefs[0] names namespace other: only the policy's own namespace"},
		{`tls: {clientValidation: {caCertificateRefs: [{kind: ConfigMap, name: "Not A Name"}]}}`, `caCertificateRefs[0] name "Not A Name" is not an object name`},
		{`tls: {clientValidation: {caCertificateRefs: [{name: a}, {name: b}, {name: c}, {name: d}, {name: e}, {name: f}, {name: g}, {name: h}, {name: i}]}}`, "caCertificateRefs has 9 entries, at most 8"},
		{`tls: {clientValidation: {caCertificateRefs: [{name: ca}], mode: Request}}`, "tls.clientValidation.mode Request is not yet supported by kubelb"},
		{`tls: {clientValidation: {caCertificateRefs: [{name: ca}], mode: RequireAny}}`, "tls.clientValidation.mode RequireAny is not yet supported"},
		{`tls: {clientValidation: {caCertificateRefs: [{name: ca}], mode: Strict}}`, `tls.clientValidation.mode "Strict" is not a mode`},
		{`tls: {clientValidation: {caCertificateRefs: [{name: ca}], mode: RequireAndVerify, optional: true}}`, "tls.clientValidation.optional is true but mode is RequireAndVerify; give one"},
		{`clientIPDetection: {customHeader: {name: "x_real ip"}}`, `clientIPDetection.customHeader.name "x_real ip" is not a header name`},
		{`clientIPDetection: {customHeader: {name: ""}}`, `clientIPDetection.customHeader.name "" is not a header name`},
		{`clientIPDetection: {customHeader: {name: ` + strings.Repeat("a", 256) + `}}`, "is not a header name"},
		{`tls: {minVersion: "1.1"}`, "tls.minVersion 1.1 is refused: TLS 1.0 and 1.1 are deprecated (RFC 8996); use 1.2 or 1.3"},
		{`tls: {maxVersion: "1.4"}`, `tls.maxVersion "1.4" is not a TLS version; use Auto, 1.2 or 1.3`},
		{`tls: {minVersion: "1.3", maxVersion: "1.2"}`, "tls.minVersion 1.3 is above tls.maxVersion 1.2"},
		{`tls: {minVersion: "1.3", ciphers: [AES128-SHA]}`, "tls.ciphers are set but tls.minVersion is 1.3"},
		{`tls: {ciphers: ["RC4-MD5"]}`, `tls.ciphers "RC4-MD5" is not one kubelb knows; use ECDHE-ECDSA-AES128-GCM-SHA256`},
		{`tls: {ciphers: ["AES128-SHA:RC4-MD5"]}`, `tls.ciphers "AES128-SHA:RC4-MD5" is not one kubelb knows`},
		{`tls: {ecdhCurves: [P-224]}`, `tls.ecdhCurves "P-224" is not one kubelb knows; use X25519, P-256, P-384, P-521`},
		{`tls: {signatureAlgorithms: [rsa_pkcs1_md5]}`, `tls.signatureAlgorithms "rsa_pkcs1_md5" is not one kubelb knows`},
		{`tls: {alpnProtocols: [h3]}`, `tls.alpnProtocols "h3" is not one kubelb knows; use h2, http/1.1, http/1.0`},
		{`tls: {ecdhCurves: [` + strings.Repeat("X25519, ", 16) + `X25519]}`, "tls.ecdhCurves has 17 entries; at most 16"},
		{`timeout: {tcp: {idleTimeout: 0s}}`, "timeout.tcp.idleTimeout 0s is out of range; use 1s to 1h"},
		{`timeout: {tcp: {idleTimeout: 2h}}`, "timeout.tcp.idleTimeout 2h is out of range"},
		{`tcpKeepalive: {probes: 0}`, "tcpKeepalive.probes 0 is out of range; use 1 to 16"},
		{`tcpKeepalive: {probes: 100}`, "tcpKeepalive.probes 100 is out of range"},
		{`tcpKeepalive: {idleTime: 3h}`, "tcpKeepalive.idleTime 3h is out of range; use 1s to 2h"},
		{`tcpKeepalive: {interval: 1500ms}`, "tcpKeepalive.interval 1500ms is not whole seconds"},
		{`tcpKeepalive: {interval: 500ms}`, "tcpKeepalive.interval 500ms is out of range"},
		{`connection: {bufferLimit: 2Mi}`, "connection.bufferLimit 2Mi is out of range; use 1Ki to 1Mi"},
		{`connection: {bufferLimit: 512}`, "connection.bufferLimit 512 is out of range"},
		{`connection: {bufferLimit: 1.5Ki}`, `connection.bufferLimit "1.5Ki" is not a whole number of bytes`},
		{`connection: {bufferLimit: lots}`, `connection.bufferLimit "lots" is not a size such as 32768 or 64Ki`},
		{`http2: {initialStreamWindowSize: 32Mi}`, "http2.initialStreamWindowSize 32Mi is out of range; use 65535 to 16Mi"},
		{`http2: {initialConnectionWindowSize: 1024}`, "http2.initialConnectionWindowSize 1024 is out of range"},
		{`http2: {maxConcurrentStreams: 0}`, "http2.maxConcurrentStreams 0 is out of range; use 1 to 1024"},
		{`http2: {maxConcurrentStreams: 1025}`, "http2.maxConcurrentStreams 1025 is out of range"},
		{`http2: {initialConnectionWindowSize: 25Mi}`, "http2.initialConnectionWindowSize 25Mi is out of range; use 65535 to 24Mi"},
		{`http2: {onInvalidMessage: Ignore}`, `http2.onInvalidMessage "Ignore" is not an action; use TerminateConnection or TerminateStream`},
		{`path: {escapedSlashesAction: Unescape}`, `path.escapedSlashesAction "Unescape" is not an action`},
		{`{timeout: {http: {requestReceivedTimeout: 0s, idleTimeout: 2h}}, headers: {withUnderscoresAction: drop}}`,
			"timeout.http.requestReceivedTimeout 0s is out of range; use 1s to 1h\ntimeout.http.idleTimeout 2h is out of range; use 1s to 1h\nheaders.withUnderscoresAction \"drop\" is not an action"},
	} {
		ct, err := ReadClient("ns", "p", spec(t, tc.spec))
		if err != nil {
			t.Fatalf("%s: %v", tc.spec, err)
		}
		if _, err := ResolveClient(ct); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %s", tc.spec, err, tc.want)
		}
	}
}

// TestWhyNotHTTP3: a policy asking for http3 serves its HTTPS listeners over HTTP/3 unless
// it reads a PROXY protocol header (QUIC connections carry none), allows TLS 1.2 at most
// (QUIC is TLS 1.3) or asks for client certificates (not yet over HTTP/3): each is named.
func TestWhyNotHTTP3(t *testing.T) {
	for _, tc := range []struct{ spec, want string }{
		{`http3: {}`, ""},
		{`{http3: {}, tls: {minVersion: "1.2", maxVersion: "1.3"}, connection: {connectionLimit: {value: 10}}}`, ""},
		{`{http3: {}, proxyProtocol: {optional: true}}`, "PROXY protocol header"},
		{`{http3: {}, enableProxyProtocol: true}`, "PROXY protocol header"},
		{`{http3: {}, tls: {maxVersion: "1.2"}}`, "QUIC needs TLS 1.3, and the policy's tls.maxVersion is 1.2"},
		{`{http3: {}, tls: {clientValidation: {caCertificateRefs: [{name: ca}]}}}`, "client certificates over HTTP/3"},
	} {
		ct, err := ReadClient("ns", "p", spec(t, tc.spec))
		if err != nil {
			t.Fatalf("%s: %v", tc.spec, err)
		}
		s, err := ResolveClient(ct)
		if err != nil {
			t.Fatalf("%s: %v", tc.spec, err)
		}
		if got := s.WhyNotHTTP3(); (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%s: got %q, want %q", tc.spec, got, tc.want)
		}
	}
}
