package ir

import (
	"fmt"
	"time"
)

// ClientTraffic is how an HTTP or HTTPS listener (its connection managers, and its filter
// chains for the connection limit) treats its clients' connections and requests: Envoy Gateway's ClientTrafficPolicy as kubelb serves it. Zero
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
	// ClientIPHeader ("": none; lower case) makes the client's address the value of this
	// header (Envoy's custom header original IP detection); without a valid one the peer's
	// address is used, or with ClientIPHeaderFailClosed the request is answered 403.
	ClientIPHeader           string `json:"clientIPHeader,omitempty"`
	ClientIPHeaderFailClosed bool   `json:"clientIPHeaderFailClosed,omitempty"`
	// TLS (nil: Envoy's defaults) are the TLS parameters of the listener's terminating
	// filter chains (HTTPS listeners only).
	TLS *ClientTLS `json:"tls,omitempty"`
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
	if p != ProtocolHTTP && p != ProtocolHTTPS {
		return fmt.Errorf("client traffic settings on a %s listener (HTTP and HTTPS only)", p)
	}
	if c.ConnectionLimitDelay != 0 && c.ConnectionLimit == 0 {
		return fmt.Errorf("a connection limit delay without a connection limit")
	}
	for _, d := range []Duration{c.RequestReceivedTimeout, c.IdleTimeout, c.ConnectionLimitDelay} {
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
