package v1alpha1

import "k8s.io/apimachinery/pkg/util/intstr"

// ClientTraffic is the Envoy Gateway ClientTrafficPolicy (gateway.envoyproxy.io/v1alpha1)
// that applies to the Gateway a Route mirrors, as kubelb's ccm resolved it: how the hub's
// Envoy treats the connections and requests of the Gateway's clients on its HTTP and HTTPS
// listeners. Only the fields kubelb serves are carried, in Envoy Gateway's shapes; the ccm
// refuses a policy with any other (docs/l7.md, "ClientTrafficPolicy"). The manager validates
// and bounds every field again.
type ClientTraffic struct {
	// Namespace and Name of the policy (the Gateway's namespace).
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace"`
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// Timeout holds the timeouts of the clients' HTTP connections and requests.
	// +optional
	Timeout *ClientTrafficTimeout `json:"timeout,omitempty"`
	// Headers says how request headers are treated.
	// +optional
	Headers *ClientTrafficHeaders `json:"headers,omitempty"`
	// Connection limits the clients' connections.
	// +optional
	Connection *ClientTrafficConnection `json:"connection,omitempty"`
	// ClientIPDetection says where the client's address is read from: the X-Forwarded-For
	// header, trusting that many proxies before the hub, or a header of the tenant's choice
	// (its load balancer's). Authorizations by client CIDR and rate limits by client address
	// use that address.
	// +optional
	ClientIPDetection *ClientTrafficIPDetection `json:"clientIPDetection,omitempty"`
	// TLS holds the TLS settings of the Gateway's terminating HTTPS and TLS listeners.
	// +optional
	TLS *ClientTrafficTLS `json:"tls,omitempty"`
	// TCPKeepalive turns on TCP keepalive probes on the clients' connections.
	// +optional
	TCPKeepalive *ClientTrafficTCPKeepalive `json:"tcpKeepalive,omitempty"`
	// HTTP1 holds HTTP/1 options of the Gateway's HTTP and HTTPS listeners.
	// +optional
	HTTP1 *ClientTrafficHTTP1 `json:"http1,omitempty"`
	// HTTP2 holds HTTP/2 options of the Gateway's HTTP and HTTPS listeners.
	// +optional
	HTTP2 *ClientTrafficHTTP2 `json:"http2,omitempty"`
	// HTTP3 serves the Gateway's HTTPS listeners over HTTP/3 (QUIC) too, on a UDP port of
	// the same number, and advertises it (alt-svc). Envoy Gateway's HTTP3Settings has no
	// fields.
	// +optional
	HTTP3 *ClientTrafficHTTP3 `json:"http3,omitempty"`
	// Path says how request paths are normalised.
	// +optional
	Path *ClientTrafficPath `json:"path,omitempty"`
	// EnableProxyProtocol makes the Gateway's listeners read a PROXY protocol header (v1 or
	// v2) first on every connection: the client's address is the header's. Envoy Gateway
	// deprecates it for ProxyProtocol.
	// +optional
	EnableProxyProtocol *bool `json:"enableProxyProtocol,omitempty"`
	// ProxyProtocol is EnableProxyProtocol, with connections without a header accepted
	// when Optional.
	// +optional
	ProxyProtocol *ClientTrafficProxyProtocol `json:"proxyProtocol,omitempty"`
}

// ClientTrafficProxyProtocol is Envoy Gateway's proxyProtocol.
type ClientTrafficProxyProtocol struct {
	// Optional accepts connections without a PROXY header (their address is the peer's).
	// +optional
	Optional *bool `json:"optional,omitempty"`
}

// ClientTrafficTCPKeepalive is Envoy Gateway's tcpKeepalive: SO_KEEPALIVE on the
// listeners' sockets. Durations are Gateway API durations.
type ClientTrafficTCPKeepalive struct {
	// Probes is how many unanswered probes end the connection.
	// +optional
	Probes *int64 `json:"probes,omitempty"`
	// IdleTime is how long a connection is idle before the first probe.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	IdleTime string `json:"idleTime,omitempty"`
	// Interval is the time between probes.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	Interval string `json:"interval,omitempty"`
}

// ClientTrafficHTTP1 is Envoy Gateway's http1 of a ClientTrafficPolicy.
type ClientTrafficHTTP1 struct {
	// EnableTrailers passes HTTP/1 trailers on.
	// +optional
	EnableTrailers *bool `json:"enableTrailers,omitempty"`
	// PreserveHeaderCase keeps the case of HTTP/1 header names as the client and the
	// backend wrote them.
	// +optional
	PreserveHeaderCase *bool `json:"preserveHeaderCase,omitempty"`
	// HTTP10 accepts HTTP/1.0 requests.
	// +optional
	HTTP10 *ClientTrafficHTTP10 `json:"http10,omitempty"`
}

// ClientTrafficHTTP10 is Envoy Gateway's http10.
type ClientTrafficHTTP10 struct {
	// UseDefaultHost gives an HTTP/1.0 request without a Host header the listener's first
	// hostname.
	// +optional
	UseDefaultHost *bool `json:"useDefaultHost,omitempty"`
}

// ClientTrafficHTTP2 is Envoy Gateway's http2 of a ClientTrafficPolicy. Window sizes are
// bytes, or quantities such as 64Ki.
type ClientTrafficHTTP2 struct {
	// +optional
	// +kubebuilder:validation:XIntOrString
	InitialStreamWindowSize *intstr.IntOrString `json:"initialStreamWindowSize,omitempty"`
	// +optional
	// +kubebuilder:validation:XIntOrString
	InitialConnectionWindowSize *intstr.IntOrString `json:"initialConnectionWindowSize,omitempty"`
	// +optional
	MaxConcurrentStreams *int64 `json:"maxConcurrentStreams,omitempty"`
	// OnInvalidMessage is TerminateConnection or TerminateStream.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	OnInvalidMessage string `json:"onInvalidMessage,omitempty"`
}

// ClientTrafficHTTP3 is Envoy Gateway's http3 of a ClientTrafficPolicy (HTTP3Settings): no
// fields.
type ClientTrafficHTTP3 struct{}

// ClientTrafficPath is Envoy Gateway's path of a ClientTrafficPolicy.
type ClientTrafficPath struct {
	// EscapedSlashesAction is KeepUnchanged, RejectRequest, UnescapeAndForward or
	// UnescapeAndRedirect.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	EscapedSlashesAction string `json:"escapedSlashesAction,omitempty"`
	// DisableMergeSlashes keeps adjacent slashes of a path as they are.
	// +optional
	DisableMergeSlashes *bool `json:"disableMergeSlashes,omitempty"`
}

// ClientTrafficTLS is Envoy Gateway's tls of a ClientTrafficPolicy (versions, ciphers,
// curves, signature algorithms, ALPN, session resumption and client certificate validation).
type ClientTrafficTLS struct {
	// Session says which TLS session resumption the terminating listeners offer.
	// +optional
	Session *ClientTrafficTLSSession `json:"session,omitempty"`
	// ClientValidation asks clients of the Gateway's HTTPS listeners for a certificate of
	// the CA certificates its references hold (carried in the Route's
	// context.frontendCACertificates, as the Gateway's own spec.tls.frontend's).
	// +optional
	ClientValidation *ClientTrafficClientValidation `json:"clientValidation,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=8
	MinVersion string `json:"minVersion,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=8
	MaxVersion string `json:"maxVersion,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=64
	Ciphers []string `json:"ciphers,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=64
	ECDHCurves []string `json:"ecdhCurves,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=64
	SignatureAlgorithms []string `json:"signatureAlgorithms,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:items:MaxLength=16
	ALPNProtocols []string `json:"alpnProtocols,omitempty"`
}

// ClientTrafficTLSSession is Envoy Gateway's tls.session.
type ClientTrafficTLSSession struct {
	// Resumption lists the resumptions offered; unset or empty: none.
	// +optional
	Resumption *ClientTrafficResumption `json:"resumption,omitempty"`
}

// ClientTrafficResumption is Envoy Gateway's tls.session.resumption: stateless (session
// tickets) and stateful (a session cache), each offered when set.
type ClientTrafficResumption struct {
	// +optional
	Stateless *ClientTrafficResumptionKind `json:"stateless,omitempty"`
	// +optional
	Stateful *ClientTrafficResumptionKind `json:"stateful,omitempty"`
}

// ClientTrafficResumptionKind is one kind of resumption (no fields).
type ClientTrafficResumptionKind struct{}

// ClientTrafficClientValidation is Envoy Gateway's tls.clientValidation: the CA certificates
// a client's certificate must chain to, required unless Optional (or Mode VerifyIfGiven).
type ClientTrafficClientValidation struct {
	// CACertificateRefs are ConfigMaps or Secrets of the policy's namespace with the CA
	// certificates in their key ca.crt.
	// +optional
	// +kubebuilder:validation:MaxItems=8
	// +listType=atomic
	CACertificateRefs []ClientTrafficCARef `json:"caCertificateRefs,omitempty"`
	// Optional accepts clients without a certificate (one they present is still verified).
	// +optional
	Optional *bool `json:"optional,omitempty"`
	// Mode is RequireAndVerify (the default) or VerifyIfGiven (Optional).
	// +optional
	// +kubebuilder:validation:MaxLength=32
	Mode string `json:"mode,omitempty"`
}

// ClientTrafficCARef is one caCertificateRefs entry (Envoy Gateway's SecretObjectReference:
// the kind defaults to Secret).
type ClientTrafficCARef struct {
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Group string `json:"group,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Kind string `json:"kind,omitempty"`
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace,omitempty"`
}

// ClientTrafficIPDetection is Envoy Gateway's clientIPDetection: one of xForwardedFor,
// customHeader and directSourceIP.
type ClientTrafficIPDetection struct {
	// DirectSourceIP makes the client's address the connection's peer (kubelb's default,
	// stated).
	// +optional
	DirectSourceIP *ClientTrafficDirectSourceIP `json:"directSourceIP,omitempty"`
	// +optional
	XForwardedFor *ClientTrafficXForwardedFor `json:"xForwardedFor,omitempty"`
	// +optional
	CustomHeader *ClientTrafficCustomHeader `json:"customHeader,omitempty"`
}

// ClientTrafficDirectSourceIP is Envoy Gateway's directSourceIP (no fields).
type ClientTrafficDirectSourceIP struct{}

// ClientTrafficXForwardedFor is Envoy Gateway's xForwardedFor: the client's address is the
// NumTrustedHops-th address from the right of the X-Forwarded-For header (0: the peer's), or,
// with TrustedCIDRs, the rightmost address of the header outside those CIDRs (the peer's
// when the peer itself is outside them).
type ClientTrafficXForwardedFor struct {
	// +optional
	NumTrustedHops *int32 `json:"numTrustedHops,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxItems=16
	// +listType=atomic
	TrustedCIDRs []string `json:"trustedCIDRs,omitempty"`
}

// ClientTrafficCustomHeader is Envoy Gateway's customHeader: the client's address is the
// value of header Name; without it (or when it is not an address) the peer's address is
// used, or, with FailClosed, the request is answered 403.
type ClientTrafficCustomHeader struct {
	// +kubebuilder:validation:MaxLength=255
	Name string `json:"name"`
	// +optional
	FailClosed *bool `json:"failClosed,omitempty"`
}

// ClientTrafficConnection is Envoy Gateway's connection of a ClientTrafficPolicy.
type ClientTrafficConnection struct {
	// ConnectionLimit bounds the connections open at once.
	// +optional
	ConnectionLimit *ClientTrafficConnectionLimit `json:"connectionLimit,omitempty"`
	// MaxAcceptPerSocketEvent is how many pending connections Envoy accepts per socket event
	// (0: all of them).
	// +optional
	MaxAcceptPerSocketEvent *uint32 `json:"maxAcceptPerSocketEvent,omitempty"`
	// BufferLimit is the most bytes Envoy buffers for each client connection (bytes, or a
	// quantity such as 32Ki).
	// +optional
	// +kubebuilder:validation:XIntOrString
	BufferLimit *intstr.IntOrString `json:"bufferLimit,omitempty"`
}

// ClientTrafficConnectionLimit is Envoy Gateway's connectionLimit: at most Value
// connections open at once; those over it are closed after CloseDelay.
type ClientTrafficConnectionLimit struct {
	// +optional
	Value *int64 `json:"value,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=32
	CloseDelay string `json:"closeDelay,omitempty"`
	// MaxConnectionDuration drains and closes a client connection that long after it opened.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	MaxConnectionDuration string `json:"maxConnectionDuration,omitempty"`
	// MaxRequestsPerConnection closes a client connection after that many requests.
	// +optional
	MaxRequestsPerConnection *int64 `json:"maxRequestsPerConnection,omitempty"`
	// MaxStreamDuration resets a request (stream) that long after it began.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	MaxStreamDuration string `json:"maxStreamDuration,omitempty"`
}

// ClientTrafficTimeout is Envoy Gateway's timeout of a ClientTrafficPolicy.
type ClientTrafficTimeout struct {
	// +optional
	HTTP *ClientTrafficHTTPTimeout `json:"http,omitempty"`
	// +optional
	TCP *ClientTrafficTCPTimeout `json:"tcp,omitempty"`
}

// ClientTrafficTCPTimeout holds the timeouts of the clients' TCP connections.
type ClientTrafficTCPTimeout struct {
	// IdleTimeout closes a proxied TCP connection without a byte either way for this long.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	IdleTimeout string `json:"idleTimeout,omitempty"`
	// TLSHandshakeTimeout closes a connection whose TLS handshake has not ended that long
	// after it was accepted.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	TLSHandshakeTimeout string `json:"tlsHandshakeTimeout,omitempty"`
}

// ClientTrafficHTTPTimeout holds the timeouts of the clients' HTTP requests and connections.
// Durations are Gateway API durations (e.g. 30s, 1m).
type ClientTrafficHTTPTimeout struct {
	// RequestReceivedTimeout is the time a client has to send a whole request (headers and
	// body), counted from its first byte.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	RequestReceivedTimeout string `json:"requestReceivedTimeout,omitempty"`
	// IdleTimeout closes a client's connection after this long without a request on it.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	IdleTimeout string `json:"idleTimeout,omitempty"`
	// RequestHeadersReceivedTimeout is the time a client has to send a request's headers,
	// counted from their first byte.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	RequestHeadersReceivedTimeout string `json:"requestHeadersReceivedTimeout,omitempty"`
	// StreamIdleTimeout ends a request (stream) without a byte either way for this long.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	StreamIdleTimeout string `json:"streamIdleTimeout,omitempty"`
}

// ClientTrafficHeaders is Envoy Gateway's headers of a ClientTrafficPolicy.
type ClientTrafficHeaders struct {
	// WithUnderscoresAction is what is done with a request header whose name has an
	// underscore: Allow, RejectRequest or DropHeader.
	// +optional
	// +kubebuilder:validation:MaxLength=16
	WithUnderscoresAction string `json:"withUnderscoresAction,omitempty"`
	// PreserveXRequestID keeps the X-Request-ID a client sends (Envoy otherwise replaces
	// it on requests from outside).
	// +optional
	PreserveXRequestID *bool `json:"preserveXRequestID,omitempty"`
	// EnableEnvoyHeaders false removes the x-envoy- headers Envoy adds to requests and
	// responses.
	// +optional
	EnableEnvoyHeaders *bool `json:"enableEnvoyHeaders,omitempty"`
}
