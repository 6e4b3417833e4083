package trafficpolicy

import (
	"errors"
	"fmt"
	"net/netip"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"time"

	"kubelb.dev/kubelb/api/v1alpha1"
)

// ClientKind is Envoy Gateway's ClientTrafficPolicy: how the hub's Envoy treats the
// connections and requests of a Gateway's clients.
const ClientKind = "ClientTrafficPolicy"

// servedClient is the tree of the ClientTrafficPolicy spec fields kubelb serves: two HTTP
// timeouts and the treatment of header names with underscores, on the Gateway's HTTP and
// HTTPS listeners.
var servedClient = map[string]any{
	"targetRef":  nil,
	"targetRefs": nil,
	// targetSelectors: read by Selectors.
	"targetSelectors": nil,
	"timeout": map[string]any{
		"http": map[string]any{"requestReceivedTimeout": nil, "idleTimeout": nil, "requestHeadersReceivedTimeout": nil, "streamIdleTimeout": nil},
		"tcp":  map[string]any{"idleTimeout": nil, "tlsHandshakeTimeout": nil},
	},
	"headers": map[string]any{"withUnderscoresAction": nil, "preserveXRequestID": nil, "enableEnvoyHeaders": nil},
	"connection": map[string]any{
		"connectionLimit": map[string]any{"value": nil, "closeDelay": nil,
			"maxConnectionDuration": nil, "maxRequestsPerConnection": nil, "maxStreamDuration": nil},
		"maxAcceptPerSocketEvent": nil,
		"bufferLimit":             nil,
	},
	"tcpKeepalive": map[string]any{"probes": nil, "idleTime": nil, "interval": nil},
	"http1": map[string]any{
		"enableTrailers": nil, "preserveHeaderCase": nil,
		"http10": map[string]any{"useDefaultHost": nil},
	},
	"http2": map[string]any{
		"initialStreamWindowSize": nil, "initialConnectionWindowSize": nil, "maxConcurrentStreams": nil, "onInvalidMessage": nil,
	},
	// http3 has no fields (Envoy Gateway's HTTP3Settings): any is unknown.
	"http3":               map[string]any{},
	"path":                map[string]any{"escapedSlashesAction": nil, "disableMergeSlashes": nil},
	"enableProxyProtocol": nil,
	"proxyProtocol":       map[string]any{"optional": nil},
	"clientIPDetection": map[string]any{
		"xForwardedFor": map[string]any{"numTrustedHops": nil, "trustedCIDRs": nil},
		"customHeader":  map[string]any{"name": nil, "failClosed": nil},
		// directSourceIP has no fields: the peer's address, kubelb's default.
		"directSourceIP": map[string]any{},
	},
	"tls": map[string]any{"minVersion": nil, "maxVersion": nil, "ciphers": nil, "ecdhCurves": nil, "signatureAlgorithms": nil, "alpnProtocols": nil,
		"clientValidation": map[string]any{"caCertificateRefs": nil, "optional": nil, "mode": nil},
		"session":          map[string]any{"resumption": map[string]any{"stateless": map[string]any{}, "stateful": map[string]any{}}}},
}

// Bounds of a ClientTrafficPolicy (tenants are untrusted: a client connection held open
// holds the hub's memory and a socket, so a tenant may shorten Envoy's idle timeout, never
// lengthen it beyond its default of one hour, nor turn it off).
const (
	MinClientTimeout          = time.Second
	MaxRequestReceivedTimeout = time.Hour
	MaxClientIdleTimeout      = time.Hour
	// MaxConnectionLimit bounds connection.connectionLimit.value (a limit lowers what the
	// hub's Envoy would accept anyway: any value is safe, a higher one pointless).
	MaxConnectionLimit = 1 << 20
	// MaxCloseDelay bounds connection.connectionLimit.closeDelay (a refused connection is
	// held that long).
	MaxCloseDelay = 10 * time.Second
	// MaxAcceptPerSocketEvent bounds connection.maxAcceptPerSocketEvent.
	MaxAcceptPerSocketEvent = 1 << 16
	// MaxTrustedHops bounds clientIPDetection.xForwardedFor.numTrustedHops (proxies in front
	// of the hub: a chain longer than this is not one a load balancer builds).
	MaxTrustedHops = 8
	// MaxTrustedCIDRs bounds clientIPDetection.xForwardedFor.trustedCIDRs (Envoy Gateway's
	// CRD sets no bound; the proxies before a hub fit in a few networks).
	MaxTrustedCIDRs = 16
	// MaxClientIPHeaderLength bounds clientIPDetection.customHeader.name (Envoy Gateway's CRD).
	MaxClientIPHeaderLength = 255
	// MaxTCPIdleTimeout bounds timeout.tcp.idleTimeout: Envoy's TCP proxy default of one
	// hour is the most a tenant may ask (an idle proxied connection holds two sockets of the
	// hub); none (0s) is refused.
	MaxTCPIdleTimeout = time.Hour
	// MaxKeepaliveProbes bounds tcpKeepalive.probes (Linux allows 127; its default is 9).
	MaxKeepaliveProbes = 16
	// MaxKeepaliveTime bounds tcpKeepalive.idleTime and interval (Linux's default idle time,
	// two hours; probes only end dead connections sooner, so any value holds nothing longer;
	// whole seconds from 1s, as the socket options take them).
	MaxKeepaliveTime = 2 * time.Hour
	// MinBufferLimit and MaxBufferLimit bound connection.bufferLimit: Envoy's default of
	// 1 MiB per connection is the most a tenant may ask (the buffer is the hub's memory);
	// below 1 KiB a request line would not fit.
	MinBufferLimit = 1 << 10
	MaxBufferLimit = 1 << 20
	// MinHTTP2Window, MaxHTTP2StreamWindow and MaxHTTP2ConnectionWindow bound http2's
	// window sizes: HTTP/2's own minimum, and Envoy 1.40's defaults (16 MiB per stream,
	// 24 MiB per connection: what a client may make the hub buffer): a tenant may only lower
	// them.
	MinHTTP2Window           = 65535
	MaxHTTP2StreamWindow     = 16 << 20
	MaxHTTP2ConnectionWindow = 24 << 20
	// MaxHTTP2ConcurrentStreams bounds http2.maxConcurrentStreams (Envoy 1.40's default:
	// each stream holds memory of the hub).
	MaxHTTP2ConcurrentStreams = 1024
	// MaxRequestHeadersTimeout bounds timeout.http.requestHeadersReceivedTimeout (none by
	// default: any value only shortens what a client may hold; an hour, as the request's).
	MaxRequestHeadersTimeout = time.Hour
	// MaxClientStreamIdleTimeout bounds timeout.http.streamIdleTimeout here; the hub bounds
	// it further by the tenant's own (spec.http.streamIdleTimeout, 5 minutes by default): a
	// policy may shorten the stream idle timeout, never lengthen it (an idle stream holds
	// the hub's memory and two sockets).
	MaxClientStreamIdleTimeout = time.Hour
	// MaxConnectionDuration and MaxStreamDuration bound connectionLimit.maxConnectionDuration
	// and maxStreamDuration (none by default: they only end connections and streams sooner;
	// a day, the IR's most).
	MaxConnectionDuration = 24 * time.Hour
	MaxStreamDuration     = 24 * time.Hour
	// MaxRequestsPerConnection bounds connectionLimit.maxRequestsPerConnection (none by
	// default: a limit only closes connections sooner).
	MaxRequestsPerConnection = 1 << 20
	// MaxTLSHandshakeTimeout bounds timeout.tcp.tlsHandshakeTimeout (none by default beyond
	// the 15 s the TLS inspector waits for the ClientHello: any value only shortens).
	MaxTLSHandshakeTimeout = time.Hour
	// MaxClientCARefs bounds tls.clientValidation.caCertificateRefs (Envoy Gateway's CRD).
	MaxClientCARefs = 8
)

// The modes of tls.clientValidation kubelb serves (Request and RequireAny, which accept
// certificates that do not verify, are not yet).
const (
	ClientValidationRequireAndVerify = "RequireAndVerify"
	ClientValidationVerifyIfGiven    = "VerifyIfGiven"
)

// The actions of path.escapedSlashesAction.
const (
	EscapedSlashesKeepUnchanged       = "KeepUnchanged"
	EscapedSlashesRejectRequest       = "RejectRequest"
	EscapedSlashesUnescapeAndForward  = "UnescapeAndForward"
	EscapedSlashesUnescapeAndRedirect = "UnescapeAndRedirect"
)

// The actions of headers.withUnderscoresAction.
const (
	UnderscoresAllow         = "Allow"
	UnderscoresRejectRequest = "RejectRequest"
	UnderscoresDropHeader    = "DropHeader"
)

// ClientSettings are a checked ClientTraffic, as the hub's translation uses them. Zero fields
// are unset (Envoy's defaults apply).
type ClientSettings struct {
	// RequestReceivedTimeout bounds the time a client has to send a whole request (the
	// connection manager's request_timeout).
	RequestReceivedTimeout time.Duration
	// IdleTimeout closes a client connection without requests for this long
	// (common_http_protocol_options.idle_timeout).
	IdleTimeout time.Duration
	// WithUnderscores is UnderscoresAllow, UnderscoresRejectRequest or UnderscoresDropHeader
	// ("": unset).
	WithUnderscores string
	// ConnectionLimit is the most connections open at once on each HTTP and HTTPS filter
	// chain (0: no limit); one over it is closed after CloseDelay (0: at once).
	ConnectionLimit uint64
	CloseDelay      time.Duration
	// MaxAcceptPerSocketEvent is how many pending connections Envoy accepts per socket event
	// (0: all, Envoy's default).
	MaxAcceptPerSocketEvent uint32
	// XFFTrustedHops (0: none, the peer's address) is how many proxies before the hub the
	// X-Forwarded-For header is trusted for: the client's address is the XFFTrustedHops-th
	// from its right.
	XFFTrustedHops uint32
	// XFFTrustedCIDRs (nil: none) makes the client's address the rightmost address of
	// X-Forwarded-For outside these CIDRs (canonical, sorted), the peer's when the peer is
	// outside them.
	XFFTrustedCIDRs []string
	// ClientIPHeader ("": none) is the header the client's address is read from (lower
	// case); ClientIPHeaderFailClosed answers 403 to requests without a valid one (else the
	// peer's address is used).
	ClientIPHeader           string
	ClientIPHeaderFailClosed bool
	// TLS (nil: Envoy's defaults) are the TLS settings of the terminating HTTPS and TLS
	// listeners.
	TLS *ClientTLS
	// TCPIdleTimeout (0: Envoy's default, one hour) closes a proxied TCP connection without
	// a byte either way for this long.
	TCPIdleTimeout time.Duration
	// Keepalive (nil: none) turns on TCP keepalive on the listeners' sockets.
	Keepalive *Keepalive
	// BufferLimit (0: Envoy's default, 1 MiB) is the most bytes buffered per connection.
	BufferLimit uint32
	// HTTP1 options: trailers passed on, header case kept, HTTP/1.0 accepted (with the
	// listener's hostname as the default Host).
	HTTP1Trailers, HTTP1PreserveHeaderCase, HTTP10, HTTP10DefaultHost bool
	// HTTP2 (nil: Envoy's defaults) are the HTTP/2 options.
	HTTP2 *HTTP2
	// HTTP3 serves the HTTPS listeners over HTTP/3 (QUIC) too, on a UDP port of the same
	// number, advertised by an alt-svc response header.
	HTTP3 bool
	// EscapedSlashes ("": Envoy's default, kept) is path.escapedSlashesAction; MergeSlashes
	// merges adjacent slashes of paths (a policy with path, unless disableMergeSlashes).
	EscapedSlashes string
	MergeSlashes   bool
	// PreserveXRequestID keeps a client's X-Request-ID.
	PreserveXRequestID bool
	// ProxyProtocol reads a PROXY protocol header on every connection; ProxyProtocolOptional
	// accepts connections without one.
	ProxyProtocol, ProxyProtocolOptional bool
	// RequestHeadersTimeout (0: none) bounds the time a client has to send a request's
	// headers (the connection manager's request_headers_timeout).
	RequestHeadersTimeout time.Duration
	// StreamIdleTimeout (0: the tenant's) ends a stream without a byte either way for this
	// long; the hub applies it only below the tenant's own.
	StreamIdleTimeout time.Duration
	// MaxConnectionDuration (0: none) drains and closes a connection that long after it
	// opened; MaxRequestsPerConnection (0: none) after that many requests;
	// MaxStreamDuration (0: none) resets a stream that long after it began.
	MaxConnectionDuration    time.Duration
	MaxRequestsPerConnection uint32
	MaxStreamDuration        time.Duration
	// TLSHandshakeTimeout (0: none) closes a connection whose TLS handshake has not ended
	// that long after it was accepted.
	TLSHandshakeTimeout time.Duration
	// DirectSourceIP: the policy says the client's address is the peer's (the default).
	DirectSourceIP bool
	// SuppressEnvoyHeaders: headers.enableEnvoyHeaders is false (Envoy adds no x-envoy-
	// headers; unset or true keep kubelb's default, which adds them).
	SuppressEnvoyHeaders bool
}

// ClientValidation is a checked tls.clientValidation: the CA certificate references (of the
// policy's namespace) and whether a client may go without a certificate.
type ClientValidation struct {
	Refs     []CARef
	Optional bool
}

// CARef is a ConfigMap or Secret (Kind) holding CA certificates in its key ca.crt.
type CARef struct {
	Kind, Name string
}

// Keepalive is a checked tcpKeepalive (zero fields: the system's defaults).
type Keepalive struct {
	Probes             uint32
	IdleTime, Interval time.Duration
}

// HTTP2 is a checked http2 (zero fields: Envoy's defaults).
type HTTP2 struct {
	InitialStreamWindowSize, InitialConnectionWindowSize, MaxConcurrentStreams uint32
	// TerminateStream resets only the stream of an invalid message (onInvalidMessage
	// TerminateStream), not the connection.
	TerminateStream bool
}

// ClientTLS is a checked tls of a ClientTrafficPolicy. Empty fields keep Envoy's defaults.
type ClientTLS struct {
	// MinVersion and MaxVersion are "1.2" or "1.3" ("": Envoy's default, 1.2 and 1.3).
	MinVersion, MaxVersion string
	// Ciphers, ECDHCurves and SignatureAlgorithms are BoringSSL's names, from the lists
	// kubelb knows Envoy accepts; ALPN is h2, http/1.1 or http/1.0.
	Ciphers, ECDHCurves, SignatureAlgorithms, ALPN []string
	// ClientValidation (nil: none) asks clients of HTTPS listeners for a certificate.
	ClientValidation *ClientValidation
	// Session (nil: kubelb's default, Envoy's: both resumptions) says which TLS session
	// resumptions are offered.
	Session *SessionResumption
}

// SessionResumption is a checked tls.session: stateless (session tickets) and stateful (a
// session cache) resumption, each offered or not.
type SessionResumption struct {
	Stateless, Stateful bool
}

// MaxTLSListEntries bounds each list of a ClientTrafficPolicy's tls.
const MaxTLSListEntries = 16

// The names a ClientTrafficPolicy's tls lists may hold: BoringSSL's, as Envoy reads them (an
// unknown name would make Envoy refuse the whole listener).
var (
	TLSCiphers = []string{
		"ECDHE-ECDSA-AES128-GCM-SHA256", "ECDHE-RSA-AES128-GCM-SHA256", "ECDHE-ECDSA-AES256-GCM-SHA384", "ECDHE-RSA-AES256-GCM-SHA384",
		"ECDHE-ECDSA-CHACHA20-POLY1305", "ECDHE-RSA-CHACHA20-POLY1305", "ECDHE-ECDSA-AES128-SHA", "ECDHE-RSA-AES128-SHA",
		"ECDHE-ECDSA-AES256-SHA", "ECDHE-RSA-AES256-SHA", "AES128-GCM-SHA256", "AES256-GCM-SHA384", "AES128-SHA", "AES256-SHA",
	}
	TLSCurves              = []string{"X25519", "P-256", "P-384", "P-521"}
	TLSSignatureAlgorithms = []string{
		"rsa_pkcs1_sha256", "rsa_pkcs1_sha384", "rsa_pkcs1_sha512", "ecdsa_secp256r1_sha256", "ecdsa_secp384r1_sha384",
		"ecdsa_secp521r1_sha512", "rsa_pss_rsae_sha256", "rsa_pss_rsae_sha384", "rsa_pss_rsae_sha512", "ed25519",
	}
	TLSALPN = []string{"h2", "http/1.1", "http/1.0"}
)

// ReadClient reads a ClientTrafficPolicy's spec into kubelb's subset: what a Gateway's Route
// context carries. It fails when the spec has fields kubelb does not serve, naming them, or
// when a field has the wrong type. ResolveClient then checks the values.
func ReadClient(namespace, name string, spec map[string]any) (*v1alpha1.ClientTraffic, error) {
	out := &v1alpha1.ClientTraffic{}
	if err := readSpec(spec, servedClient, out); err != nil {
		return nil, err
	}
	out.Namespace, out.Name = namespace, name
	return out, nil
}

// ResolveClient checks a ClientTraffic (from a tenant's policy, or from a Route) and returns
// its settings, or every problem found.
func ResolveClient(ct *v1alpha1.ClientTraffic) (*ClientSettings, error) {
	var errs []error
	out := &ClientSettings{}
	if t := ct.Timeout; t != nil && t.HTTP != nil {
		var err error
		if out.RequestReceivedTimeout, err = clientDuration("timeout.http.requestReceivedTimeout", t.HTTP.RequestReceivedTimeout, MaxRequestReceivedTimeout); err != nil {
			errs = append(errs, err)
		}
		if out.IdleTimeout, err = clientDuration("timeout.http.idleTimeout", t.HTTP.IdleTimeout, MaxClientIdleTimeout); err != nil {
			errs = append(errs, err)
		}
		if out.RequestHeadersTimeout, err = clientDuration("timeout.http.requestHeadersReceivedTimeout", t.HTTP.RequestHeadersReceivedTimeout, MaxRequestHeadersTimeout); err != nil {
			errs = append(errs, err)
		}
		if out.StreamIdleTimeout, err = clientDuration("timeout.http.streamIdleTimeout", t.HTTP.StreamIdleTimeout, MaxClientStreamIdleTimeout); err != nil {
			errs = append(errs, err)
		}
	}
	if t := ct.Timeout; t != nil && t.TCP != nil {
		var err error
		if out.TCPIdleTimeout, err = clientDuration("timeout.tcp.idleTimeout", t.TCP.IdleTimeout, MaxTCPIdleTimeout); err != nil {
			errs = append(errs, err)
		}
		if out.TLSHandshakeTimeout, err = clientDuration("timeout.tcp.tlsHandshakeTimeout", t.TCP.TLSHandshakeTimeout, MaxTLSHandshakeTimeout); err != nil {
			errs = append(errs, err)
		}
	}
	if h := ct.Headers; h != nil {
		switch a := h.WithUnderscoresAction; a {
		case "", UnderscoresAllow, UnderscoresRejectRequest, UnderscoresDropHeader:
			out.WithUnderscores = a
		default:
			errs = append(errs, fmt.Errorf("headers.withUnderscoresAction %q is not an action; use Allow, RejectRequest or DropHeader", truncate(a)))
		}
		out.PreserveXRequestID = isTrue(h.PreserveXRequestID)
		out.SuppressEnvoyHeaders = h.EnableEnvoyHeaders != nil && !*h.EnableEnvoyHeaders
	}
	if c := ct.Connection; c != nil {
		if l := c.ConnectionLimit; l != nil {
			switch {
			case l.Value == nil:
				errs = append(errs, errors.New("connection.connectionLimit.value is not set; give the most connections open at once"))
			case *l.Value < 1 || *l.Value > MaxConnectionLimit:
				errs = append(errs, fmt.Errorf("connection.connectionLimit.value %d is out of range; use 1 to %d", *l.Value, MaxConnectionLimit))
			default:
				out.ConnectionLimit = uint64(*l.Value)
			}
			if l.CloseDelay != "" {
				if !durationRE.MatchString(l.CloseDelay) {
					errs = append(errs, fmt.Errorf("connection.connectionLimit.closeDelay %q is not a duration such as 500ms, 3s or 1h", truncate(l.CloseDelay)))
				} else if d, err := time.ParseDuration(l.CloseDelay); err != nil || d > MaxCloseDelay {
					errs = append(errs, fmt.Errorf("connection.connectionLimit.closeDelay %s is out of range; use 0s to %s", truncate(l.CloseDelay), MaxCloseDelay))
				} else {
					out.CloseDelay = d
				}
			}
			errs = append(errs, resolveConnectionLifetime(l, out)...)
		}
		if n := c.MaxAcceptPerSocketEvent; n != nil {
			if *n > MaxAcceptPerSocketEvent {
				errs = append(errs, fmt.Errorf("connection.maxAcceptPerSocketEvent %d is out of range; use 0 (all) to %d", *n, MaxAcceptPerSocketEvent))
			} else {
				out.MaxAcceptPerSocketEvent = *n
			}
		}
		if b := c.BufferLimit; b != nil {
			var err error
			if out.BufferLimit, err = byteSize("connection.bufferLimit", b, MinBufferLimit, MaxBufferLimit); err != nil {
				errs = append(errs, err)
			}
		}
	}
	errs = append(errs, resolveClientProtocols(ct, out)...)
	if d := ct.ClientIPDetection; d != nil {
		errs = append(errs, resolveClientIP(d, out)...)
	}
	if t := ct.TLS; t != nil {
		var tlsErrs []error
		out.TLS, tlsErrs = resolveClientTLS(t)
		errs = append(errs, tlsErrs...)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// trustedCIDRs checks clientIPDetection.xForwardedFor.trustedCIDRs: 1 to MaxTrustedCIDRs
// CIDRs, returned canonical (masked), sorted and without repeats.
func trustedCIDRs(in []string) ([]string, error) {
	const field = "clientIPDetection.xForwardedFor.trustedCIDRs"
	if len(in) > MaxTrustedCIDRs {
		return nil, fmt.Errorf("%s has %d entries, at most %d", field, len(in), MaxTrustedCIDRs)
	}
	out := make([]string, 0, len(in))
	for i, c := range in {
		p, err := netip.ParsePrefix(c)
		if err != nil {
			return nil, fmt.Errorf("%s[%d] %q is not a CIDR such as 10.0.0.0/8", field, i, truncate(c))
		}
		out = append(out, p.Masked().String())
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// ipHeaderNameRE is Envoy Gateway's pattern of clientIPDetection.customHeader.name.
var ipHeaderNameRE = regexp.MustCompile(`^[A-Za-z0-9-]+$`)

// WhyNotHTTP3 says why the HTTPS listeners of a policy asking for http3 cannot be served
// over HTTP/3, "" when they can: a PROXY protocol header (QUIC connections carry none), TLS
// 1.2 at most (QUIC is TLS 1.3), or client certificates (not yet over HTTP/3).
func (s *ClientSettings) WhyNotHTTP3() string {
	switch {
	case s.ProxyProtocol:
		return "the policy reads a PROXY protocol header, which HTTP/3 (QUIC) connections do not carry"
	case s.TLS != nil && s.TLS.MaxVersion == "1.2":
		return "QUIC needs TLS 1.3, and the policy's tls.maxVersion is 1.2"
	case s.TLS != nil && s.TLS.ClientValidation != nil:
		return "kubelb does not yet validate client certificates over HTTP/3, and the policy asks for them (tls.clientValidation)"
	}
	return ""
}

// IsZero reports whether s asks for nothing (Envoy's defaults everywhere; directSourceIP
// states the default).
func (s *ClientSettings) IsZero() bool {
	c := *s
	c.DirectSourceIP = false // the peer's address: the default, stated
	return reflect.ValueOf(c).IsZero()
}

// resolveClientIP checks clientIPDetection: exactly one of xForwardedFor (numTrustedHops 0 to
// MaxTrustedHops, or up to MaxTrustedCIDRs trustedCIDRs), customHeader (a header name) and
// directSourceIP.
func resolveClientIP(d *v1alpha1.ClientTrafficIPDetection, out *ClientSettings) []error {
	var errs []error
	given := 0
	for _, set := range []bool{d.XForwardedFor != nil, d.CustomHeader != nil, d.DirectSourceIP != nil} {
		if set {
			given++
		}
	}
	switch {
	case given > 1:
		return []error{errors.New("clientIPDetection has more than one of xForwardedFor, customHeader and directSourceIP; give one")}
	case given == 0:
		return []error{errors.New("clientIPDetection has none of xForwardedFor, customHeader and directSourceIP; give one")}
	case d.DirectSourceIP != nil:
		// The peer's address: what the hub's Envoy uses without a policy (use_remote_address).
		out.DirectSourceIP = true
	case d.XForwardedFor != nil && len(d.XForwardedFor.TrustedCIDRs) > 0:
		if d.XForwardedFor.NumTrustedHops != nil {
			return []error{errors.New("clientIPDetection.xForwardedFor has both numTrustedHops and trustedCIDRs; give one")}
		}
		cidrs, err := trustedCIDRs(d.XForwardedFor.TrustedCIDRs)
		if err != nil {
			return []error{err}
		}
		out.XFFTrustedCIDRs = cidrs
	case d.XForwardedFor != nil:
		switch n := d.XForwardedFor.NumTrustedHops; {
		case n == nil:
			errs = append(errs, errors.New("clientIPDetection.xForwardedFor sets neither numTrustedHops nor trustedCIDRs; give the number of proxies before the hub or their networks"))
		case *n < 0 || *n > MaxTrustedHops:
			errs = append(errs, fmt.Errorf("clientIPDetection.xForwardedFor.numTrustedHops %d is out of range; use 0 to %d", *n, MaxTrustedHops))
		default:
			out.XFFTrustedHops = uint32(*n)
		}
	default:
		h := d.CustomHeader
		switch {
		case h.Name == "" || len(h.Name) > MaxClientIPHeaderLength || !ipHeaderNameRE.MatchString(h.Name):
			errs = append(errs, fmt.Errorf("clientIPDetection.customHeader.name %q is not a header name (letters, digits and '-', 1 to %d characters)", truncate(h.Name), MaxClientIPHeaderLength))
		default:
			out.ClientIPHeader = strings.ToLower(h.Name)
			out.ClientIPHeaderFailClosed = h.FailClosed != nil && *h.FailClosed
		}
	}
	return errs
}

// clientDuration reads a Gateway API duration from MinClientTimeout to highest ("" : 0).
func clientDuration(field, v string, highest time.Duration) (time.Duration, error) {
	if v == "" {
		return 0, nil
	}
	return durationIn(field, v, MinClientTimeout, highest)
}

// tlsVersions orders the TLS versions a ClientTrafficPolicy may ask for (Auto: Envoy's
// default); 1.0 and 1.1 are refused (deprecated, RFC 8996).
var tlsVersions = map[string]int{"1.2": 2, "1.3": 3}

// resolveClientTLS checks tls: versions 1.2 or 1.3 (min not above max), lists of known names
// (MaxTLSListEntries each), no ciphers when only TLS 1.3 is allowed (they would not apply).
func resolveClientTLS(t *v1alpha1.ClientTrafficTLS) (*ClientTLS, []error) {
	var errs []error
	out := &ClientTLS{}
	version := func(field, v string) string {
		switch {
		case v == "" || v == "Auto":
			return ""
		case v == "1.0" || v == "1.1":
			errs = append(errs, fmt.Errorf("tls.%s %s is refused: TLS 1.0 and 1.1 are deprecated (RFC 8996); use 1.2 or 1.3", field, v))
		case tlsVersions[v] == 0:
			errs = append(errs, fmt.Errorf("tls.%s %q is not a TLS version; use Auto, 1.2 or 1.3", field, truncate(v)))
		}
		return v
	}
	out.MinVersion, out.MaxVersion = version("minVersion", t.MinVersion), version("maxVersion", t.MaxVersion)
	if lo, hi := tlsVersions[out.MinVersion], tlsVersions[out.MaxVersion]; lo > 0 && hi > 0 && lo > hi {
		errs = append(errs, fmt.Errorf("tls.minVersion %s is above tls.maxVersion %s", out.MinVersion, out.MaxVersion))
	}
	list := func(field string, in, known []string) []string {
		if len(in) > MaxTLSListEntries {
			errs = append(errs, fmt.Errorf("tls.%s has %d entries; at most %d", field, len(in), MaxTLSListEntries))
			return nil
		}
		for _, v := range in {
			if !slices.Contains(known, v) {
				errs = append(errs, fmt.Errorf("tls.%s %q is not one kubelb knows; use %s", field, truncate(v), strings.Join(known, ", ")))
				return nil
			}
		}
		return slices.Clone(in)
	}
	out.Ciphers = list("ciphers", t.Ciphers, TLSCiphers)
	out.ECDHCurves = list("ecdhCurves", t.ECDHCurves, TLSCurves)
	out.SignatureAlgorithms = list("signatureAlgorithms", t.SignatureAlgorithms, TLSSignatureAlgorithms)
	out.ALPN = list("alpnProtocols", t.ALPNProtocols, TLSALPN)
	if ss := t.Session; ss != nil {
		// Envoy Gateway's reading: a session without resumption offers none.
		out.Session = &SessionResumption{}
		if r := ss.Resumption; r != nil {
			out.Session.Stateless, out.Session.Stateful = r.Stateless != nil, r.Stateful != nil
		}
	}
	if v := t.ClientValidation; v != nil {
		var vErrs []error
		out.ClientValidation, vErrs = resolveClientValidation(v)
		errs = append(errs, vErrs...)
	}
	if out.MinVersion == "1.3" && len(t.Ciphers) > 0 {
		errs = append(errs, errors.New("tls.ciphers are set but tls.minVersion is 1.3: TLS 1.3 does not use them; remove them"))
	}
	return out, errs
}
