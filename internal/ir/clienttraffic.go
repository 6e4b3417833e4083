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
}

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
	switch c.HeadersWithUnderscores {
	case "", UnderscoresAllow, UnderscoresReject, UnderscoresDrop:
	default:
		return fmt.Errorf("headers with underscores action %q", c.HeadersWithUnderscores)
	}
	return nil
}
