package translator

import (
	"fmt"
	"net/netip"

	xdscorev3 "github.com/cncf/xds/go/xds/core/v3"
	matcherv3 "github.com/cncf/xds/go/xds/type/matcher/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	corsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/cors/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	statefulsessionv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/stateful_session/v3"
	tlsinspectorv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/tls_inspector/v3"
	connectionlimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/connection_limit/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	udpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/udp/udp_proxy/v3"
	customheaderv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/http/original_ip_detection/custom_header/v3"
	xffv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/http/original_ip_detection/xff/v3"
	quicv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/quic/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"kubelb.dev/kubelb/internal/ir"
)

// Names of the Envoy extensions used by listeners.
const (
	FilterTCPProxy             = "envoy.filters.network.tcp_proxy"
	FilterUDPProxy             = "envoy.filters.udp_listener.udp_proxy"
	FilterHTTPConnectionManger = "envoy.filters.network.http_connection_manager"
	FilterConnectionLimit      = "envoy.filters.network.connection_limit"
	FilterRouter               = "envoy.filters.http.router"
	FilterTLSInspector         = "envoy.filters.listener.tls_inspector"
	OriginalIPCustomHeader     = "envoy.http.original_ip_detection.custom_header"
	OriginalIPXFF              = "envoy.http.original_ip_detection.xff"
	TransportSocketTLS         = "envoy.transport_sockets.tls"
	TransportSocketQUIC        = "envoy.transport_sockets.quic"
)

// listener builds the listener of one IR listener.
func listener(l *ir.Listener) (*listenerv3.Listener, error) {
	var errs []error
	out := &listenerv3.Listener{Name: l.Name, StatPrefix: l.StatPrefix}
	switch l.Protocol {
	case ir.ProtocolTCP:
		out.Address = socketAddress(corev3.SocketAddress_TCP, l.Address, l.Port)
		tp := tcpProxy(l.StatPrefix, l.Cluster, l.Backends, l.FailedWeight)
		tp.AccessLog = accessLog(l.AccessLog, false, l.StatPrefix, &errs)
		tcpIdleTimeout(tp, l.ClientTraffic)
		if l.HashSourceIP {
			tp.HashPolicy = []*typev3.HashPolicy{{
				PolicySpecifier: &typev3.HashPolicy_SourceIp_{SourceIp: &typev3.HashPolicy_SourceIp{}},
			}}
		}
		fc := &listenerv3.FilterChain{Filters: []*listenerv3.Filter{networkFilter(FilterTCPProxy, &errs, tp)}}
		if len(l.SourceRanges) > 0 { // a connection from elsewhere matches no chain: closed
			fc.FilterChainMatch = &listenerv3.FilterChainMatch{SourcePrefixRanges: cidrRanges(l.SourceRanges)}
		}
		out.FilterChains = authorizedChains(fc, l.Authorization, l.StatPrefix, l.AccessLog, &errs) // stream_policy.go
	case ir.ProtocolUDP:
		// The udp_proxy listener filter routes every datagram (a matcher with only
		// on_no_match; the deprecated "cluster" field is not used) to the cluster.
		out.Address = socketAddress(corev3.SocketAddress_UDP, l.Address, l.Port)
		route := &matcherv3.Matcher_OnMatch{OnMatch: &matcherv3.Matcher_OnMatch_Action{
			Action: &xdscorev3.TypedExtensionConfig{Name: "route", TypedConfig: mustPack(&errs, &udpproxyv3.Route{Cluster: l.Cluster})},
		}}
		matcher := &matcherv3.Matcher{OnNoMatch: route}
		if len(l.SourceRanges) > 0 { // only datagrams from the ranges are routed
			matcher = udpSourceMatcher(l.SourceRanges, route, &errs)
		}
		up := &udpproxyv3.UdpProxyConfig{
			StatPrefix:     l.StatPrefix,
			RouteSpecifier: &udpproxyv3.UdpProxyConfig_Matcher{Matcher: matcher},
			IdleTimeout:    durationpb.New(l.IdleTimeout.D()),
		}
		if l.HashSourceIP {
			up.HashPolicies = []*udpproxyv3.UdpProxyConfig_HashPolicy{{
				PolicySpecifier: &udpproxyv3.UdpProxyConfig_HashPolicy_SourceIp{SourceIp: true},
			}}
		}
		out.ListenerFilters = []*listenerv3.ListenerFilter{{
			Name:       FilterUDPProxy,
			ConfigType: &listenerv3.ListenerFilter_TypedConfig{TypedConfig: mustPack(&errs, up)},
		}}
	case ir.ProtocolHTTP:
		out.Address = socketAddress(corev3.SocketAddress_TCP, l.Address, l.Port)
		out.FilterChains = []*listenerv3.FilterChain{{
			Filters: []*listenerv3.Filter{networkFilter(FilterHTTPConnectionManger, &errs, httpConnectionManager(l, l.RouteConfig, &errs))},
		}}
	case ir.ProtocolHTTPS:
		out.Address = socketAddress(corev3.SocketAddress_TCP, l.Address, l.Port)
		out.ListenerFilters = []*listenerv3.ListenerFilter{{
			Name:       FilterTLSInspector,
			ConfigType: &listenerv3.ListenerFilter_TypedConfig{TypedConfig: mustPack(&errs, &tlsinspectorv3.TlsInspector{})},
		}}
		for _, srv := range l.TLS {
			fc := &listenerv3.FilterChain{}
			if srv.Proxies() {
				// A TCP proxy to the clusters: passthrough (no certificate) sends the
				// connection still encrypted, only the SNI the tls_inspector read chose the
				// chain; a terminating chain sends the decrypted stream.
				tp := tcpProxy(l.StatPrefix, srv.Cluster, srv.Backends, srv.FailedWeight)
				tp.AccessLog = accessLog(l.AccessLog, false, l.StatPrefix, &errs)
				tcpIdleTimeout(tp, l.ClientTraffic)
				if srv.HashSourceIP { // a TLSRoute's consistent hash of the client address
					tp.HashPolicy = []*typev3.HashPolicy{{PolicySpecifier: &typev3.HashPolicy_SourceIp_{SourceIp: &typev3.HashPolicy_SourceIp{}}}}
				}
				fc.Filters = []*listenerv3.Filter{networkFilter(FilterTCPProxy, &errs, tp)}
			} else {
				fc.Filters = []*listenerv3.Filter{networkFilter(FilterHTTPConnectionManger, &errs, httpConnectionManager(l, srv.RouteConfig, &errs))}
			}
			if srv.Terminates() {
				var params *ir.ClientTLS
				if l.ClientTraffic != nil {
					params = l.ClientTraffic.TLS
				}
				fc.TransportSocket = downstreamTLS(srv.Secrets, !srv.Proxies(), srv.ClientValidation, params, &errs)
				tlsHandshakeTimeout(fc, l.ClientTraffic) // clienttraffic.go
			}
			if len(srv.ServerNames) > 0 {
				fc.FilterChainMatch = &listenerv3.FilterChainMatch{ServerNames: srv.ServerNames}
			}
			out.FilterChains = append(out.FilterChains, authorizedChains(fc, srv.Authorization, l.StatPrefix, l.AccessLog, &errs)...)
		}
	case ir.ProtocolHTTP3:
		out.Address = socketAddress(corev3.SocketAddress_UDP, l.Address, l.Port)
		out.UdpListenerConfig = &listenerv3.UdpListenerConfig{QuicOptions: &listenerv3.QuicProtocolOptions{}}
		out.FilterChains = http3Chains(l, &errs)
	default:
		return nil, fmt.Errorf("protocol %q is not supported", l.Protocol)
	}
	if c := l.ClientTraffic; c != nil {
		connectionLimit(out, l.StatPrefix, c, &errs)
		clientConnection(out, c, &errs) // clienttraffic.go
	}
	// The other IP family of a dual-stack load balancer: a socket per address, same port
	// and protocol (an IPv6 socket is IPv6 only: Envoy sets IPV6_V6ONLY unless
	// ipv4_compat is asked for, so "::" binds next to "0.0.0.0").
	for _, a := range l.AdditionalAddresses {
		out.AdditionalAddresses = append(out.AdditionalAddresses, &listenerv3.AdditionalAddress{
			Address: socketAddress(out.GetAddress().GetSocketAddress().GetProtocol(), a, l.Port),
		})
	}
	return out, joined(errs)
}

// tcpProxy proxies every connection to one cluster, or shares the connections by weight
// among backends (weight-0 backends left out); the share of failed backends goes to
// FailedBackendCluster, which is never a cluster: Envoy closes those connections as soon as
// they are accepted (the TCP proxy looks its cluster up per connection).
func tcpProxy(statPrefix, cluster string, backends []ir.WeightedCluster, failed uint32) *tcpproxyv3.TcpProxy {
	tp := &tcpproxyv3.TcpProxy{StatPrefix: statPrefix}
	var wcs []*tcpproxyv3.TcpProxy_WeightedCluster_ClusterWeight
	for _, b := range backends {
		if b.Weight > 0 {
			wcs = append(wcs, &tcpproxyv3.TcpProxy_WeightedCluster_ClusterWeight{Name: b.Cluster, Weight: b.Weight})
		}
	}
	switch {
	case cluster != "":
	case len(wcs) == 1 && failed == 0:
		cluster = wcs[0].Name
	default:
		if failed > 0 {
			wcs = append(wcs, &tcpproxyv3.TcpProxy_WeightedCluster_ClusterWeight{Name: FailedBackendCluster, Weight: failed})
		}
		tp.ClusterSpecifier = &tcpproxyv3.TcpProxy_WeightedClusters{WeightedClusters: &tcpproxyv3.TcpProxy_WeightedCluster{Clusters: wcs}}
		return tp
	}
	tp.ClusterSpecifier = &tcpproxyv3.TcpProxy_Cluster{Cluster: cluster}
	return tp
}

func networkFilter(name string, errs *[]error, cfg proto.Message) *listenerv3.Filter {
	return &listenerv3.Filter{Name: name, ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: mustPack(errs, cfg)}}
}

// UpgradeWebSocket is the upgrade type every HTTP listener allows.
const UpgradeWebSocket = "websocket"

// httpConnectionManager serves HTTP with the routes of one route configuration over RDS.
func httpConnectionManager(l *ir.Listener, routeConfig string, errs *[]error) *hcmv3.HttpConnectionManager {
	hcm := &hcmv3.HttpConnectionManager{
		StatPrefix: l.StatPrefix,
		CodecType:  hcmv3.HttpConnectionManager_AUTO,
		RouteSpecifier: &hcmv3.HttpConnectionManager_Rds{Rds: &hcmv3.Rds{
			ConfigSource:    adsSource(),
			RouteConfigName: routeConfig,
		}},
		HttpFilters: []*hcmv3.HttpFilter{{
			Name:       FilterRouter,
			ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustPack(errs, &routerv3.Router{SuppressEnvoyHeaders: suppressEnvoyHeaders(l.ClientTraffic)})},
		}},
		// The client address is the peer's: kubelb's Envoy is the edge.
		UseRemoteAddress: wrapperspb.Bool(true),
		// WebSocket upgrades pass through to HTTP/1.1 upstreams (Gateway API's
		// appProtocol kubernetes.io/ws; Ingress controllers allow them too).
		UpgradeConfigs: []*hcmv3.HttpConnectionManager_UpgradeConfig{{UpgradeType: UpgradeWebSocket}},
		AccessLog:      accessLog(l.AccessLog, true, l.StatPrefix, errs),
	}
	if len(l.Compressors) > 0 { // last before the router
		cs := make([]*hcmv3.HttpFilter, 0, len(l.Compressors)+len(hcm.HttpFilters))
		for _, c := range l.Compressors {
			cs = append(cs, compressorFilter(c, errs))
		}
		hcm.HttpFilters = append(cs, hcm.HttpFilters...)
	}
	if l.GlobalRateLimit != nil { // after the local rate limit: a request it refuses is not counted
		hcm.HttpFilters = append([]*hcmv3.HttpFilter{globalRateLimitFilter(l.GlobalRateLimit, errs)}, hcm.HttpFilters...)
	}
	if l.RateLimit { // after RBAC and basic auth: a refused client spends no tokens
		hcm.HttpFilters = append([]*hcmv3.HttpFilter{{Name: FilterLocalRateLimit,
			ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustPack(errs, localRateLimitFilter())}}}, hcm.HttpFilters...)
	}
	if len(l.ExtAuth) > 0 { // after the other authentications, before the rate limit
		fs := make([]*hcmv3.HttpFilter, 0, len(l.ExtAuth)+len(hcm.HttpFilters))
		for i := range l.ExtAuth {
			fs = append(fs, extAuthFilter(&l.ExtAuth[i], errs))
		}
		hcm.HttpFilters = append(fs, hcm.HttpFilters...)
	}
	if l.APIKeyAuth { // after RBAC, JWT and basic auth, before the rate limit
		hcm.HttpFilters = append([]*hcmv3.HttpFilter{apiKeyAuthFilter(errs)}, hcm.HttpFilters...)
	}
	if l.BasicAuth { // after RBAC, before the rate limit
		hcm.HttpFilters = append([]*hcmv3.HttpFilter{basicAuthFilter(errs)}, hcm.HttpFilters...)
	}
	if l.JWT != nil { // after RBAC, before basic auth and the rate limit
		hcm.HttpFilters = append([]*hcmv3.HttpFilter{jwtFilter(l.JWT, errs)}, hcm.HttpFilters...)
	}
	if len(l.OIDC) > 0 { // first of the authentications, after RBAC: login before the others
		fs := make([]*hcmv3.HttpFilter, 0, len(l.OIDC)+len(hcm.HttpFilters))
		for i := range l.OIDC {
			fs = append(fs, oidcFilter(&l.OIDC[i], errs))
		}
		hcm.HttpFilters = append(fs, hcm.HttpFilters...)
	}
	if l.RouteSourceRanges {
		hcm.HttpFilters = append([]*hcmv3.HttpFilter{{
			Name:       FilterRBAC,
			ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustPack(errs, rbacFilterConfig())},
		}}, hcm.HttpFilters...)
	}
	if l.StatefulSession {
		hcm.HttpFilters = append([]*hcmv3.HttpFilter{{
			Name:       FilterStatefulSession,
			ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustPack(errs, &statefulsessionv3.StatefulSession{})},
		}}, hcm.HttpFilters...)
	}
	if l.CORS {
		hcm.HttpFilters = append([]*hcmv3.HttpFilter{{
			Name:       FilterCORS,
			ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustPack(errs, &corsv3.Cors{})},
		}}, hcm.HttpFilters...)
	}
	if l.StreamIdleTimeout > 0 {
		hcm.StreamIdleTimeout = durationpb.New(l.StreamIdleTimeout.D())
	}
	if hl := l.HeaderLimits; hl != nil {
		if hl.MaxRequestHeadersKB > 0 {
			hcm.MaxRequestHeadersKb = wrapperspb.UInt32(hl.MaxRequestHeadersKB)
		}
		if hl.MaxRequestHeadersCount > 0 {
			commonHTTPOptions(hcm).MaxHeadersCount = wrapperspb.UInt32(hl.MaxRequestHeadersCount)
		}
	}
	clientTraffic(hcm, l.ClientTraffic, errs)
	return hcm
}

// connectionLimit puts a Gateway's ClientTrafficPolicy connection settings on its HTTP or
// HTTPS listener: the connection_limit filter first in every filter chain (one counter per
// chain), and how many pending connections are accepted per socket event.
func connectionLimit(out *listenerv3.Listener, statPrefix string, c *ir.ClientTraffic, errs *[]error) {
	if c.MaxAcceptPerSocketEvent > 0 {
		out.MaxConnectionsToAcceptPerSocketEvent = wrapperspb.UInt32(c.MaxAcceptPerSocketEvent)
	}
	if c.ConnectionLimit == 0 {
		return
	}
	for _, fc := range out.FilterChains {
		cl := &connectionlimitv3.ConnectionLimit{StatPrefix: statPrefix, MaxConnections: wrapperspb.UInt64(c.ConnectionLimit)}
		if c.ConnectionLimitDelay > 0 {
			cl.Delay = durationpb.New(c.ConnectionLimitDelay.D())
		}
		fc.Filters = append([]*listenerv3.Filter{networkFilter(FilterConnectionLimit, errs, cl)}, fc.Filters...)
	}
}

// commonHTTPOptions is the connection manager's common HTTP protocol options, made when first
// needed.
func commonHTTPOptions(hcm *hcmv3.HttpConnectionManager) *corev3.HttpProtocolOptions {
	if hcm.CommonHttpProtocolOptions == nil {
		hcm.CommonHttpProtocolOptions = &corev3.HttpProtocolOptions{}
	}
	return hcm.CommonHttpProtocolOptions
}

// underscoresActions are Envoy's actions on request headers whose names have underscores.
var underscoresActions = map[ir.UnderscoresAction]corev3.HttpProtocolOptions_HeadersWithUnderscoresAction{
	ir.UnderscoresAllow:  corev3.HttpProtocolOptions_ALLOW,
	ir.UnderscoresReject: corev3.HttpProtocolOptions_REJECT_REQUEST,
	ir.UnderscoresDrop:   corev3.HttpProtocolOptions_DROP_HEADER,
}

// clientTraffic puts a Gateway's ClientTrafficPolicy on its listener's connection manager:
// the time a client has to send a request (request_timeout), the idle timeout of its
// connections and the action on header names with underscores (common HTTP protocol
// options), and where the client's address is read from: trusted X-Forwarded-For hops, or a
// header (the custom header original IP detection extension, which Envoy does not allow
// with use_remote_address: the address is the header's, else the peer's, and X-Forwarded-For
// is then passed on as the client sent it), or the rightmost address of X-Forwarded-For
// outside trusted CIDRs (the xff extension; the same restriction). Nil keeps Envoy's defaults.
func clientTraffic(hcm *hcmv3.HttpConnectionManager, c *ir.ClientTraffic, errs *[]error) {
	if c == nil {
		return
	}
	if c.RequestReceivedTimeout > 0 {
		hcm.RequestTimeout = durationpb.New(c.RequestReceivedTimeout.D())
	}
	if c.IdleTimeout > 0 {
		commonHTTPOptions(hcm).IdleTimeout = durationpb.New(c.IdleTimeout.D())
	}
	clientLifetimes(hcm, c) // clienttraffic.go
	if a, ok := underscoresActions[c.HeadersWithUnderscores]; ok {
		commonHTTPOptions(hcm).HeadersWithUnderscoresAction = a
	}
	hcm.XffNumTrustedHops = c.XFFTrustedHops
	if c.ClientIPHeader != "" {
		ch := &customheaderv3.CustomHeaderConfig{HeaderName: c.ClientIPHeader}
		if c.ClientIPHeaderFailClosed {
			ch.RejectWithStatus = &typev3.HttpStatus{Code: typev3.StatusCode_Forbidden}
		}
		hcm.UseRemoteAddress = nil
		hcm.OriginalIpDetectionExtensions = []*corev3.TypedExtensionConfig{{Name: OriginalIPCustomHeader, TypedConfig: mustPack(errs, ch)}}
	}
	if len(c.XFFTrustedCIDRs) > 0 {
		trusted := &xffv3.XffTrustedCidrs{}
		for _, cidr := range c.XFFTrustedCIDRs {
			p := netip.MustParsePrefix(cidr) // checked by the IR's validation
			trusted.Cidrs = append(trusted.Cidrs, &corev3.CidrRange{AddressPrefix: p.Addr().String(), PrefixLen: wrapperspb.UInt32(uint32(p.Bits()))})
		}
		hcm.UseRemoteAddress = nil
		hcm.OriginalIpDetectionExtensions = []*corev3.TypedExtensionConfig{{Name: OriginalIPXFF, TypedConfig: mustPack(errs, &xffv3.XffConfig{XffTrustedCidrs: trusted})}}
	}
	clientHTTP(hcm, c.HTTP, errs) // clienttraffic.go
}

// tlsVersions are Envoy's TLS versions by the IR's names ("": TLS_AUTO, Envoy's default).
var tlsVersions = map[string]tlsv3.TlsParameters_TlsProtocol{
	"1.2": tlsv3.TlsParameters_TLSv1_2,
	"1.3": tlsv3.TlsParameters_TLSv1_3,
}

// downstreamTLS terminates TLS with certificates served over SDS (ADS), Envoy choosing one per
// connection by SNI and the client's key types; a chain serving HTTP
// offers ALPN h2 and http/1.1, one proxying TCP offers none (the stream is not HTTP).
// With client validation (cv not nil) the client is asked for a certificate, verified against
// the CA certificates: required and verified (the handshake fails otherwise), or, with
// AllowInsecureFallback, optional and accepted even when it does not verify, or, with
// Optional, optional but verified when given. A Gateway's
// ClientTrafficPolicy's tls (params, nil: Envoy's defaults) sets the versions, ciphers,
// curves and signature algorithms, and replaces the ALPN protocols of a chain serving HTTP.
func downstreamTLS(secretNames []string, http bool, cv *ir.ClientValidation, params *ir.ClientTLS, errs *[]error) *corev3.TransportSocket {
	return &corev3.TransportSocket{
		Name:       TransportSocketTLS,
		ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: mustPack(errs, downstreamTLSContext(secretNames, http, cv, params))},
	}
}

// downstreamTLSContext is downstreamTLS's TLS context.
func downstreamTLSContext(secretNames []string, http bool, cv *ir.ClientValidation, params *ir.ClientTLS) *tlsv3.DownstreamTlsContext {
	sds := make([]*tlsv3.SdsSecretConfig, 0, len(secretNames))
	for _, name := range secretNames {
		sds = append(sds, &tlsv3.SdsSecretConfig{Name: name, SdsConfig: adsSource()})
	}
	ctx := &tlsv3.DownstreamTlsContext{CommonTlsContext: &tlsv3.CommonTlsContext{TlsCertificateSdsSecretConfigs: sds}}
	if http {
		ctx.CommonTlsContext.AlpnProtocols = []string{"h2", "http/1.1"}
	}
	if p := params; p != nil {
		tp := &tlsv3.TlsParameters{
			TlsMinimumProtocolVersion: tlsVersions[p.MinVersion],
			TlsMaximumProtocolVersion: tlsVersions[p.MaxVersion],
			CipherSuites:              p.Ciphers,
			EcdhCurves:                p.ECDHCurves,
			SignatureAlgorithms:       p.SignatureAlgorithms,
		}
		if proto.Size(tp) > 0 {
			ctx.CommonTlsContext.TlsParams = tp
		}
		if http && len(p.ALPN) > 0 {
			ctx.CommonTlsContext.AlpnProtocols = p.ALPN
		}
		if p.NoStatelessResumption {
			ctx.SessionTicketKeysType = &tlsv3.DownstreamTlsContext_DisableStatelessSessionResumption{DisableStatelessSessionResumption: true}
		}
		ctx.DisableStatefulSessionResumption = p.NoStatefulResumption
	}
	if cv != nil {
		vc := &tlsv3.CertificateValidationContext{
			TrustedCa: &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: cv.CACertificates}},
		}
		switch {
		case cv.AllowInsecureFallback:
			vc.TrustChainVerification = tlsv3.CertificateValidationContext_ACCEPT_UNTRUSTED
		case cv.Optional:
			// Asked for and verified when given (a certificate of another CA fails the
			// handshake), not required.
		default:
			ctx.RequireClientCertificate = wrapperspb.Bool(true)
		}
		ctx.CommonTlsContext.ValidationContextType = &tlsv3.CommonTlsContext_ValidationContext{ValidationContext: vc}
	}
	return ctx
}

// http3Chains are the QUIC filter chains of an HTTP3 listener, one per TLS server, chosen by
// SNI: TLS 1.3 in QUIC with the server's certificates (SDS) and ALPN h3, into a connection
// manager of codec HTTP/3 serving the server's route configuration (the same as over HTTPS).
func http3Chains(l *ir.Listener, errs *[]error) []*listenerv3.FilterChain {
	out := make([]*listenerv3.FilterChain, 0, len(l.TLS))
	for _, srv := range l.TLS {
		hcm := httpConnectionManager(l, srv.RouteConfig, errs)
		hcm.CodecType = hcmv3.HttpConnectionManager_HTTP3
		hcm.Http3ProtocolOptions = &corev3.Http3ProtocolOptions{}
		tls := downstreamTLSContext(srv.Secrets, false, nil, nil)
		tls.CommonTlsContext.AlpnProtocols = []string{"h3"}
		fc := &listenerv3.FilterChain{
			Filters: []*listenerv3.Filter{networkFilter(FilterHTTPConnectionManger, errs, hcm)},
			TransportSocket: &corev3.TransportSocket{
				Name:       TransportSocketQUIC,
				ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: mustPack(errs, &quicv3.QuicDownstreamTransport{DownstreamTlsContext: tls})},
			},
		}
		if len(srv.ServerNames) > 0 {
			fc.FilterChainMatch = &listenerv3.FilterChainMatch{ServerNames: srv.ServerNames}
		}
		out = append(out, fc)
	}
	return out
}
