package translator

import (
	"net/netip"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"google.golang.org/protobuf/proto"

	"kubelb.dev/kubelb/internal/ir"
)

// A SecurityPolicy's authorization on a TCP listener or a TLS chain that proxies (a TCPRoute's,
// a TLSRoute's; ir.Listener.Authorization, ir.TLSServer.Authorization) chooses the filter
// chain by the connection's source address, as the source ranges of a LoadBalancer do
// (sourceranges.go): an allowed client's connection gets the chain that proxies it, a refused
// one gets a chain whose TCP proxy has no cluster (FailedBackendCluster: closed as soon as it
// is accepted, before any TLS handshake). No upstream connection is ever made for a refused
// client, whatever the protocol
// (Envoy's network RBAC filter decides on the client's first bytes, after the TCP proxy
// connected upstream: a server that speaks first would greet a refused client).
//
// Envoy picks among chains of one server name the one with the most specific source prefix,
// while the rules decide in order (the first whose ranges hold the address). streamRanges
// makes the one from the other: a range held by an earlier rule's range (or equal to it) is
// never decided by its own rule and is left out; any other range either holds the earlier
// ranges it overlaps (CIDRs nest or are apart), whose own rules then decide by being more
// specific, or is apart from them. So the most specific range left that holds an address is
// that of the first rule holding it.

// streamRanges are the ranges of authorization a that decide, with their rule's verdict: the
// allowed and the refused ones (canonical CIDRs, in the rules' order).
func streamRanges(a *ir.Authorization) (allow, deny []string) {
	var seen []netip.Prefix
	for _, r := range a.Rules {
		for _, s := range r.SourceRanges {
			p, err := netip.ParsePrefix(s)
			if err != nil { // the IR is validated: canonical CIDRs only
				continue
			}
			held := false
			for _, q := range seen {
				if q.Addr().Is4() == p.Addr().Is4() && q.Bits() <= p.Bits() && q.Contains(p.Addr()) {
					held = true
					break
				}
			}
			if held {
				continue
			}
			seen = append(seen, p)
			if r.Allow {
				allow = append(allow, s)
			} else {
				deny = append(deny, s)
			}
		}
	}
	return allow, deny
}

// authorizedChains is fc (a chain that proxies: its match, its filters) under authorization
// a (nil: fc as it is): fc for the allowed ranges, a chain closing the connection (statPrefix,
// logs as fc's TCP proxy) for the refused ones, and for every other address fc or the
// closing chain as the default says.
func authorizedChains(fc *listenerv3.FilterChain, a *ir.Authorization, statPrefix string, logs bool, errs *[]error) []*listenerv3.FilterChain {
	if a == nil {
		return []*listenerv3.FilterChain{fc}
	}
	allow, deny := streamRanges(a)
	with := func(c *listenerv3.FilterChain, ranges []string) *listenerv3.FilterChain {
		m := &listenerv3.FilterChainMatch{}
		if fc.FilterChainMatch != nil {
			m = proto.Clone(fc.FilterChainMatch).(*listenerv3.FilterChainMatch)
		}
		m.SourcePrefixRanges = cidrRanges(ranges)
		if proto.Size(m) == 0 {
			m = nil
		}
		c.FilterChainMatch = m
		return c
	}
	closed := func(ranges []string) *listenerv3.FilterChain {
		tp := tcpProxy(statPrefix, "", nil, 1) // FailedBackendCluster only: closed at once
		tp.AccessLog = accessLog(logs, false, statPrefix, errs)
		return with(&listenerv3.FilterChain{Filters: []*listenerv3.Filter{networkFilter(FilterTCPProxy, errs, tp)}}, ranges)
	}
	var out []*listenerv3.FilterChain
	if len(allow) > 0 {
		out = append(out, with(proto.Clone(fc).(*listenerv3.FilterChain), allow))
	}
	if len(deny) > 0 { // refused: closed before any TLS handshake or upstream connection
		out = append(out, closed(deny))
	}
	// Every other address, under the same server names: the default's chain (a refused
	// client never falls through to another chain of the listener).
	if a.DefaultAllow {
		out = append(out, with(proto.Clone(fc).(*listenerv3.FilterChain), nil))
	} else {
		out = append(out, closed(nil))
	}
	return out
}
