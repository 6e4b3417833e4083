package ir

import "errors"

// Policies on the Gateway's stream routes (TCPRoutes, TLSRoutes, UDPRoutes): a
// SecurityPolicy's authorization on the TCP listener or the TLS chain carrying a route, and
// the parts of a BackendTrafficPolicy that act on connections on its clusters.

// validateStreamPolicy checks a listener's authorization: TCP listeners only.
func (l *Listener) validateStreamPolicy() error {
	if l.Authorization == nil {
		return nil
	}
	if l.Protocol != ProtocolTCP {
		return errors.New("an authorization on a " + string(l.Protocol) + " listener (TCP only; HTTP routes have their own)")
	}
	if len(l.SourceRanges) > 0 { // both choose the filter chain by the client's address
		return errors.New("an authorization and source ranges on one listener")
	}
	return l.Authorization.validate()
}

// validateStreamPolicy checks a chain's authorization and hash: chains that proxy only.
func (t *TLSServer) validateStreamPolicy() error {
	if (t.Authorization != nil || t.HashSourceIP) && !t.Proxies() {
		return errors.New("an authorization or a hash on a chain that serves HTTP routes (their routes have their own)")
	}
	return t.Authorization.validate()
}

// validateStream checks that the traffic settings of a cluster of protocol p act on what it
// carries: HTTP clusters take them all; TCP clusters no idle timeout or requests per
// connection (HTTP's); UDP clusters the load balancer only.
func (t *ClusterTraffic) validateStream(p UpstreamProtocol) error {
	switch p {
	case UpstreamHTTP1, UpstreamHTTP2:
		return nil
	case UpstreamTCP:
		if t.IdleTimeout != 0 || t.MaxRequestsPerConnection != 0 {
			return errors.New("an idle timeout or requests per connection on a TCP cluster (HTTP only)")
		}
		return nil
	case UpstreamUDP:
		if t.IdleTimeout != 0 || t.MaxRequestsPerConnection != 0 || t.MaxPendingRequests != 0 || t.MaxRequests != 0 || t.MaxRetries != 0 || t.Outlier != nil {
			return errors.New("a UDP cluster takes a load balancer only")
		}
		return nil
	}
	return errors.New("traffic settings on a cluster of protocol " + string(p))
}
