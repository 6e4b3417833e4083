package translate

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/ir"
)

// streamRoute translates a TLSRoute (an SNI chain, TLS passed through or terminated),
// TCPRoute or UDPRoute: the usable backends of its rule (its first, should older CRDs have
// let more through), by weight, become the TCP proxy of every listener it attached to (a
// UDPRoute: the UDP proxy, to one cluster whose endpoint groups share the sessions by
// weight). A TCP or UDP listener carries one route: the oldest attached keeps it.
func (a *attacher) streamRoute(r *v1alpha1.Route, kind string) {
	t := a.t
	var (
		meta      metav1.ObjectMeta
		common    gwv1.CommonRouteSpec
		hostnames []gwv1.Hostname
		rules     [][]gwv1.BackendRef
		names     []string // the rules' names ("" for none): a policy may target one
	)
	name := func(n *gwv1.SectionName) string {
		if n == nil {
			return ""
		}
		return string(*n)
	}
	switch kind {
	case KindTLSRoute:
		var o gwv1.TLSRoute
		if !t.decode(r, &o) {
			return
		}
		meta, common, hostnames = o.ObjectMeta, o.Spec.CommonRouteSpec, o.Spec.Hostnames
		for _, rl := range o.Spec.Rules {
			rules, names = append(rules, rl.BackendRefs), append(names, name(rl.Name))
		}
	case KindTCPRoute:
		var o gwv1.TCPRoute
		if !t.decode(r, &o) {
			return
		}
		meta, common = o.ObjectMeta, o.Spec.CommonRouteSpec
		for _, rl := range o.Spec.Rules {
			rules, names = append(rules, rl.BackendRefs), append(names, name(rl.Name))
		}
	case KindUDPRoute:
		var o gwv1.UDPRoute
		if !t.decode(r, &o) {
			return
		}
		meta, common = o.ObjectMeta, o.Spec.CommonRouteSpec
		for _, rl := range o.Spec.Rules {
			rules, names = append(rules, rl.BackendRefs), append(names, name(rl.Name))
		}
	}
	ro := a.newRouteObj(r, kind, meta, common, hostnames)
	parents := a.attach(ro)
	// Every attached route is accepted and counted; a TCP or UDP listener forwards to one
	// route, the oldest: the others stay attached without traffic (Gateway API).
	countAttached(parents)
	for _, p := range parents {
		var keep []*gwListener
		var hosts [][]string
		var taken []string
		for i, l := range p.listeners {
			if l.family == familyTCP || l.family == familyUDP {
				if l.streamRoute != "" && l.streamRoute != r.Name {
					taken = append(taken, fmt.Sprintf("listener %s already carries the %s of Route %s (the oldest route is served)", truncate(string(l.spec.Name)), kind, l.streamRoute))
					continue
				}
				l.streamRoute = r.Name
			}
			keep = append(keep, l)
			hosts = append(hosts, p.hosts[i])
		}
		p.listeners, p.hosts = keep, hosts
		if len(taken) > 0 {
			t.problems.Add(t.ref(r, p.section), ir.SeverityWarning, ReasonListenerTaken, "%s; this route is attached but gets no traffic there", strings.Join(taken, "; "))
		}
	}

	rs := &refs{}
	owner := t.ref(r, "rule 0")
	var brefs []gwv1.BackendRef
	rule := "" // the served rule's name: a policy may target it
	if len(rules) > 0 {
		brefs, rule = rules[0], names[0]
	}
	t.checkPolicySections(r, slices.DeleteFunc(slices.Clone(names), func(n string) bool { return n == "" }), "rule")
	if len(rules) > 1 {
		// Gateway API v1.6.3 allows exactly one rule (the CRDs' maxItems); older CRDs
		// allowed more, with no way to choose among them.
		t.problems.Add(t.ref(r, ""), ir.SeverityWarning, ReasonTooMany, "a %s has one rule in Gateway API v1.6.3 (the CRD allows no more); the first rule is served, %d more ignored", kind, len(rules)-1)
	}
	if len(brefs) > maxBackendRefs {
		brefs = brefs[:maxBackendRefs]
	}
	served := false
	for _, p := range parents {
		for _, l := range p.listeners {
			served = served || l.served
		}
	}
	proto := corev1.ProtocolTCP
	udp := kind == KindUDPRoute
	if udp {
		proto = corev1.ProtocolUDP
	}
	// Every usable backendRef (weight > 0, resolved) becomes a weighted cluster of the TCP
	// proxy of each listener (streamTargets: the clusters depend on the listener's TLS mode
	// and the policies that apply through it); a backend that cannot be resolved is reported
	// and its share of connections refused. Envoy's UDP proxy sends every datagram to one
	// cluster: a UDPRoute's usable backends become the endpoint groups of one cluster, which
	// share the sessions by weight (udpBackends); the share of a backend that cannot be
	// resolved goes to the others.
	var failed uint32
	type failedRef struct {
		backendRef
		share bool // its weight is refused
	}
	var bad []failedRef
	var ports []weightedStreamPort // the resolved backends, by weight
	for _, ref := range brefs {
		b := a.checkBackendRef(ro, ref)
		use := served && b.weight > 0
		if b.reason == "" && !use {
			a.dryResolve(ro, &b)
		}
		if b.reason == "" && use {
			sp, reason, msg := t.resolveStreamPort(r, b.namespace, b.name, b.port, proto)
			if reason != "" {
				b.reason, b.message = gwv1.RouteReasonBackendNotFound, msg
			} else {
				ports = addWeightedPort(ports, sp, uint32(b.weight))
			}
		}
		if b.reason != "" {
			rs.add(b.reason, b.message)
			share := served && b.weight > 0
			if share && !udp {
				failed += uint32(b.weight) // checkBackendRef bounds weights to 0-1000000
			}
			bad = append(bad, failedRef{b, share})
		}
	}
	usable := len(ports) > 0
	for _, b := range bad {
		msg := b.message
		switch {
		case b.share && udp && usable:
			msg += "; its share of sessions goes to the other backends (Envoy's UDP proxy cannot drop a share of datagrams)"
		case b.share && usable:
			msg += "; its share of connections is refused"
		}
		t.problems.Add(owner, ir.SeverityWarning, string(b.reason), "%s", msg)
	}
	if !usable {
		failed = 0
		if served {
			t.problems.Add(owner, ir.SeverityError, ReasonBackendNotFound, "the %s has no usable backend; connections are refused", kind)
			rs.invalid("rule 0: no usable backend")
		}
	}
	if usable {
		targets := streamTargets{t: t, r: r, meta: meta, owner: owner, ports: ports, failed: failed}
		for _, p := range parents {
			for i, l := range p.listeners {
				if !l.served {
					continue
				}
				pol := t.streamPolicyFor(r, kind, rule, l, owner) // gateway_stream_policy.go
				var to streamTo
				if udp {
					to = targets.udp(pol.traffic)
				} else {
					to = targets.of(l, pol.traffic)
				}
				to.authorization, to.hashSourceIP = pol.authorization, pol.hashSourceIP
				switch l.family {
				case familyTLS:
					l.sni = append(l.sni, sniChain{names: p.hosts[i], to: to, owner: owner})
				case familyTCP, familyUDP:
					l.stream, l.streamOwner = to, owner
				}
			}
		}
	}
	a.routeStatus(ro, parents, rs)
}

// streamTargets makes the targets of a stream route's listeners (a TCP listener, a TLS
// listener's chain) from its resolved backends (ports) and the weight of those that could not
// be resolved (failed), once per kind of listener and BackendTrafficPolicy (its clusters:
// "<cluster>/traffic/<policy>"):
//   - TCP, TLS Passthrough: the connection goes to the backends' plain TCP clusters as it is;
//   - TLS Terminate: the decrypted stream goes to each backend in plain text, or, when a
//     BackendTLSPolicy targets the backend's Service port (the Route's context.backendTLS),
//     re-encrypted to it (a TLS cluster, presenting the Gateway's client certificate when it
//     has one). A policy the hub cannot use refuses the backend's share of connections with
//     an InvalidBackendTLS warning: never plain text.
//
// A UDPRoute's listeners get one cluster (udp).
type streamTargets struct {
	t        *l7
	r        *v1alpha1.Route
	meta     metav1.ObjectMeta
	owner    ir.ObjectRef
	ports    []weightedStreamPort
	failed   uint32
	made     map[string]streamTo // by "passthrough", or "terminate/<client certificate>", then "|<policy>"
	reported map[streamPort]bool // InvalidBackendTLS warnings given
}

// udp is the target of a UDPRoute's listener under traffic (nil: none).
func (v *streamTargets) udp(traffic *backendTraffic) streamTo {
	key := "udp"
	if traffic != nil {
		key += "|" + traffic.policy
	}
	if to, ok := v.made[key]; ok {
		return to
	}
	to := streamTo{backends: []ir.WeightedCluster{{Cluster: v.t.udpBackends(v.r, v.meta, v.owner, v.ports, traffic), Weight: 1}}}
	if v.made == nil {
		v.made = map[string]streamTo{}
	}
	v.made[key] = to
	return to
}

// of is the target of listener l (TCP, TLS) under traffic (nil: none).
func (v *streamTargets) of(l *gwListener, traffic *backendTraffic) streamTo {
	terminate, clientCert := l.mode == gwv1.TLSModeTerminate, ""
	key := "passthrough"
	if terminate {
		clientCert = l.gw.clientCert
		key = "terminate/" + clientCert
	}
	if traffic != nil {
		key += "|" + traffic.policy
	}
	if to, ok := v.made[key]; ok {
		return to
	}
	t := v.t
	to := streamTo{failed: v.failed}
	for _, wp := range v.ports {
		var up *ir.UpstreamTLS
		if terminate {
			var msg string
			up, msg = t.backendTLS(v.r, wp.namespace, wp.name, wp.port)
			if msg != "" {
				to.failed += wp.weight
				if !v.reported[wp.streamPort] {
					if v.reported == nil {
						v.reported = map[streamPort]bool{}
					}
					v.reported[wp.streamPort] = true
					t.problems.Add(v.owner, ir.SeverityWarning, ReasonInvalidBackendTLS, "%s; its share of the connections the Gateway's TLS listeners in mode Terminate decrypt is refused, not sent unencrypted", msg)
				}
				continue
			}
			if up != nil && clientCert != "" {
				up.ClientCertificate = clientCert
			}
		}
		cluster := t.streamClusterTLS(v.r, v.owner, wp.streamPort, up, traffic)
		if i := slices.IndexFunc(to.backends, func(w ir.WeightedCluster) bool { return w.Cluster == cluster }); i >= 0 {
			to.backends[i].Weight += wp.weight
			continue
		}
		to.backends = append(to.backends, ir.WeightedCluster{Cluster: cluster, Weight: wp.weight})
	}
	if v.made == nil {
		v.made = map[string]streamTo{}
	}
	v.made[key] = to
	return to
}

// streamTo is where a stream route's connections go: clusters shared by weight, and the
// weight of backends that could not be resolved (refused); which clients' connections go
// (authorization, nil: all) and whether they are hashed on the client address.
type streamTo struct {
	backends      []ir.WeightedCluster
	failed        uint32
	authorization *ir.Authorization
	hashSourceIP  bool
}

// target is the IR of a TCP listener or a TLS listener's chain: Cluster when every connection
// goes to one cluster, otherwise Backends and FailedWeight.
func (s streamTo) target() (string, []ir.WeightedCluster, uint32) {
	if len(s.backends) == 1 && s.failed == 0 {
		return s.backends[0].Cluster, nil, 0
	}
	return "", slices.Clone(s.backends), s.failed
}

// streamPort is a backend Service port of a stream route, resolved to its NodePort.
type streamPort struct {
	namespace, name string
	port, nodePort  int32
	proto           corev1.Protocol
}

// weightedStreamPort is a resolved backend of a stream route and its weight.
type weightedStreamPort struct {
	streamPort
	weight uint32
}

// addWeightedPort adds a backend to ports, adding its weight to that of an earlier
// backendRef to the same Service port.
func addWeightedPort(ports []weightedStreamPort, sp streamPort, weight uint32) []weightedStreamPort {
	if i := slices.IndexFunc(ports, func(w weightedStreamPort) bool { return w.streamPort == sp }); i >= 0 {
		ports[i].weight += weight
		return ports
	}
	return append(ports, weightedStreamPort{sp, weight})
}

// resolveStreamPort finds a TCP or UDP backend Service port of a route among the Services the
// route carries, and its NodePort. On failure it returns the problem's reason and message.
func (t *l7) resolveStreamPort(r *v1alpha1.Route, namespace, name string, port int32, proto corev1.Protocol) (streamPort, string, string) {
	if reason, msg := t.checkServiceName(namespace, name); reason != "" {
		return streamPort{}, reason, msg
	}
	svc := t.service(r, namespace, name)
	if svc == nil {
		return streamPort{}, ReasonBackendNotFound, fmt.Sprintf("Service %s/%s is not among the Services the route carries", truncate(namespace), truncate(name))
	}
	var sp *corev1.ServicePort
	for i := range svc.Spec.Ports {
		p := &svc.Spec.Ports[i]
		if p.Port == port && v1alpha1.ProtocolOrTCP(p.Protocol) == proto {
			sp = p
			break
		}
	}
	if sp == nil {
		return streamPort{}, ReasonBackendNotFound, fmt.Sprintf("Service %s/%s has no %s port %d", truncate(namespace), truncate(name), proto, port)
	}
	if sp.NodePort < 1 || sp.NodePort > 65535 {
		return streamPort{}, ReasonBackendNoNodePort, fmt.Sprintf("port %d of Service %s/%s has no NodePort; the hub reaches tenant backends only on NodePorts", port, truncate(namespace), truncate(name))
	}
	return streamPort{namespace: namespace, name: name, port: port, nodePort: sp.NodePort, proto: proto}, "", ""
}

// streamClusterTLS adds (once) the cluster of a resolved stream backend, whose connections
// are encrypted with up when it is set (a TCP backend of a TLSRoute that a Terminate listener
// serves and a BackendTLSPolicy targets: "<route>/<ns>/<svc>/<port>/tcp/tls", then
// "/client/<secret>" with a client certificate), under the cluster settings of traffic (nil:
// none; then "/traffic/<policy>"), and returns its name. TCP clusters get the health check of
// Options (as Layer 4).
func (t *l7) streamClusterTLS(r *v1alpha1.Route, owner ir.ObjectRef, sp streamPort, up *ir.UpstreamTLS, traffic *backendTraffic) string {
	p := strings.ToLower(string(sp.proto))
	clusterName := backendClusterName(r.Name, sp.namespace, sp.name, sp.port, p)
	if up != nil {
		clusterName += "/tls"
		if up.ClientCertificate != "" {
			clusterName += "/client/" + up.ClientCertificate
		}
	}
	if traffic != nil {
		clusterName = trafficClusterName(clusterName, traffic)
	}
	if c, ok := t.clusterIndex()[clusterName]; ok {
		c.Owners = append(c.Owners, owner)
		return clusterName
	}
	c := &ir.Cluster{
		Name:           clusterName,
		StatName:       strings.ReplaceAll(fmt.Sprintf("%s/%s/%s-%d", sp.namespace, sp.name, p, sp.port), ".", "_"),
		Protocol:       ir.UpstreamTCP,
		Owners:         []ir.ObjectRef{owner},
		Endpoints:      t.endpoints(r, uint32(sp.nodePort)),
		ConnectTimeout: ir.Duration(t.opts.ConnectTimeout),
		MaxConnections: t.opts.MaxConnectionsPerCluster,
		TLS:            up,
	}
	if up != nil {
		c.StatName += "-tls"
	}
	if sp.proto == corev1.ProtocolUDP {
		c.Protocol = ir.UpstreamUDP
	} else if hc := t.opts.HealthCheck; !hc.Disabled {
		c.HealthCheck = &ir.HealthCheck{
			Interval:           ir.Duration(hc.Interval),
			Timeout:            ir.Duration(hc.Timeout),
			UnhealthyThreshold: hc.UnhealthyThreshold,
			HealthyThreshold:   hc.HealthyThreshold,
			NoTrafficInterval:  ir.Duration(hc.NoTrafficInterval),
		}
	}
	if traffic != nil {
		t.applyCluster(c, traffic, owner)
	}
	if len(c.Endpoints) == 0 {
		t.problems.Add(owner, ir.SeverityWarning, ReasonNoEndpoints, "the backend %s/%s:%d has no usable endpoints; connections fail until the tenant has Ready nodes with valid addresses",
			truncate(sp.namespace), truncate(sp.name), sp.port)
	}
	t.clusters[clusterName] = c
	t.cfg.Clusters = append(t.cfg.Clusters, c)
	return clusterName
}

// udpBackends returns the cluster of a UDPRoute's usable backends: the cluster of its one
// backend, or, for more, one cluster "<route>/udp" whose endpoint groups (one per backend
// Service port, named "<ns>/<svc>/<port>") share the sessions by the backends' weights (at
// most maxBackendRefs × 1000000 in all). Each backend's endpoints are the tenant nodes'
// addresses × its NodePort, bounded per backend as a cluster's are. Under traffic (nil: none)
// the cluster takes its settings and is "<cluster>/traffic/<policy>".
func (t *l7) udpBackends(r *v1alpha1.Route, meta metav1.ObjectMeta, owner ir.ObjectRef, ports []weightedStreamPort, traffic *backendTraffic) string {
	if len(ports) == 1 {
		return t.streamClusterTLS(r, owner, ports[0].streamPort, nil, traffic)
	}
	clusterName := r.Name + "/udp"
	if traffic != nil {
		clusterName = trafficClusterName(clusterName, traffic)
	}
	if c, ok := t.clusterIndex()[clusterName]; ok { // another listener under the same policy
		c.Owners = append(c.Owners, owner)
		return clusterName
	}
	c := &ir.Cluster{
		Name:           clusterName,
		StatName:       strings.ReplaceAll(fmt.Sprintf("%s/%s/udp", meta.Namespace, meta.Name), ".", "_"),
		Protocol:       ir.UpstreamUDP,
		Owners:         []ir.ObjectRef{owner},
		ConnectTimeout: ir.Duration(t.opts.ConnectTimeout),
		MaxConnections: t.opts.MaxConnectionsPerCluster,
	}
	for _, wp := range ports {
		group := fmt.Sprintf("%s/%s/%d", wp.namespace, wp.name, wp.port)
		c.Groups = append(c.Groups, ir.EndpointGroup{Name: group, Weight: wp.weight})
		eps := t.endpoints(r, uint32(wp.nodePort))
		if len(eps) == 0 {
			t.problems.Add(owner, ir.SeverityWarning, ReasonNoEndpoints, "the backend %s/%s:%d has no usable endpoints; its share of sessions goes to the other backends until the tenant has Ready nodes with valid addresses",
				truncate(wp.namespace), truncate(wp.name), wp.port)
		}
		for _, e := range eps {
			e.Group = group
			c.Endpoints = append(c.Endpoints, e)
		}
	}
	if traffic != nil {
		t.applyCluster(c, traffic, owner)
	}
	t.clusterIndex()[clusterName] = c
	t.cfg.Clusters = append(t.cfg.Clusters, c)
	return clusterName
}
