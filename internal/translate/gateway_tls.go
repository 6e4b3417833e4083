package translate

import (
	"fmt"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"kubelb.dev/kubelb/internal/ir"
)

// tlsChains builds the SNI filter chains of the served HTTPS and TLS listeners ls sharing
// one port of Gateway g, in listener order, and returns them with owners extended by the
// routes whose chains they carry:
//   - an HTTPS listener: one chain terminating TLS with its certificate into its route
//     configuration (server name: the listener hostname; none → the fallback chain);
//   - a TLS listener: one chain per attached TLSRoute (server names: the hostnames the route
//     shares with the listener), proxying the connection to the route's backends — still
//     encrypted in mode Passthrough, decrypted with the listener's certificate in mode
//     Terminate. Both modes may share the port (Gateway API's TLSRouteModeMixed).
//
// A server name is served by the first chain that claims it, and the port has at most one
// fallback chain: a later claim is left out with a HostnameConflict warning on its owner.
// cors and sessions tell whether a route of an HTTPS chain has a CORS policy or session
// persistence (the listener runs the CORS or the stateful session filter).
func (t *l7) tlsChains(g *gateway, ls []*gwListener, owners []ir.ObjectRef) (_ []*ir.TLSServer, _ []ir.ObjectRef, cors, sessions bool) {
	port := ls[0].spec.Port
	var out []*ir.TLSServer
	used := map[string]bool{}
	fallback := false
	// claim gives srv the server names not taken yet (or the fallback, for names "" or
	// "*"); false when nothing is left for it.
	claim := func(srv *ir.TLSServer, names []string, owner ir.ObjectRef) bool {
		if len(names) == 0 || names[0] == "*" {
			if fallback {
				t.problems.Add(owner, ir.SeverityWarning, string(gwv1.ListenerReasonHostnameConflict), "another chain on port %d already takes connections without a matching server name; left out", port)
				return false
			}
			fallback = true
			return true
		}
		for _, n := range names {
			if used[n] {
				t.problems.Add(owner, ir.SeverityWarning, string(gwv1.ListenerReasonHostnameConflict), "server name %q is already served by another chain on port %d; left out here", truncate(n), port)
				continue
			}
			used[n] = true
			srv.ServerNames = append(srv.ServerNames, n)
		}
		return len(srv.ServerNames) > 0
	}
	type chain struct {
		l  *gwListener
		rc *ir.RouteConfig
	}
	var chains []chain // the HTTPS listeners given a chain
	for _, l := range ls {
		if l.spec.Protocol == gwv1.TLSProtocolType {
			for _, c := range l.sni {
				srv := &ir.TLSServer{}
				if l.mode == gwv1.TLSModeTerminate {
					srv.Secrets, srv.ClientValidation = l.secrets, l.validation
				}
				srv.Cluster, srv.Backends, srv.FailedWeight = c.to.target()
				srv.Authorization, srv.HashSourceIP = c.to.authorization, c.to.hashSourceIP // gateway_stream_policy.go
				if !claim(srv, c.names, c.owner) {
					continue
				}
				out = append(out, srv)
				owners = append(owners, c.owner)
			}
			continue
		}
		rc := &ir.RouteConfig{Name: fmt.Sprintf("gateway/%s/https-%d/%s", g.route.Name, port, l.configName())}
		srv := &ir.TLSServer{Secrets: l.secrets, RouteConfig: rc.Name, ClientValidation: l.validation}
		var names []string
		if l.hostname != "" {
			names = []string{l.hostname}
		}
		if !claim(srv, names, l.ref(t)) {
			continue
		}
		t.cfg.RouteConfigs = append(t.cfg.RouteConfigs, rc)
		out = append(out, srv)
		chains = append(chains, chain{l, rc})
	}
	// The virtual hosts once every HTTPS chain of the port is known: each answers 421 for the
	// hosts of the others (TLS listeners carry no HTTP, so their hostnames do not count).
	https := make([]*gwListener, 0, len(chains))
	for _, c := range chains {
		https = append(https, c.l)
	}
	for _, c := range chains {
		c.rc.VirtualHosts = httpsVirtualHosts(c.l, https, c.l.ref(t), t.vhosts)
		cors = cors || c.rc.HasCORS()
		sessions = sessions || c.rc.HasSessionPersistence()
	}
	return out, owners, cors, sessions
}
