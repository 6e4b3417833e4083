package translate

import (
	"strings"
	"time"

	"kubelb.dev/kubelb/internal/ir"
	"kubelb.dev/kubelb/internal/trafficpolicy"
)

// clientTraffic is an ir.ClientTraffic under construction.
type clientTraffic ir.ClientTraffic

// clientConnection is the connection part of checked settings s: the PROXY protocol, the TCP
// idle timeout, keepalive and the buffer limit (what a TCP listener may have too).
func clientConnection(s *trafficpolicy.ClientSettings) *clientTraffic {
	out := &clientTraffic{TCPIdleTimeout: ir.Duration(s.TCPIdleTimeout), BufferLimit: s.BufferLimit}
	if s.ProxyProtocol {
		out.ProxyProtocol = &ir.ProxyProtocol{Optional: s.ProxyProtocolOptional}
	}
	if k := s.Keepalive; k != nil {
		out.Keepalive = &ir.TCPKeepalive{Probes: k.Probes, IdleTime: uint32(k.IdleTime / time.Second), Interval: uint32(k.Interval / time.Second)}
	}
	return out
}

// withHTTP adds the HTTP listener's settings h to the connection part c.
func (c *clientTraffic) withHTTP(h ir.ClientTraffic) *ir.ClientTraffic {
	h.ProxyProtocol, h.TCPIdleTimeout, h.Keepalive, h.BufferLimit, h.HTTP = c.ProxyProtocol, c.TCPIdleTimeout, c.Keepalive, c.BufferLimit, c.HTTP
	return &h
}

// clientTrafficForTCP is what the ClientTrafficPolicies of Gateway g ask of its TCP listener's
// Envoy listener (listeners ls): only the connection settings (the others are HTTP's), nil
// when none. The policy is chosen and reported as for HTTP listeners (clientTrafficFor).
func (t *l7) clientTrafficForTCP(g *gateway, ls []*gwListener) *ir.ClientTraffic {
	s := t.clientSettingsFor(g, ls)
	if s == nil {
		return nil
	}
	c := clientConnection(s)
	if c.ProxyProtocol == nil && c.TCPIdleTimeout == 0 && c.Keepalive == nil && c.BufferLimit == 0 {
		return nil
	}
	return (*ir.ClientTraffic)(c)
}

// escapedSlashesActions are the IR's actions for the policy's path.escapedSlashesAction.
var escapedSlashesActions = map[string]ir.EscapedSlashesAction{
	trafficpolicy.EscapedSlashesKeepUnchanged:       ir.EscapedSlashesKeep,
	trafficpolicy.EscapedSlashesRejectRequest:       ir.EscapedSlashesReject,
	trafficpolicy.EscapedSlashesUnescapeAndForward:  ir.EscapedSlashesUnescapeAndForward,
	trafficpolicy.EscapedSlashesUnescapeAndRedirect: ir.EscapedSlashesUnescapeRedirect,
}

// clientHTTP is the HTTP/1, HTTP/2 and path options of settings s for the Envoy listener of
// Gateway g's listeners ls, nil when none. HTTP/1.0's default host (useDefaultHost) is the
// first of the listeners' hostnames that is no wildcard; when none has one, a Warning says
// that HTTP/1.0 requests without a Host header are refused.
func (t *l7) clientHTTP(g *gateway, ls []*gwListener, s *trafficpolicy.ClientSettings) *ir.ClientHTTP {
	h := &ir.ClientHTTP{HTTP1Trailers: s.HTTP1Trailers, HTTP1PreserveHeaderCase: s.HTTP1PreserveHeaderCase, HTTP10: s.HTTP10,
		EscapedSlashes: escapedSlashesActions[s.EscapedSlashes], MergeSlashes: s.MergeSlashes, PreserveXRequestID: s.PreserveXRequestID,
		SuppressEnvoyHeaders: s.SuppressEnvoyHeaders}
	if h2 := s.HTTP2; h2 != nil {
		h.HTTP2InitialStreamWindowSize, h.HTTP2InitialConnectionWindowSize = h2.InitialStreamWindowSize, h2.InitialConnectionWindowSize
		h.HTTP2MaxConcurrentStreams, h.HTTP2TerminateStream = h2.MaxConcurrentStreams, h2.TerminateStream
	}
	if s.HTTP10 && s.HTTP10DefaultHost {
		for _, l := range ls {
			if l.hostname != "" && !strings.HasPrefix(l.hostname, "*") {
				h.HTTP10DefaultHost = l.hostname
				break
			}
		}
		if h.HTTP10DefaultHost == "" {
			t.problems.Add(t.ref(g.route, ""), ir.SeverityWarning, ReasonInvalidClientTraffic,
				"ClientTrafficPolicy http1.http10.useDefaultHost: the listeners on port %d have no hostname without a wildcard to use; HTTP/1.0 requests without a Host header are refused",
				ls[0].spec.Port)
		}
	}
	if *h == (ir.ClientHTTP{}) {
		return nil
	}
	return h
}
