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
