package translator

import (
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	proxyprotocolv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/proxy_protocol/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	preservecasev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/http/header_formatters/preserve_case/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"kubelb.dev/kubelb/internal/ir"
)

// Names of the Envoy extensions of a Gateway's ClientTrafficPolicy's connection and HTTP
// options.
const (
	FilterProxyProtocol = "envoy.filters.listener.proxy_protocol"
	HeaderPreserveCase  = "envoy.http.stateful_header_formatters.preserve_case"
)

// Linux's socket option levels and names of TCP keepalive (Envoy runs on Linux).
const (
	solSocket    = 1 // SOL_SOCKET
	soKeepalive  = 9 // SO_KEEPALIVE
	ipprotoTCP   = 6 // IPPROTO_TCP
	tcpKeepIdle  = 4 // TCP_KEEPIDLE
	tcpKeepIntvl = 5 // TCP_KEEPINTVL
	tcpKeepCnt   = 6 // TCP_KEEPCNT
)

// clientConnection puts a Gateway's ClientTrafficPolicy's connection settings on its
// listener: the PROXY protocol listener filter first (before the TLS inspector: the header
// comes before the TLS handshake, and the address it gives is the one every filter chain
// match, source range and authorization sees), TCP keepalive as socket options of the
// listening socket (which Linux gives every accepted connection), and the per-connection
// buffer limit.
func clientConnection(out *listenerv3.Listener, c *ir.ClientTraffic, errs *[]error) {
	if p := c.ProxyProtocol; p != nil {
		pp := &proxyprotocolv3.ProxyProtocol{AllowRequestsWithoutProxyProtocol: p.Optional}
		out.ListenerFilters = append([]*listenerv3.ListenerFilter{{
			Name:       FilterProxyProtocol,
			ConfigType: &listenerv3.ListenerFilter_TypedConfig{TypedConfig: mustPack(errs, pp)},
		}}, out.ListenerFilters...)
	}
	if k := c.Keepalive; k != nil {
		opt := func(desc string, level, name int64, v uint32) *corev3.SocketOption {
			return &corev3.SocketOption{Description: desc, Level: level, Name: name,
				Value: &corev3.SocketOption_IntValue{IntValue: int64(v)}, State: corev3.SocketOption_STATE_LISTENING}
		}
		out.SocketOptions = append(out.SocketOptions, opt("SO_KEEPALIVE", solSocket, soKeepalive, 1))
		if k.Probes > 0 {
			out.SocketOptions = append(out.SocketOptions, opt("TCP_KEEPCNT", ipprotoTCP, tcpKeepCnt, k.Probes))
		}
		if k.IdleTime > 0 {
			out.SocketOptions = append(out.SocketOptions, opt("TCP_KEEPIDLE", ipprotoTCP, tcpKeepIdle, k.IdleTime))
		}
		if k.Interval > 0 {
			out.SocketOptions = append(out.SocketOptions, opt("TCP_KEEPINTVL", ipprotoTCP, tcpKeepIntvl, k.Interval))
		}
	}
	out.PerConnectionBufferLimitBytes = setUInt32(c.BufferLimit)
}

// setUInt32 is v as a protobuf value, nil for 0 (unset: Envoy's default).
func setUInt32(v uint32) *wrapperspb.UInt32Value {
	if v == 0 {
		return nil
	}
	return wrapperspb.UInt32(v)
}

// tcpIdleTimeout sets the idle timeout of a TCP proxy (a TCP listener's, or a proxying chain
// of an HTTPS listener) from the listener's ClientTrafficPolicy; nil or 0 keeps Envoy's
// default (one hour).
func tcpIdleTimeout(tp *tcpproxyv3.TcpProxy, c *ir.ClientTraffic) {
	if c != nil && c.TCPIdleTimeout > 0 {
		tp.IdleTimeout = durationpb.New(c.TCPIdleTimeout.D())
	}
}

// escapedSlashesActions are Envoy's actions on escaped slashes in paths.
var escapedSlashesActions = map[ir.EscapedSlashesAction]hcmv3.HttpConnectionManager_PathWithEscapedSlashesAction{
	ir.EscapedSlashesKeep:               hcmv3.HttpConnectionManager_KEEP_UNCHANGED,
	ir.EscapedSlashesReject:             hcmv3.HttpConnectionManager_REJECT_REQUEST,
	ir.EscapedSlashesUnescapeAndForward: hcmv3.HttpConnectionManager_UNESCAPE_AND_FORWARD,
	ir.EscapedSlashesUnescapeRedirect:   hcmv3.HttpConnectionManager_UNESCAPE_AND_REDIRECT,
}

// clientHTTP puts a Gateway's ClientTrafficPolicy's HTTP/1, HTTP/2 and path options on a
// connection manager. The preserve-case formatter on the listener keeps the case of the
// request's header names towards HTTP/1 backends (the formatter travels with the headers it
// read); responses' header names stay lower case (that would take the clusters' options,
// which routes of other Gateways share).
func clientHTTP(hcm *hcmv3.HttpConnectionManager, h *ir.ClientHTTP, errs *[]error) {
	if h == nil {
		return
	}
	if h.HTTP1Trailers || h.HTTP1PreserveHeaderCase || h.HTTP10 {
		o := &corev3.Http1ProtocolOptions{EnableTrailers: h.HTTP1Trailers, AcceptHttp_10: h.HTTP10, DefaultHostForHttp_10: h.HTTP10DefaultHost}
		if h.HTTP1PreserveHeaderCase {
			o.HeaderKeyFormat = &corev3.Http1ProtocolOptions_HeaderKeyFormat{
				HeaderFormat: &corev3.Http1ProtocolOptions_HeaderKeyFormat_StatefulFormatter{StatefulFormatter: &corev3.TypedExtensionConfig{
					Name: HeaderPreserveCase, TypedConfig: mustPack(errs, &preservecasev3.PreserveCaseFormatterConfig{}),
				}},
			}
		}
		hcm.HttpProtocolOptions = o
	}
	if h.HTTP2InitialStreamWindowSize > 0 || h.HTTP2InitialConnectionWindowSize > 0 || h.HTTP2MaxConcurrentStreams > 0 || h.HTTP2TerminateStream {
		o := &corev3.Http2ProtocolOptions{InitialStreamWindowSize: setUInt32(h.HTTP2InitialStreamWindowSize),
			InitialConnectionWindowSize: setUInt32(h.HTTP2InitialConnectionWindowSize), MaxConcurrentStreams: setUInt32(h.HTTP2MaxConcurrentStreams)}
		if h.HTTP2TerminateStream {
			o.OverrideStreamErrorOnInvalidHttpMessage = wrapperspb.Bool(true)
		}
		hcm.Http2ProtocolOptions = o
	}
	if a, ok := escapedSlashesActions[h.EscapedSlashes]; ok {
		hcm.PathWithEscapedSlashesAction = a
	}
	hcm.MergeSlashes = h.MergeSlashes
	hcm.PreserveExternalRequestId = h.PreserveXRequestID
}

// clientLifetimes puts a Gateway's ClientTrafficPolicy's lifetimes on a connection manager:
// the time a client has to send a request's headers (request_headers_timeout), the stream
// idle timeout when the policy shortens the listener's, and the connection's and streams'
// most duration and requests (common HTTP protocol options).
func clientLifetimes(hcm *hcmv3.HttpConnectionManager, c *ir.ClientTraffic) {
	if c.RequestHeadersTimeout > 0 {
		hcm.RequestHeadersTimeout = durationpb.New(c.RequestHeadersTimeout.D())
	}
	if c.StreamIdleTimeout > 0 {
		hcm.StreamIdleTimeout = durationpb.New(c.StreamIdleTimeout.D())
	}
	if c.MaxConnectionDuration > 0 {
		commonHTTPOptions(hcm).MaxConnectionDuration = durationpb.New(c.MaxConnectionDuration.D())
	}
	if c.MaxRequestsPerConnection > 0 {
		commonHTTPOptions(hcm).MaxRequestsPerConnection = wrapperspb.UInt32(c.MaxRequestsPerConnection)
	}
	if c.MaxStreamDuration > 0 {
		commonHTTPOptions(hcm).MaxStreamDuration = durationpb.New(c.MaxStreamDuration.D())
	}
}

// tlsHandshakeTimeout bounds the TLS handshake of a terminating filter chain
// (transport_socket_connect_timeout) by the listener's ClientTrafficPolicy; nil or 0: none.
func tlsHandshakeTimeout(fc *listenerv3.FilterChain, c *ir.ClientTraffic) {
	if c != nil && c.TLSHandshakeTimeout > 0 {
		fc.TransportSocketConnectTimeout = durationpb.New(c.TLSHandshakeTimeout.D())
	}
}

// suppressEnvoyHeaders: the listener's ClientTrafficPolicy says enableEnvoyHeaders false (the
// router adds no x-envoy- headers).
func suppressEnvoyHeaders(c *ir.ClientTraffic) bool {
	return c != nil && c.HTTP != nil && c.HTTP.SuppressEnvoyHeaders
}
