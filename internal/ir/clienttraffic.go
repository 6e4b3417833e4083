package ir

import (
	"fmt"
	"net/netip"
	"reflect"
	"time"
)

// ClientTraffic is how an HTTP or HTTPS listener (its connection managers, and its filter
// chains for the connection limit) — or, for its connection settings only, a TCP listener;
// for its HTTP settings only, an HTTP3 listener —
// treats its clients' connections and requests: Envoy Gateway's ClientTrafficPolicy as kubelb serves it. Zero
// fields keep Envoy's defaults.
type ClientTraffic struct {
	// RequestReceivedTimeout ends a request the client has not sent whole (headers and body)
	// within this long of its first byte (Envoy answers 408; the connection manager's
	// request_timeout).
	RequestReceivedTimeout Duration `json:"requestReceivedTimeout,omitempty"`
	// IdleTimeout closes a client connection without requests for this long
	// (common_http_protocol_options.idle_timeout; Envoy's default is one hour).
	IdleTimeout Duration `json:"idleTimeout,omitempty"`
	// HeadersWithUnderscores is what is done with a request header whose name has an
	// underscore ("": Envoy's default, allowed).
	HeadersWithUnderscores UnderscoresAction `json:"headersWithUnderscores,omitempty"`
	// ConnectionLimit (0: none) is the most connections open at once on each filter chain of
	// the listener (Envoy's connection_limit network filter, first in every chain: one
	// counter per chain); a connection over it is closed after ConnectionLimitDelay.
	ConnectionLimit      uint64   `json:"connectionLimit,omitempty"`
	ConnectionLimitDelay Duration `json:"connectionLimitDelay,omitempty"`
	// MaxAcceptPerSocketEvent (0: all, Envoy's default) is how many pending connections the
	// listener accepts per socket event.
	MaxAcceptPerSocketEvent uint32 `json:"maxAcceptPerSocketEvent,omitempty"`
	// XFFTrustedHops (0: the peer's address) makes the client's address the
	// XFFTrustedHops-th address from the right of X-Forwarded-For (the connection manager's
	// xff_num_trusted_hops): what authorizations by client address and rate limits see.
	XFFTrustedHops uint32 `json:"xffTrustedHops,omitempty"`
	// XFFTrustedCIDRs (canonical CIDRs, sorted; nil: none) makes the client's address the
	// rightmost address of X-Forwarded-For outside them, the peer's when the peer is outside
	// them (Envoy's xff original IP detection extension, which Envoy does not allow with
	// use_remote_address).
	XFFTrustedCIDRs []string `json:"xffTrustedCIDRs,omitempty"`
	// ClientIPHeader ("": none; lower case) makes the client's address the value of this
	// header (Envoy's custom header original IP detection); without a valid one the peer's
	// address is used, or with ClientIPHeaderFailClosed the request is answered 403.
	ClientIPHeader           string `json:"clientIPHeader,omitempty"`
	ClientIPHeaderFailClosed bool   `json:"clientIPHeaderFailClosed,omitempty"`
	// TLS (nil: Envoy's defaults) are the TLS parameters of the listener's terminating
	// filter chains (HTTPS listeners only).
	TLS *ClientTLS `json:"tls,omitempty"`
	// RequestHeadersTimeout (0: none) ends a request whose headers have not all arrived
	// this long after their first byte (the connection manager's request_headers_timeout;
	// Envoy answers 408).
	RequestHeadersTimeout Duration `json:"requestHeadersTimeout,omitempty"`
	// StreamIdleTimeout (0: the listener's) replaces the listener's stream idle timeout (the
	// front ends set it only below the tenant's).
	StreamIdleTimeout Duration `json:"streamIdleTimeout,omitempty"`
	// MaxConnectionDuration (0: none) drains and closes a client connection that long after
	// it opened; MaxRequestsPerConnection (0: none) after that many requests;
	// MaxStreamDuration (0: none) resets a stream that long after it began (common HTTP
	// protocol options).
	MaxConnectionDuration    Duration `json:"maxConnectionDuration,omitempty"`
	MaxRequestsPerConnection uint32   `json:"maxRequestsPerConnection,omitempty"`
	MaxStreamDuration        Duration `json:"maxStreamDuration,omitempty"`
	// TLSHandshakeTimeout (0: none) closes a connection to a terminating filter chain whose
	// TLS handshake has not ended that long after it was accepted (the chain's
	// transport_socket_connect_timeout).
	TLSHandshakeTimeout Duration `json:"tlsHandshakeTimeout,omitempty"`

	// The fields below are connection settings: with ProxyProtocol, TCPIdleTimeout,
	// Keepalive and BufferLimit they are the only ones a TCP listener may have.

	// ProxyProtocol (nil: none) makes the listener read a PROXY protocol header (v1 or v2)
	// first on every connection (Envoy's proxy_protocol listener filter): the connection's
	// client address is the header's, for everything after (source ranges, authorizations,
	// rate limits, X-Forwarded-For).
	ProxyProtocol *ProxyProtocol `json:"proxyProtocol,omitempty"`
	// TCPIdleTimeout (0: Envoy's default, one hour) closes a proxied TCP connection (TCP
	// listeners, and proxying chains of HTTPS listeners) without a byte either way for this
	// long (the TCP proxy's idle_timeout).
	TCPIdleTimeout Duration `json:"tcpIdleTimeout,omitempty"`
	// Keepalive (nil: none) turns TCP keepalive on for the listener's connections.
	Keepalive *TCPKeepalive `json:"keepalive,omitempty"`
	// BufferLimit (0: Envoy's default, 1 MiB) is the most bytes the listener buffers per
	// connection (per_connection_buffer_limit_bytes).
	BufferLimit uint32 `json:"bufferLimit,omitempty"`

	// HTTP options of the connection managers (HTTP, HTTPS).
	HTTP *ClientHTTP `json:"http,omitempty"`
}

// ProxyProtocol is the PROXY protocol of a listener.
type ProxyProtocol struct {
	// Optional accepts connections without a header (their address is the peer's);
	// otherwise they are closed.
	Optional bool `json:"optional,omitempty"`
}

// TCPKeepalive are the keepalive timers of a listener's sockets, in seconds (0: the
// system's default).
type TCPKeepalive struct {
	Probes   uint32 `json:"probes,omitempty"`
	IdleTime uint32 `json:"idleTime,omitempty"`
	Interval uint32 `json:"interval,omitempty"`
}

// ClientHTTP are HTTP/1, HTTP/2 and path options of a listener's connection managers. Zero
// fields keep Envoy's defaults.
type ClientHTTP struct {
	// HTTP1Trailers passes HTTP/1 trailers on; HTTP1PreserveHeaderCase keeps the case of
	// request header names the client wrote (Envoy's preserve_case header formatter).
	HTTP1Trailers           bool `json:"trailers,omitempty"`
	HTTP1PreserveHeaderCase bool `json:"preserveHeaderCase,omitempty"`
	// HTTP10 accepts HTTP/1.0 requests; one without a Host header gets HTTP10DefaultHost
	// ("": none, such a request is refused).
	HTTP10            bool   `json:"acceptHTTP10,omitempty"`
	HTTP10DefaultHost string `json:"defaultHostHTTP10,omitempty"`
	// HTTP/2: window sizes in bytes, the most concurrent streams per connection, and
	// whether an invalid message resets only its stream (else the connection).
	HTTP2InitialStreamWindowSize     uint32 `json:"http2InitialStreamWindowSize,omitempty"`
	HTTP2InitialConnectionWindowSize uint32 `json:"http2InitialConnectionWindowSize,omitempty"`
	HTTP2MaxConcurrentStreams        uint32 `json:"http2MaxConcurrentStreams,omitempty"`
	HTTP2TerminateStream             bool   `json:"http2TerminateStream,omitempty"`
	// EscapedSlashes is what is done with %2F, %2f, %5C and %5c in paths ("": Envoy's
	// default, kept); MergeSlashes merges adjacent slashes.
	EscapedSlashes EscapedSlashesAction `json:"escapedSlashes,omitempty"`
	MergeSlashes   bool                 `json:"mergeSlashes,omitempty"`
	// PreserveXRequestID keeps a client's X-Request-ID (else Envoy replaces it).
	PreserveXRequestID bool `json:"preserveXRequestID,omitempty"`
	// SuppressEnvoyHeaders keeps the router from adding x-envoy- headers to requests and
	// responses.
	SuppressEnvoyHeaders bool `json:"suppressEnvoyHeaders,omitempty"`
}

// EscapedSlashesAction is what is done with escaped slashes in request paths.
type EscapedSlashesAction string

// The actions of ClientHTTP.EscapedSlashes.
const (
	EscapedSlashesKeep               EscapedSlashesAction = "KeepUnchanged"
	EscapedSlashesReject             EscapedSlashesAction = "RejectRequest"
	EscapedSlashesUnescapeAndForward EscapedSlashesAction = "UnescapeAndForward"
	EscapedSlashesUnescapeRedirect   EscapedSlashesAction = "UnescapeAndRedirect"
)

// Bounds of the connection settings (the front ends bound them further).
const (
	MaxClientKeepaliveProbes = 127
	MaxClientKeepaliveTime   = 32767 // seconds: Linux's most
	MaxClientBufferLimit     = 1 << 20
	MinHTTP2Window           = 65535
	MaxHTTP2Window           = 1<<31 - 1
)

// validateConnection checks the connection settings.
func (c *ClientTraffic) validateConnection() error {
	if c.TCPIdleTimeout < 0 || c.TCPIdleTimeout.D() > MaxClientTimeout {
		return fmt.Errorf("TCP idle timeout %s out of range 0 to %s", c.TCPIdleTimeout.D(), MaxClientTimeout)
	}
	if k := c.Keepalive; k != nil && (k.Probes > MaxClientKeepaliveProbes || k.IdleTime > MaxClientKeepaliveTime || k.Interval > MaxClientKeepaliveTime) {
		return fmt.Errorf("TCP keepalive %+v out of range", *k)
	}
	if c.BufferLimit > MaxClientBufferLimit {
		return fmt.Errorf("a buffer limit of %d bytes, at most %d", c.BufferLimit, MaxClientBufferLimit)
	}
	return nil
}

// validate checks the HTTP options.
func (h *ClientHTTP) validate() error {
	if h == nil {
		return nil
	}
	for _, w := range []uint32{h.HTTP2InitialStreamWindowSize, h.HTTP2InitialConnectionWindowSize} {
		if w != 0 && (w < MinHTTP2Window || w > MaxHTTP2Window) {
			return fmt.Errorf("an HTTP/2 window of %d bytes, %d to %d", w, MinHTTP2Window, MaxHTTP2Window)
		}
	}
	if h.HTTP2MaxConcurrentStreams > MaxHTTP2Window {
		return fmt.Errorf("%d concurrent HTTP/2 streams", h.HTTP2MaxConcurrentStreams)
	}
	if h.HTTP10DefaultHost != "" && (!h.HTTP10 || !validDefaultHost(h.HTTP10DefaultHost)) {
		return fmt.Errorf("HTTP/1.0 default host %q", h.HTTP10DefaultHost)
	}
	switch h.EscapedSlashes {
	case "", EscapedSlashesKeep, EscapedSlashesReject, EscapedSlashesUnescapeAndForward, EscapedSlashesUnescapeRedirect:
	default:
		return fmt.Errorf("escaped slashes action %q", h.EscapedSlashes)
	}
	return nil
}

// validDefaultHost: a lower-case DNS name of letters, digits, '-' and '.', at most 253
// characters (no wildcard).
func validDefaultHost(h string) bool {
	if len(h) > 253 {
		return false
	}
	for _, r := range h {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '.') {
			return false
		}
	}
	return true
}

// TCPOnly reports whether c has only settings a TCP listener may have.
func (c *ClientTraffic) TCPOnly() bool {
	tcp := ClientTraffic{ProxyProtocol: c.ProxyProtocol, TCPIdleTimeout: c.TCPIdleTimeout, Keepalive: c.Keepalive, BufferLimit: c.BufferLimit}
	return reflect.DeepEqual(*c, tcp)
}

// httpOnly reports whether c has only settings of the connection managers (none of the TCP
// connections', the connection limit's, nor TLS parameters): what an HTTP3 listener may have.
func (c *ClientTraffic) httpOnly() bool {
	return c.ProxyProtocol == nil && c.TCPIdleTimeout == 0 && c.Keepalive == nil && c.BufferLimit == 0 && c.ConnectionLimit == 0 &&
		c.ConnectionLimitDelay == 0 && c.MaxAcceptPerSocketEvent == 0 && c.TLS == nil && c.TLSHandshakeTimeout == 0
}

// ForHTTP3 is c without what an HTTP3 listener cannot have (httpOnly), nil when nothing is
// left.
func (c *ClientTraffic) ForHTTP3() *ClientTraffic {
	if c == nil {
		return nil
	}
	h := *c
	h.ProxyProtocol, h.TCPIdleTimeout, h.Keepalive, h.BufferLimit, h.ConnectionLimit = nil, 0, nil, 0, 0
	h.ConnectionLimitDelay, h.MaxAcceptPerSocketEvent, h.TLS, h.TLSHandshakeTimeout = 0, 0, nil, 0
	if reflect.ValueOf(h).IsZero() {
		return nil
	}
	return &h
}

// ClientTLS are TLS parameters of a listener's terminating filter chains (DownstreamTlsContext
// common_tls_context.tls_params and alpn_protocols). Empty fields keep Envoy's defaults.
type ClientTLS struct {
	// MinVersion and MaxVersion: "1.2" or "1.3" ("": Envoy's default).
	MinVersion string `json:"minVersion,omitempty"`
	MaxVersion string `json:"maxVersion,omitempty"`
	// Ciphers, ECDHCurves and SignatureAlgorithms are BoringSSL names (the front ends allow
	// only names Envoy knows).
	Ciphers             []string `json:"ciphers,omitempty"`
	ECDHCurves          []string `json:"ecdhCurves,omitempty"`
	SignatureAlgorithms []string `json:"signatureAlgorithms,omitempty"`
	// ALPN replaces the protocols offered on chains serving HTTP (h2 and http/1.1).
	ALPN []string `json:"alpn,omitempty"`
	// NoStatelessResumption and NoStatefulResumption turn off TLS session resumption by
	// session tickets and by Envoy's session cache (both on by default).
	NoStatelessResumption bool `json:"noStatelessResumption,omitempty"`
	NoStatefulResumption  bool `json:"noStatefulResumption,omitempty"`
}

// MaxClientTLSListEntries bounds each list of ClientTLS.
const MaxClientTLSListEntries = 32

// validate checks versions and the lists' sizes and characters.
func (c *ClientTLS) validate() error {
	if c == nil {
		return nil
	}
	for _, v := range []string{c.MinVersion, c.MaxVersion} {
		if v != "" && v != "1.2" && v != "1.3" {
			return fmt.Errorf("TLS version %q (1.2 or 1.3)", v)
		}
	}
	if c.MinVersion == "1.3" && c.MaxVersion == "1.2" {
		return fmt.Errorf("TLS minimum version 1.3 above maximum 1.2")
	}
	for _, l := range [][]string{c.Ciphers, c.ECDHCurves, c.SignatureAlgorithms, c.ALPN} {
		if len(l) > MaxClientTLSListEntries {
			return fmt.Errorf("a TLS list of %d entries, at most %d", len(l), MaxClientTLSListEntries)
		}
		for _, v := range l {
			if !validTLSName(v) {
				return fmt.Errorf("TLS parameter %q is not a name", v)
			}
		}
	}
	return nil
}

// validTLSName: letters, digits, '-', '_', '/' and '.', 1 to 64 characters (no ':', which
// separates BoringSSL's lists).
func validTLSName(v string) bool {
	if v == "" || len(v) > 64 {
		return false
	}
	for _, r := range v {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '/' || r == '.') {
			return false
		}
	}
	return true
}

// MaxXFFTrustedHops bounds ClientTraffic.XFFTrustedHops (the front ends bound it further).
const MaxXFFTrustedHops = 64

// MaxXFFTrustedCIDRs bounds ClientTraffic.XFFTrustedCIDRs (the front ends bound it further).
const MaxXFFTrustedCIDRs = 64

// UnderscoresAction is what is done with a request header whose name has an underscore.
type UnderscoresAction string

// The actions of ClientTraffic.HeadersWithUnderscores.
const (
	// UnderscoresAllow passes such headers on.
	UnderscoresAllow UnderscoresAction = "Allow"
	// UnderscoresReject refuses the request (HTTP/1: 400; HTTP/2: the stream is reset).
	UnderscoresReject UnderscoresAction = "RejectRequest"
	// UnderscoresDrop removes such headers before any filter sees them.
	UnderscoresDrop UnderscoresAction = "DropHeader"
)

// MaxClientTimeout bounds ClientTraffic's timeouts (the front ends bound them further).
const MaxClientTimeout = 24 * time.Hour

// validate checks the settings of an HTTP or HTTPS listener.
func (c *ClientTraffic) validate(p Protocol) error {
	if c == nil {
		return nil
	}
	switch {
	case p == ProtocolTCP && !c.TCPOnly():
		return fmt.Errorf("client traffic settings on a TCP listener other than the PROXY protocol, TCP idle timeout, keepalive and buffer limit")
	case p == ProtocolHTTP3 && !c.httpOnly():
		return fmt.Errorf("client traffic settings on an HTTP3 listener that act on TCP connections or TLS parameters (HTTP settings only)")
	case !p.ServesHTTP() && p != ProtocolTCP:
		return fmt.Errorf("client traffic settings on a %s listener (TCP, HTTP, HTTPS and HTTP3 only)", p)
	}
	if err := c.validateConnection(); err != nil {
		return err
	}
	if err := c.HTTP.validate(); err != nil {
		return err
	}
	if c.ConnectionLimitDelay != 0 && c.ConnectionLimit == 0 {
		return fmt.Errorf("a connection limit delay without a connection limit")
	}
	for _, d := range []Duration{c.RequestReceivedTimeout, c.IdleTimeout, c.ConnectionLimitDelay, c.RequestHeadersTimeout, c.StreamIdleTimeout,
		c.MaxConnectionDuration, c.MaxStreamDuration, c.TLSHandshakeTimeout} {
		if d < 0 || d.D() > MaxClientTimeout {
			return fmt.Errorf("client traffic timeout %s out of range 0 to %s", d.D(), MaxClientTimeout)
		}
	}
	if c.XFFTrustedHops > MaxXFFTrustedHops {
		return fmt.Errorf("%d trusted X-Forwarded-For hops, at most %d", c.XFFTrustedHops, MaxXFFTrustedHops)
	}
	if c.ClientIPHeader != "" && c.XFFTrustedHops > 0 {
		return fmt.Errorf("both a client address header and trusted X-Forwarded-For hops")
	}
	if len(c.XFFTrustedCIDRs) > 0 && (c.ClientIPHeader != "" || c.XFFTrustedHops > 0) {
		return fmt.Errorf("trusted X-Forwarded-For CIDRs with a client address header or trusted hops")
	}
	if len(c.XFFTrustedCIDRs) > MaxXFFTrustedCIDRs {
		return fmt.Errorf("%d trusted X-Forwarded-For CIDRs, at most %d", len(c.XFFTrustedCIDRs), MaxXFFTrustedCIDRs)
	}
	for _, cidr := range c.XFFTrustedCIDRs {
		if p, err := netip.ParsePrefix(cidr); err != nil || p.Masked() != p {
			return fmt.Errorf("trusted X-Forwarded-For CIDR %q is not a canonical CIDR", cidr)
		}
	}
	if c.ClientIPHeaderFailClosed && c.ClientIPHeader == "" {
		return fmt.Errorf("a client address header fail-closed without a header")
	}
	if c.ClientIPHeader != "" && !validClientIPHeader(c.ClientIPHeader) {
		return fmt.Errorf("client address header %q is not a lower-case header name", c.ClientIPHeader)
	}
	if err := c.TLS.validate(); err != nil {
		return err
	}
	switch c.HeadersWithUnderscores {
	case "", UnderscoresAllow, UnderscoresReject, UnderscoresDrop:
	default:
		return fmt.Errorf("headers with underscores action %q", c.HeadersWithUnderscores)
	}
	return nil
}

// validClientIPHeader: a lower-case header name of letters, digits and '-', at most 255
// characters.
func validClientIPHeader(h string) bool {
	if len(h) > 255 {
		return false
	}
	for _, r := range h {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') {
			return false
		}
	}
	return true
}
